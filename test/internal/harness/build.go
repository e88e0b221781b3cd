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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build builds ./cmd/drover and returns a copy of the binary in a fresh
// temp dir, the module root (where examples/ lives) and a cleanup that
// removes the copy. A suite calls it once from TestMain.
//
// The binary comes from a cache keyed by what it is linked from (see
// binCache), so the suites of one `go test ./...` (which start at the
// same time) build it once between them, and a later run whose source is
// unchanged links nothing. Without a user cache dir it is built afresh.
func Build() (bin, root string, cleanup func(), err error) {
	return BuildCommand("./cmd/drover", "drover")
}

// BuildCommand is Build for any main package pkg of the module (such as
// "./examples/csi/hostpath"): a copy of its binary, named name, in a
// fresh temp dir, through the same cache.
func BuildCommand(pkg, name string) (bin, root string, cleanup func(), err error) {
	root, err = ModuleRoot()
	if err != nil {
		return "", "", nil, err
	}
	dir, err := os.MkdirTemp("", "drover-test-bin-")
	if err != nil {
		return "", "", nil, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	bin = filepath.Join(dir, name)
	if cache, ok := userBinCache(); ok {
		cached, _, err := cache.build(root, pkg, name)
		if err == nil {
			err = copyFile(cached, bin)
		}
		if err != nil {
			cleanup()
			return "", "", nil, err
		}
		return bin, root, cleanup, nil
	}
	if err := goBuild(root, pkg, bin); err != nil {
		cleanup()
		return "", "", nil, err
	}
	return bin, root, cleanup, nil
}

// buildCommand is BuildCommand; tests of BuiltCopy replace it.
var buildCommand = BuildCommand

// builtOnce holds what BuiltCopy built in this process, by package.
var builtOnce struct {
	sync.Mutex
	bins     map[string]string
	errs     map[string]error
	cleanups []func()
}

// BuiltCopy returns a copy, in a temp dir of t's own, of the binary of
// the main package pkg of the module (named name), built at most once per
// test process (BuildCommand): a suite whose tests each run a helper
// binary (the CSI hostpath driver) links it once, not once per test. Each
// test gets its own copy, so that finding a test's processes by their
// executable (ProcsOf) never finds another test's. The suite's TestMain
// calls RemoveBuilt after its tests.
func BuiltCopy(t testing.TB, pkg, name string) string {
	t.Helper()
	builtOnce.Lock()
	if builtOnce.bins == nil {
		builtOnce.bins, builtOnce.errs = map[string]string{}, map[string]error{}
	}
	src, built := builtOnce.bins[pkg]
	err := builtOnce.errs[pkg]
	if !built && err == nil {
		var cleanup func()
		src, _, cleanup, err = buildCommand(pkg, name)
		if err != nil {
			builtOnce.errs[pkg] = err
		} else {
			builtOnce.bins[pkg] = src
			builtOnce.cleanups = append(builtOnce.cleanups, cleanup)
		}
	}
	builtOnce.Unlock()
	if err != nil {
		t.Fatalf("building %s: %v", pkg, err)
	}
	dst := filepath.Join(t.TempDir(), name)
	if err := copyFile(src, dst); err != nil {
		t.Fatalf("copying the %s binary: %v", pkg, err)
	}
	return dst
}

// RemoveBuilt removes every binary BuiltCopy built (not the tests'
// copies, which go with their temp dirs).
func RemoveBuilt() {
	builtOnce.Lock()
	defer builtOnce.Unlock()
	for _, c := range builtOnce.cleanups {
		c()
	}
	builtOnce.bins, builtOnce.errs, builtOnce.cleanups = nil, nil, nil
}

// userBinCache is the cache in the user's cache dir, if there is one.
func userBinCache() (binCache, bool) {
	base, err := os.UserCacheDir()
	if err != nil {
		return binCache{}, false
	}
	// Two binaries (drover, the CSI hostpath driver) per source state, and
	// worktrees at different revisions share the cache.
	return binCache{dir: filepath.Join(base, "drover", "test-bin"), keep: 8}, true
}

// binCache holds built binaries, one directory per key. The key is a hash
// of the go env the link depends on (linkEnv) and of every package the binary links, each named by its
// compiled archive in GOCACHE, whose file name is the hash of its content:
// a change to any source, embedded file, build flag or toolchain changes
// it, and nothing else does. Asking for the key compiles what is stale,
// work the build then reuses, so a hit costs no more than `go list`.
//
// One flock on the cache serialises callers: a second suite waits for the
// first one's build and then finds it. The keep most recently used
// entries stay; callers copy the binary out, so removing an entry never
// touches a running test.
type binCache struct {
	dir  string
	keep int
}

// build returns the cached binary of package pkg of the module at root,
// building it into the cache first when it is not there; hit says it was.
func (c binCache) build(root, pkg, name string) (path string, hit bool, err error) {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return "", false, err
	}
	lock, err := os.OpenFile(filepath.Join(c.dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", false, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", false, fmt.Errorf("locking the binary cache %s: %w", c.dir, err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()

	key, err := linkKey(root, pkg)
	if err != nil {
		// go list failed, say on a compile error: go build says it best.
		tmp, terr := os.MkdirTemp("", "drover-test-build-")
		if terr != nil {
			return "", false, err
		}
		defer os.RemoveAll(tmp)
		if berr := goBuild(root, pkg, filepath.Join(tmp, name)); berr != nil {
			return "", false, berr
		}
		return "", false, err
	}
	entry := filepath.Join(c.dir, key)
	path = filepath.Join(entry, name)
	if _, err := os.Stat(path); err == nil {
		now := time.Now()
		_ = os.Chtimes(entry, now, now)
		return path, true, nil
	}
	if err := os.MkdirAll(entry, 0o700); err != nil {
		return "", false, err
	}
	tmp := path + ".tmp"
	if err := goBuild(root, pkg, tmp); err != nil {
		_ = os.RemoveAll(entry)
		return "", false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", false, err
	}
	c.evict()
	return path, false, nil
}

// evict removes all but the keep most recently used entries.
func (c binCache) evict() {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	type used struct {
		name string
		at   time.Time
	}
	var dirs []used
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if info, err := e.Info(); err == nil {
			dirs = append(dirs, used{e.Name(), info.ModTime()})
		}
	}
	slices.SortFunc(dirs, func(a, b used) int { return b.at.Compare(a.at) })
	for i := c.keep; i < len(dirs); i++ {
		_ = os.RemoveAll(filepath.Join(c.dir, dirs[i].name))
	}
}

// linkEnv is what of go env a build depends on beyond the compiled
// packages: the toolchain, the target, the flags go build adds, and the
// C toolchain of an external link.
var linkEnv = []string{"GOVERSION", "GOROOT", "GOOS", "GOARCH", "GOAMD64", "GOARM64", "GOEXPERIMENT",
	"GOFLAGS", "CGO_ENABLED", "CC", "CGO_LDFLAGS", "GOFIPS140"}

// linkKey is the cache key of package pkg's binary: see binCache.
func linkKey(root, pkg string) (string, error) {
	// Not all of go env: GOGCCFLAGS names a fresh temp dir every time.
	env := exec.Command(GoTool(), append([]string{"env"}, linkEnv...)...)
	env.Dir = root
	envOut, err := env.Output()
	if err != nil {
		return "", fmt.Errorf("go env: %w", err)
	}
	list := exec.Command(GoTool(), "list", "-deps", "-export", "-f", "{{.ImportPath}} {{.Standard}} {{.Export}}", pkg)
	list.Dir = root
	var stderr strings.Builder
	list.Stderr = &stderr
	listOut, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("go list -export %s: %w\n%s", pkg, err, stderr.String())
	}
	h := sha256.New()
	fmt.Fprintf(h, "go env\n%s\nvcs %s\npackages\n", envOut, vcsState(root))
	for _, line := range strings.Split(strings.TrimSpace(string(listOut)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			return "", fmt.Errorf("go list -export %s: cannot read %q", pkg, line)
		}
		ipath, export := f[0], ""
		if len(f) == 3 {
			export = f[2]
		} else if f[1] != "true" {
			// Only the standard library has archive-less packages (unsafe);
			// the go env above names its version.
			return "", fmt.Errorf("go list -export %s: no compiled archive for %s", pkg, ipath)
		}
		// The archive's file name is its content hash; its dir is GOCACHE's.
		fmt.Fprintf(h, "%s %s\n", ipath, filepath.Base(export))
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// vcsState is what go build stamps into a binary from git (with
// -buildvcs, its default): the revision and whether the tree is modified.
// It is in no package archive, so the key adds it.
func vcsState(root string) string {
	rev, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		return "none"
	}
	status, err := exec.Command("git", "-C", root, "status", "--porcelain").Output()
	if err != nil {
		return "none"
	}
	return fmt.Sprintf("%s modified=%v", strings.TrimSpace(string(rev)), len(status) > 0)
}

// goBuild builds package pkg of the module at root into out.
func goBuild(root, pkg, out string) error {
	build := exec.Command(GoTool(), "build", "-o", out, pkg)
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s failed: %w\n%s", pkg, err, b)
	}
	return nil
}

// copyFile copies the executable src to a new file dst.
func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	_, err = io.Copy(out, in)
	return err
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
