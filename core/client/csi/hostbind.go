package csi

import (
	"errors"
	"io/fs"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/safefs"
)

// The bind mount steps, shared with the client's host volumes: the same
// rules hold for a host directory bound into a task dir.

// BindDir bind-mounts the host directory src at target, a path beneath
// allocDir that is created there without following a symlink, read-only
// if asked, and returns the kernel's ID of the new mount.
func BindDir(allocDir, src, target string, readOnly bool) (uint64, error) {
	return bindMount(allocDir, src, target, false, readOnly)
}

// Unbind undoes BindDir: the mount of ID id is unmounted wherever a task
// moved it beneath allocDir, and its mount point removed; a target that
// is no (more a) mount point counts as done.
func Unbind(allocDir, target string, id uint64) error { return unbind(allocDir, target, id) }

// MountIDAt is the kernel's ID of the mount target (beneath allocDir, no
// symlink followed) is on; 0 when target does not exist.
func MountIDAt(allocDir, target string) (uint64, error) {
	root, err := safefs.Open(allocDir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	rel, err := driver.RelBeneath(root.Name(), target)
	if err != nil {
		return 0, err
	}
	t, err := root.OpenPath(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer t.Close()
	return mountID(t)
}
