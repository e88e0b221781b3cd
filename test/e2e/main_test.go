package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

var (
	// droverBin is the binary TestMain built for this run.
	droverBin string
	// repoRoot is the module root, where examples/jobs lives.
	repoRoot string
)

// TestMain builds drover once for every test and removes it afterwards. A
// failed build fails the whole run loudly: nothing here can be tested
// without the binary.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FATAL: %v\n", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "drover-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FATAL: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)

	bin := filepath.Join(dir, "drover")
	build := exec.Command(goTool(), "build", "-o", bin, "./cmd/drover")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FATAL: building drover failed: %v\n%s\n", err, out)
		return 1
	}
	droverBin, repoRoot = bin, root

	code := m.Run()
	// Every agent, CLI run and HTTP connection is closed by the tests'
	// cleanups; a goroutine still alive here is a leak in the harness.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: goroutine leak: %v\n", err)
			code = 1
		}
	}
	return code
}

// moduleRoot asks the go command where go.mod is, so the tests work from
// any directory `go test` runs them in.
func moduleRoot() (string, error) {
	out, err := exec.Command(goTool(), "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the drover module (go env GOMOD = %q)", gomod)
	}
	return filepath.Dir(gomod), nil
}

// goTool is the go command: the one on PATH, else the one under $GOROOT
// when the environment names it.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}
