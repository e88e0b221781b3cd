// Package scripts holds the repository's shell scripts (the demo, the fuzz
// runner, the tracked-file check) and the tests that run them on throwaway
// trees. It has no Go API.
package scripts
