package csi

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/safefs"
)

// A volume_mount's bind target is in a task dir, where the task can write
// (its local/, say), and mount(2) and umount(2) follow symlinks. The
// target is therefore created and opened beneath the alloc dir without
// following a symlink, and mounted, remounted and unmounted through the
// descriptor (/proc/self/fd/N names that very file), never through a path
// a task could redirect to a host directory in between.

// bindMount makes src visible at target, a path in a task dir, read-only
// if asked, and returns the kernel's ID of the new mount.
func bindMount(allocDir, src, target string, file, readOnly bool) (uint64, error) {
	root, err := safefs.Open(allocDir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	rel, err := driver.RelBeneath(root.Name(), target)
	if err != nil {
		return 0, err
	}
	if file {
		if err := root.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
			return 0, err
		}
		f, err := root.OpenFile(rel, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o600)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return 0, err
		}
		if f != nil {
			f.Close()
		}
	} else if err := root.MkdirAll(rel, 0o755); err != nil {
		return 0, err
	}
	t, err := root.OpenPath(rel)
	if err != nil {
		return 0, err
	}
	fi, err := t.Stat()
	if err == nil && fi.IsDir() == file {
		err = &fs.PathError{Op: "mount", Path: target, Err: errors.New("the mount point is of the wrong kind")}
	}
	if err == nil {
		if merr := unix.Mount(src, procFD(t), "", unix.MS_BIND, ""); merr != nil {
			err = fmt.Errorf("bind mount: %w", merr)
		}
	}
	t.Close()
	if err != nil {
		return 0, err
	}
	// The new mount's root, opened again beneath the alloc dir.
	t, err = root.OpenPath(rel)
	if err != nil {
		return 0, err
	}
	defer t.Close()
	id, err := mountID(t)
	if err == nil && readOnly {
		if merr := unix.Mount("", procFD(t), "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); merr != nil {
			err = fmt.Errorf("remount read-only: %w", merr)
		}
	}
	if err != nil {
		_ = unix.Unmount(procFD(t), unix.MNT_DETACH)
		return 0, err
	}
	return id, nil
}

func procFD(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// mountID is the kernel's ID of the mount f is on.
func mountID(f *os.File) (uint64, error) {
	var stx unix.Statx_t
	if err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx); err != nil {
		return 0, fmt.Errorf("statx %s: %w", f.Name(), err)
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, fmt.Errorf("statx %s: the kernel reports no mount ID", f.Name())
	}
	return stx.Mnt_id, nil
}

// unbind undoes bindMount; a target that is not (or no more) a mount
// point counts as done. id is the mount's ID (0 when bindMount did not get
// to record it): a mount a task moved by renaming a directory above it is
// found where it went, from the mount table; a link a task planted on the
// way is refused, naming it, never followed.
func unbind(allocDir, target string, id uint64) error {
	root, err := safefs.Open(allocDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	defer root.Close()
	rel, err := driver.RelBeneath(root.Name(), target)
	if err != nil {
		return fmt.Errorf("unmount: %w", err)
	}
	done, err := unmountBeneath(root, rel, id)
	if done || err != nil || id == 0 {
		if err == nil {
			_ = root.Remove(rel)
		}
		return err
	}
	// Not at target: where the mount is now, if anywhere.
	at, err := mountPointOf(id)
	if err != nil || at == "" {
		return err
	}
	rel, err = driver.RelBeneath(root.Name(), at)
	if err != nil {
		return fmt.Errorf("unmount: mount %d of %s moved out of the allocation directory: %w", id, target, err)
	}
	if done, err = unmountBeneath(root, rel, id); err == nil && !done {
		err = fmt.Errorf("unmount: mount %d of %s is at %s but was not found there", id, target, at)
	}
	return err
}

// unmountBeneath unmounts the mount at rel beneath root, through its
// descriptor, if it is mount id (any mount when id is 0). done: it was
// unmounted, or with id 0 there is nothing to unmount there.
func unmountBeneath(root *safefs.Dir, rel string, id uint64) (done bool, err error) {
	t, err := root.OpenPath(rel)
	if errors.Is(err, fs.ErrNotExist) || id != 0 && errors.Is(err, safefs.ErrUnsafePath) {
		return id == 0, nil
	}
	if err != nil {
		return false, fmt.Errorf("unmount: %w", err)
	}
	defer t.Close()
	if id != 0 {
		if got, err := mountID(t); err != nil || got != id {
			return false, err
		}
	}
	// Lazily: the descriptor itself keeps the mount busy.
	err = unix.Unmount(procFD(t), unix.MNT_DETACH)
	if err == nil || err == unix.EINVAL {
		return true, nil
	}
	return false, fmt.Errorf("unmount %s: %w", t.Name(), err)
}

// mountPointOf returns where mount id is in this process's mount table,
// or "" when it is not mounted.
func mountPointOf(id uint64) (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	want := strconv.FormatUint(id, 10)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && fields[0] == want {
			return unescapeMountPath(fields[4]), nil
		}
	}
	return "", sc.Err()
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
