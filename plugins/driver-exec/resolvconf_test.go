//go:build linux

package execdriver

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBindResolvConf: the allocation's resolv.conf is bound at the
// root's /etc/resolv.conf, or, where that is a symlink (as
// systemd-resolved makes it), at the link's target inside the root; a
// target the root cannot hold is refused with the reason.
func TestBindResolvConf(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	src := filepath.Join(t.TempDir(), "resolv.conf")
	const conf = "nameserver 192.0.2.53\n"
	if err := os.WriteFile(src, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, root string)
		read  string // where the task reads it, inside the root
		err   string
	}{
		{"regular file", func(t *testing.T, root string) {
			write(t, filepath.Join(root, "etc/resolv.conf"), "nameserver 10.0.0.1\n")
		}, "/etc/resolv.conf", ""},
		{"absolute symlink", func(t *testing.T, root string) {
			link(t, "/run/systemd/resolve/stub-resolv.conf", filepath.Join(root, "etc/resolv.conf"))
		}, "/etc/resolv.conf", ""},
		{"relative symlink", func(t *testing.T, root string) {
			link(t, "../run/resolvconf/resolv.conf", filepath.Join(root, "etc/resolv.conf"))
		}, "/etc/resolv.conf", ""},
		{"symlink to a symlink", func(t *testing.T, root string) {
			link(t, "/run/a", filepath.Join(root, "etc/resolv.conf"))
			link(t, "/run/b", filepath.Join(root, "run/a"))
		}, "", "which is not a regular file in the task's root"},
		{"symlink into /etc, missing", func(t *testing.T, root string) {
			link(t, "resolvconf/resolv.conf", filepath.Join(root, "etc/resolv.conf"))
		}, "", "which the task's root lacks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, root)
			type result struct {
				got string
				err error
			}
			done := make(chan result, 1)
			go func() {
				// Never unlocked: the thread, in its own mount
				// namespace, ends with the goroutine.
				runtime.LockOSThread()
				if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
					done <- result{err: err}
					return
				}
				if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
					done <- result{err: err}
					return
				}
				if err := bindResolvConf(root, src); err != nil {
					done <- result{err: err}
					return
				}
				b, err := readInRoot(root, tt.read)
				done <- result{got: b, err: err}
			}()
			r := <-done
			if tt.err != "" {
				if r.err == nil || !strings.Contains(r.err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", r.err, tt.err)
				}
				return
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.got != conf {
				t.Fatalf("%s in the root reads %q, want the allocation's %q", tt.read, r.got, conf)
			}
		})
	}
}

// readInRoot reads p as a task in root would, following symlinks inside
// the root.
func readInRoot(root, p string) (string, error) {
	for range 8 {
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			break
		}
		l, err := os.Readlink(filepath.Join(root, p))
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(l) {
			l = filepath.Join(filepath.Dir(p), l)
		}
		p = l
	}
	b, err := os.ReadFile(filepath.Join(root, p))
	return string(b), err
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func link(t *testing.T, target, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}
