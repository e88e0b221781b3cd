package scripts

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/testtier"
)

// scriptTimeout bounds one script run; fuzzing a few inputs takes seconds.
const scriptTimeout = 5 * time.Minute

// run runs name (a script of this dir, copied into root/scripts) in root
// and returns its combined output and exit code.
func run(t *testing.T, root, name string, env ...string) (string, int) {
	t.Helper()
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "scripts", name), string(src))
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", name))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s did not end within %s:\n%s", name, scriptTimeout, out.String())
	}
	if exit, ok := err.(*exec.ExitError); ok {
		return out.String(), exit.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out.String(), 0
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// A throwaway module with fuzz targets in two packages, one of them (in
// an external test package) failing on its seed: fuzz.sh finds all three,
// fuzzes each, runs the rest after the failure, and fails naming it.
func TestFuzzRunsEveryTarget(t *testing.T) {
	// go builds the module and the standard library again with fuzzing
	// instrumentation: a minute and more with a cold cache.
	testtier.Slow(t, "compiles the standard library for fuzzing (a minute with a cold build cache)")
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	root := t.TempDir()
	write(t, filepath.Join(root, "go.mod"), "module example.com/fz\n\ngo 1.22\n")
	write(t, filepath.Join(root, "a", "a.go"), "package a\n\nfunc Double(s string) string { return s + s }\n")
	write(t, filepath.Join(root, "a", "a_test.go"), `package a

import "testing"

func FuzzDouble(f *testing.F) {
	f.Add("x")
	f.Fuzz(func(t *testing.T, s string) {
		if len(Double(s)) != 2*len(s) {
			t.Fatal(s)
		}
	})
}

func FuzzDoubleTwice(f *testing.F) {
	f.Add("y")
	f.Fuzz(func(t *testing.T, s string) { _ = Double(Double(s)) })
}

func TestNotAFuzzTarget(t *testing.T) {}
`)
	write(t, filepath.Join(root, "b", "b.go"), "package b\n")
	write(t, filepath.Join(root, "b", "b_test.go"), `package b_test

import "testing"

func FuzzAlwaysFails(f *testing.F) {
	f.Add(1)
	f.Fuzz(func(t *testing.T, n int) { t.Fatalf("planted failure for %d", n) })
}
`)
	// Not a package go builds: its fuzz target must not be listed.
	write(t, filepath.Join(root, "a", "testdata", "x_test.go"), "package x\n\nimport \"testing\"\n\nfunc FuzzIgnored(f *testing.F) {}\n")

	out, code := run(t, root, "fuzz.sh", "FUZZTIME=20x")
	if code == 0 {
		t.Fatalf("fuzz.sh exited 0 with a failing target:\n%s", out)
	}
	for _, want := range []string{
		"fuzz: 3 targets",
		"==> fuzz example.com/fz/a FuzzDouble ",
		"==> fuzz example.com/fz/a FuzzDoubleTwice ",
		"==> fuzz example.com/fz/b FuzzAlwaysFails ",
		"planted failure",
		"1 of 3 targets failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("fuzz.sh output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "FuzzIgnored") || strings.Contains(out, "TestNotAFuzzTarget") {
		t.Errorf("fuzz.sh ran something that is not a fuzz target of the module:\n%s", out)
	}

	// Without the failing package every target passes.
	if err := os.RemoveAll(filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	out, code = run(t, root, "fuzz.sh", "FUZZTIME=20x")
	if code != 0 || !strings.Contains(out, "fuzz: 2 targets passed") {
		t.Errorf("fuzz.sh on passing targets: exit %d:\n%s", code, out)
	}
}

// A module without fuzz targets is a pass, not an error.
func TestFuzzWithoutTargets(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	root := t.TempDir()
	write(t, filepath.Join(root, "go.mod"), "module example.com/none\n\ngo 1.22\n")
	write(t, filepath.Join(root, "a", "a_test.go"), "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n")
	out, code := run(t, root, "fuzz.sh", "FUZZTIME=20x")
	if code != 0 || !strings.Contains(out, "no fuzz targets") {
		t.Errorf("fuzz.sh without targets: exit %d:\n%s", code, out)
	}
}

// A GOCACHE inside the tree would put the fuzz cache there: refused.
func TestFuzzRefusesCacheInTree(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	root := t.TempDir()
	write(t, filepath.Join(root, "go.mod"), "module example.com/none\n\ngo 1.22\n")
	out, code := run(t, root, "fuzz.sh", "GOCACHE="+filepath.Join(root, ".cache"))
	if code == 0 || !strings.Contains(out, "inside the work tree") {
		t.Errorf("fuzz.sh with GOCACHE in the tree: exit %d:\n%s", code, out)
	}
}

// check-tracked.sh passes a clean index and fails one holding a staged
// binary, or a text file over the limit, naming the file.
func TestCheckTracked(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on PATH")
	}
	root := t.TempDir()
	git(t, root, "init", "-q")
	write(t, filepath.Join(root, "README.md"), "hello\n")
	git(t, root, "add", "README.md")
	if out, code := run(t, root, "check-tracked.sh"); code != 0 {
		t.Fatalf("check-tracked.sh on a clean index: exit %d:\n%s", code, out)
	}

	// A build output: ELF-like bytes with NULs.
	write(t, filepath.Join(root, "drover"), "\x7fELF\x02\x01\x01\x00\x00\x00binary")
	git(t, root, "add", "-f", "drover")
	out, code := run(t, root, "check-tracked.sh")
	if code == 0 || !strings.Contains(out, "drover is a binary file") {
		t.Errorf("check-tracked.sh with a staged binary: exit %d:\n%s", code, out)
	}
	git(t, root, "rm", "-q", "--cached", "drover")

	write(t, filepath.Join(root, "big.txt"), strings.Repeat("a", 2048))
	git(t, root, "add", "big.txt")
	out, code = run(t, root, "check-tracked.sh", "MAX_TRACKED_BYTES=1024")
	if code == 0 || !strings.Contains(out, "big.txt is 2048 bytes") {
		t.Errorf("check-tracked.sh with a file over the limit: exit %d:\n%s", code, out)
	}
}
