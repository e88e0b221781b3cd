package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// writeMain writes a main package that prints says into the module at
// root.
func writeMain(t *testing.T, root, says string) {
	t.Helper()
	src := "package main\n\nfunc main() { println(" + `"` + says + `"` + ") }\n"
	if err := os.WriteFile(filepath.Join(root, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// says runs the binary at path and returns what it printed.
func says(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command(path).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", path, err, out)
	}
	return strings.TrimSpace(string(out))
}

// The binary cache builds on a miss, hands out the same binary while the
// source is unchanged, rebuilds on a change, finds an older version again,
// and keeps only its most recent entries.
func TestBinCache(t *testing.T) {
	if _, err := exec.LookPath(GoTool()); err != nil {
		t.Skip("no go command")
	}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/bincache\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := binCache{dir: t.TempDir(), keep: 2}
	build := func(want string, wantHit bool) string {
		t.Helper()
		path, hit, err := c.build(root, ".", "prog")
		if err != nil {
			t.Fatal(err)
		}
		if hit != wantHit {
			t.Fatalf("hit = %v, want %v (building %q)", hit, wantHit, want)
		}
		if got := says(t, path); got != want {
			t.Fatalf("cached binary says %q, want %q", got, want)
		}
		return path
	}

	writeMain(t, root, "v1")
	v1 := build("v1", false)
	if again := build("v1", true); again != v1 {
		t.Errorf("unchanged source: %s, want the cached %s", again, v1)
	}
	writeMain(t, root, "v2")
	v2 := build("v2", false)
	if v2 == v1 {
		t.Fatal("a changed source got the old entry")
	}
	writeMain(t, root, "v1")
	build("v1", true)
	writeMain(t, root, "v3")
	build("v3", false)
	// keep = 2: v1 (used last but one) and v3 stay, v2 goes.
	if _, err := os.Stat(v1); err != nil {
		t.Errorf("recently used entry evicted: %v", err)
	}
	if _, err := os.Stat(v2); !os.IsNotExist(err) {
		t.Errorf("least recently used entry kept (stat: %v)", err)
	}
}

// Callers that ask at once build once: the others wait and find it.
func TestBinCacheBuildsOnceForConcurrentCallers(t *testing.T) {
	if _, err := exec.LookPath(GoTool()); err != nil {
		t.Skip("no go command")
	}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/bincache\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeMain(t, root, "once")
	c := binCache{dir: t.TempDir(), keep: 2}
	const callers = 3
	var wg sync.WaitGroup
	hits := make([]bool, callers)
	paths := make([]string, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() { paths[i], hits[i], errs[i] = c.build(root, ".", "prog") })
	}
	wg.Wait()
	misses := 0
	for i := range callers {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !hits[i] {
			misses++
		}
		if paths[i] != paths[0] {
			t.Errorf("caller %d got %s, caller 0 %s", i, paths[i], paths[0])
		}
	}
	if misses != 1 {
		t.Errorf("%d of %d concurrent callers built, want 1", misses, callers)
	}
	if got := says(t, paths[0]); got != "once" {
		t.Errorf("binary says %q", got)
	}
}

// BuiltCopy builds a package once per process and hands each test a copy
// of its own; RemoveBuilt removes the build.
func TestBuiltCopyBuildsOnce(t *testing.T) {
	builds := 0
	var built string
	buildCommand = func(pkg, name string) (string, string, func(), error) {
		builds++
		dir := t.TempDir()
		built = filepath.Join(dir, name)
		if err := os.WriteFile(built, []byte("binary of "+pkg), 0o755); err != nil {
			t.Fatal(err)
		}
		return built, "", func() { _ = os.RemoveAll(dir) }, nil
	}
	t.Cleanup(func() { buildCommand = BuildCommand; RemoveBuilt() })

	var copies []string
	for range 2 {
		t.Run("copy", func(t *testing.T) {
			path := BuiltCopy(t, "./x", "x")
			b, err := os.ReadFile(path)
			if err != nil || string(b) != "binary of ./x" || filepath.Base(path) != "x" {
				t.Fatalf("copy %s holds %q, %v", path, b, err)
			}
			copies = append(copies, path)
		})
	}
	if builds != 1 {
		t.Errorf("built %d times for two copies, want once", builds)
	}
	if len(copies) != 2 || copies[0] == copies[1] {
		t.Errorf("copies %v, want two distinct paths", copies)
	}
	RemoveBuilt()
	if _, err := os.Stat(built); !os.IsNotExist(err) {
		t.Errorf("the build outlives RemoveBuilt: %v", err)
	}
	BuiltCopy(t, "./x", "x")
	if builds != 2 {
		t.Errorf("after RemoveBuilt: %d builds, want a second one", builds)
	}
}
