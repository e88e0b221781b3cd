package ui

// What the browser tests of package ui_test, which start a whole dev
// agent (and so cannot be in package ui), share with the tests here.
var (
	CheckWellFormed = checkWellFormed
	Browser         = browser
)
