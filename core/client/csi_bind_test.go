package client

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
			d := newAllocDir(t.TempDir(), "a1")
			td, err := d.buildTask("t")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(hostDir, filepath.Join(td.Dir, c.link)); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(td.Dir, c.dest)
			err = d.bindMount(src, target, false, false)
			overHost := mounted(t, hostDir) || mounted(t, filepath.Join(hostDir, "vol"))
			if err == nil {
				_ = d.unbind(target)
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
	d := newAllocDir(t.TempDir(), "a1")
	td, err := d.buildTask("t")
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(td.Local, "deep", "vol")
	if err := d.bindMount(src, target, false, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.unbind(target) })
	if b, err := os.ReadFile(filepath.Join(target, "vol-file")); err != nil || string(b) != "volume" {
		t.Fatalf("through the mount: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(target, "new"), nil, 0o644); err == nil {
		t.Error("the read-only mount took a write")
	}
	if err := d.unbind(target); err != nil {
		t.Fatal(err)
	}
	if mounted(t, target) {
		t.Fatal("still mounted after unbind")
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("mount point left: %v", err)
	}
	// Undone twice is done.
	if err := d.unbind(target); err != nil {
		t.Errorf("second unbind: %v", err)
	}
}
