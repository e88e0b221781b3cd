//go:build linux

package hostpath

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// mountFlagsByOption maps the mount options the driver honours in a
// volume capability's mount_flags to remount flags. Others are refused:
// a bind mount has no file system of its own to pass them to.
var mountFlagsByOption = map[string]uintptr{
	"ro":         unix.MS_RDONLY,
	"nosuid":     unix.MS_NOSUID,
	"nodev":      unix.MS_NODEV,
	"noexec":     unix.MS_NOEXEC,
	"noatime":    unix.MS_NOATIME,
	"nodiratime": unix.MS_NODIRATIME,
	"relatime":   unix.MS_RELATIME,
	"rw":         0,
	"defaults":   0,
	"bind":       0,
}

// mountFlags turns mount options into flags, naming the first it refuses.
func mountFlags(opts []string, readOnly bool) (uintptr, error) {
	var flags uintptr
	for _, o := range opts {
		f, ok := mountFlagsByOption[o]
		if !ok {
			return 0, fmt.Errorf("mount flag %q is not supported by bind mounts", o)
		}
		flags |= f
	}
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	return flags, nil
}

// bindMount binds src onto dst, then remounts the bind with flags: a bind
// mount ignores flags such as MS_RDONLY on its first mount(2), so read-only
// takes MS_BIND|MS_REMOUNT|MS_RDONLY.
func bindMount(src, dst string, flags uintptr) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount %s on %s: %w", src, dst, err)
	}
	if flags == 0 {
		return nil
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|flags, ""); err != nil {
		_ = unix.Unmount(dst, 0)
		return fmt.Errorf("remount %s with flags %#x: %w", dst, flags, err)
	}
	return nil
}

// unmount unmounts path; a path that is not a mount point is already done.
func unmount(path string) error {
	err := unix.Unmount(path, 0)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	return nil
}

func fsStats(path string) (fsUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fsUsage{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := int64(st.Bsize)
	u := fsUsage{
		totalBytes:     int64(st.Blocks) * bs,
		availableBytes: int64(st.Bavail) * bs,
		usedBytes:      int64(st.Blocks-st.Bfree) * bs,
		totalInodes:    int64(st.Files),
		freeInodes:     int64(st.Ffree),
	}
	u.usedInodes = u.totalInodes - u.freeInodes
	return u, nil
}
