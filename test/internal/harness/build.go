// Package harness holds what drover's process-level test suites share:
// building the binary once, starting agents as real processes, talking to
// them over HTTP and through the CLI, finding the processes they leave
// behind, and waiting on conditions with deadlines.
//
// It is an internal package of the test tree: only test/... imports it, and
// it never imports core/, so the suites keep testing the wire format and
// the binary a user runs rather than drover's Go types.
package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build builds ./cmd/drover into a fresh temp dir and returns the binary,
// the module root (where examples/ lives) and a cleanup that removes the
// binary. A suite calls it once from TestMain.
func Build() (bin, root string, cleanup func(), err error) {
	root, err = ModuleRoot()
	if err != nil {
		return "", "", nil, err
	}
	dir, err := os.MkdirTemp("", "drover-test-bin-")
	if err != nil {
		return "", "", nil, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	bin = filepath.Join(dir, "drover")
	build := exec.Command(GoTool(), "build", "-o", bin, "./cmd/drover")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		cleanup()
		return "", "", nil, fmt.Errorf("building drover failed: %w\n%s", err, out)
	}
	return bin, root, cleanup, nil
}

// ModuleRoot asks the go command where go.mod is, so the tests work from
// any directory `go test` runs them in.
func ModuleRoot() (string, error) {
	out, err := exec.Command(GoTool(), "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the drover module (go env GOMOD = %q)", gomod)
	}
	return filepath.Dir(gomod), nil
}

// GoTool is the go command: the one on PATH, else the one under $GOROOT
// when the environment names it.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}
