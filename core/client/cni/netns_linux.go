//go:build linux

package cni

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// createNetns makes a new network namespace and pins it by bind-mounting
// it on path (a new file), so that it outlives every process in it. The
// namespace is made on a locked thread, which goes back to its own
// namespace after; one that cannot is thrown away (its goroutine ends
// locked to it), so the runtime never reuses a thread left in another
// namespace.
func createNetns(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return fmt.Errorf("create the network namespace file: %w", err)
	}
	_ = f.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		home, err := os.Open(self)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open the client's network namespace: %w", err)
			return
		}
		defer home.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare the network namespace: %w", err)
			if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
			return
		}
		err = unix.Mount(self, path, "none", unix.MS_BIND, "")
		if err != nil {
			err = fmt.Errorf("pin the network namespace on %s: %w", path, err)
		}
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		_ = os.Remove(path)
		return err
	}
	return nil
}

// removeNetns unpins the namespace at path and removes the file; a path
// already gone is not an error. The namespace itself ends with the last
// process in it.
func removeNetns(path string) error {
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount the network namespace %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the network namespace file %s: %w", path, err)
	}
	return nil
}

// isNetns reports whether path is a pinned network namespace (a mount of
// nsfs), not a plain file left by a crash between create and mount.
func isNetns(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Type == unix.NSFS_MAGIC
}

// supported says why network namespaces cannot be made here, or nil.
func supported() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need the client to run as root")
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return fmt.Errorf("the kernel has no network namespaces: %w", err)
	}
	return nil
}
