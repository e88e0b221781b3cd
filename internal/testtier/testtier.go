// Package testtier splits drover's tests into two tiers and says, in every
// skip, why a test is not in the fast one.
//
//   - The fast tier, `make check`, is `go test -short`: everything that needs
//     no agent process, no Docker engine and no browser, and waits on no
//     wall-clock timer of its own. It is what a developer runs after each
//     change.
//   - The full tier, `make test` (what CI runs), is `go test -race` without
//     -short: every test.
//
// A test that belongs to the full tier only calls one of the helpers below
// first thing (or its start helper does, for every test that uses it); a
// suite that is all process-level (test/e2e, test/cluster, test/docker)
// asks SkipSuite in its TestMain, before it builds anything. This is a
// test helper package: nothing in production imports it. Plugins' tests
// import only sdk/, so they check testing.Short() themselves (the docker
// driver's engine tests do).
package testtier

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// skip skips t in the fast tier with why, and does nothing otherwise.
func skip(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("full tier only (make test; make check runs -short): %s", why)
	}
}

// Agent marks a test that starts a drover agent: its server, client and
// the plugin processes the agent launches.
func Agent(t testing.TB) {
	t.Helper()
	skip(t, "starts a drover agent and its plugin processes")
}

// Browser marks a test that drives headless Chromium.
func Browser(t testing.TB) {
	t.Helper()
	skip(t, "drives a headless browser")
}

// Slow marks a test that spends its time waiting on something outside the
// code under test (a wall-clock boundary, a fixed timeout, the go
// toolchain); why says what.
func Slow(t testing.TB, why string) {
	t.Helper()
	skip(t, why)
}

// SkipSuite is for the TestMain of a package whose every test is full
// tier: it parses the test flags and, under -short, prints why the suite
// does not run and reports true, so TestMain returns before it builds or
// starts anything.
func SkipSuite(why string) bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	if !testing.Short() {
		return false
	}
	fmt.Fprintf(os.Stdout, "full tier only (make test; make check runs -short): %s\n", why)
	return true
}
