package csi

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/sdk/safefs"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
}

// mounted reports whether a mount point at path is in our mount table.
func mounted(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

// A volume_mount's bind target in a task dir is made without following a
// link the task planted: a target replaced by a link to a host directory,
// or under a symlinked directory, is refused naming it, and nothing is
// mounted over the host directory nor created in it.
func TestCSIBindMountRefusesPlantedLinks(t *testing.T) {
	needRoot(t)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "vol-file"), []byte("volume"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, link, dest string }{
		{"target is a link", "local/vol", "local/vol"},
		{"parent is a link", "local/a", "local/a/vol"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hostDir := t.TempDir()
			d, td, err := testTaskDir(t)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(hostDir, filepath.Join(td.Dir, c.link)); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(td.Dir, c.dest)
			id, err := bindMount(d, src, target, false, false)
			overHost := mounted(t, hostDir) || mounted(t, filepath.Join(hostDir, "vol"))
			if err == nil {
				_ = unbind(d, target, id)
			}
			if overHost {
				t.Errorf("the volume was mounted over the host directory %s", hostDir)
			}
			if !errors.Is(err, safefs.ErrUnsafePath) || !strings.Contains(err.Error(), filepath.Join(td.Dir, c.link)) {
				t.Errorf("bindMount = %v; want a refusal naming %s", err, filepath.Join(td.Dir, c.link))
			}
			if ents, _ := os.ReadDir(hostDir); len(ents) != 0 {
				t.Errorf("created in the host directory: %v", ents)
			}
		})
	}
}

// The bind mount works beneath the alloc dir, read-only when asked, and
// unbind undoes it and removes the mount point.
func TestCSIBindMountAndUnbind(t *testing.T) {
	needRoot(t)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "vol-file"), []byte("volume"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, td, err := testTaskDir(t)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(td.Local, "deep", "vol")
	id, err := bindMount(d, src, target, false, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unbind(d, target, id) })
	if b, err := os.ReadFile(filepath.Join(target, "vol-file")); err != nil || string(b) != "volume" {
		t.Fatalf("through the mount: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(target, "new"), nil, 0o644); err == nil {
		t.Error("the read-only mount took a write")
	}
	if err := unbind(d, target, id); err != nil {
		t.Fatal(err)
	}
	if mounted(t, target) {
		t.Fatal("still mounted after unbind")
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("mount point left: %v", err)
	}
	// Undone twice is done.
	if err := unbind(d, target, id); err != nil {
		t.Errorf("second unbind: %v", err)
	}
}

// A task that renames a directory above its volume's bind (moving the
// mount) and plants a link to a host directory in its place does not get
// the host directory unmounted nor followed: unbind finds the mount where
// it went, by its ID, and undoes it there.
func TestCSIUnbindFindsMovedMount(t *testing.T) {
	needRoot(t)
	src := t.TempDir()
	hostDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(hostDir, "vol"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, td, err := testTaskDir(t)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(td.Local, "a", "vol")
	id, err := bindMount(d, src, target, false, false)
	if err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(td.Local, "b", "vol")
	t.Cleanup(func() { _ = unbind(d, moved, id) })
	if err := os.Rename(filepath.Join(td.Local, "a"), filepath.Join(td.Local, "b")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hostDir, filepath.Join(td.Local, "a")); err != nil {
		t.Fatal(err)
	}
	if !mounted(t, moved) {
		t.Fatalf("the mount did not move to %s", moved)
	}
	if err := unbind(d, target, id); err != nil {
		t.Fatal(err)
	}
	if mounted(t, moved) {
		t.Errorf("the moved mount at %s is left", moved)
	}
	if _, err := os.Stat(filepath.Join(hostDir, "vol")); err != nil {
		t.Errorf("host directory touched: %v", err)
	}
}

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{`/a/b`: "/a/b", `/a\040b`: "/a b", `/x\134y`: `/x\y`, `/tail\04`: `/tail\04`} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// taskDirs are a test task's directories.
type taskDirs struct{ Dir, Local string }

// testTaskDir makes an alloc dir with a task dir t in it, as the alloc
// runner lays it out (<alloc dir>/t/local), and returns both.
func testTaskDir(t *testing.T) (string, taskDirs, error) {
	t.Helper()
	alloc := filepath.Join(t.TempDir(), "a1")
	td := taskDirs{Dir: filepath.Join(alloc, "t"), Local: filepath.Join(alloc, "t", "local")}
	return alloc, td, os.MkdirAll(td.Local, 0o755)
}
