package safefs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// modes runs f with openat2 and with the O_NOFOLLOW walk.
func modes(t *testing.T, f func(t *testing.T)) {
	for _, m := range []struct {
		name  string
		state int32
	}{{"openat2", 0}, {"walk", 2}} {
		t.Run(m.name, func(t *testing.T) {
			old := openat2State.Load()
			openat2State.Store(m.state)
			t.Cleanup(func() { openat2State.Store(old) })
			f(t)
		})
	}
}

// fixture: root/ holds dir/file.txt, link -> outside/ (a "host" dir with
// secret), dir/flink -> outside/secret, and a FIFO.
func fixture(t *testing.T) (root, outside string, d *Dir) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	outside = filepath.Join(base, "host")
	for _, p := range []string{filepath.Join(root, "dir"), outside} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600))
	must(t, os.WriteFile(filepath.Join(root, "dir", "file.txt"), []byte("hello"), 0o644))
	must(t, os.Symlink(outside, filepath.Join(root, "link")))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "dir", "flink")))
	must(t, os.Symlink("file.txt", filepath.Join(root, "dir", "inlink")))
	must(t, unix.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return root, outside, d
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefuses(t *testing.T) {
	modes(t, func(t *testing.T) {
		_, _, d := fixture(t)
		cases := []struct {
			rel  string
			flag int
		}{
			{"link/secret", os.O_RDONLY},             // symlinked directory on the way
			{"dir/flink", os.O_RDONLY},               // symlink as the last component
			{"dir/inlink", os.O_RDONLY},              // even one that stays inside
			{"../host/secret", os.O_RDONLY},          // ".." out
			{"dir/../../host/secret", os.O_RDONLY},   // ".." out after a component
			{"/etc/passwd", os.O_RDONLY},             // absolute
			{"fifo", os.O_RDONLY},                    // would block
			{"fifo", os.O_WRONLY},                    // no reader: ENXIO
			{"fifo", os.O_WRONLY | os.O_APPEND},      // as a log writer resumes
			{"fifo", os.O_RDWR},                      // never blocks, still refused
			{"link/new", os.O_WRONLY | os.O_CREATE},  // create through a symlinked dir
			{"dir/flink", os.O_WRONLY | os.O_TRUNC},  // write through a symlink
			{"dir/flink", os.O_WRONLY | os.O_APPEND}, // append through a symlink
		}
		for _, c := range cases {
			f, err := d.OpenFile(c.rel, c.flag, 0o644)
			if err == nil {
				f.Close()
				t.Errorf("%s: opened, want refusal", c.rel)
				continue
			}
			if !errors.Is(err, ErrUnsafePath) {
				t.Errorf("%s: %v, want ErrUnsafePath", c.rel, err)
			}
		}
	})
}

func TestHostFileUntouched(t *testing.T) {
	modes(t, func(t *testing.T) {
		root, outside, d := fixture(t)
		// WriteFile over a symlink replaces the link, never the target.
		must(t, d.WriteFile("dir/flink", []byte("task output"), 0o644))
		got, err := os.ReadFile(filepath.Join(outside, "secret"))
		must(t, err)
		if string(got) != "host secret" {
			t.Fatalf("host file changed: %q", got)
		}
		fi, err := os.Lstat(filepath.Join(root, "dir", "flink"))
		must(t, err)
		if !fi.Mode().IsRegular() {
			t.Fatalf("dir/flink is %v, want the regular file written in the link's place", fi.Mode())
		}
		// Nor through a symlinked parent, nor by MkdirAll.
		if err := d.WriteFile("link/pwned", []byte("x"), 0o644); !errors.Is(err, ErrUnsafePath) {
			t.Fatalf("WriteFile through link: %v", err)
		}
		if err := d.MkdirAll("link/sub", 0o755); !errors.Is(err, ErrUnsafePath) {
			t.Fatalf("MkdirAll through link: %v", err)
		}
		if _, err := os.Stat(filepath.Join(outside, "pwned")); !os.IsNotExist(err) {
			t.Fatalf("file created on the host: %v", err)
		}
		if _, err := os.Stat(filepath.Join(outside, "sub")); !os.IsNotExist(err) {
			t.Fatalf("dir created on the host: %v", err)
		}
	})
}

// WriteFileNoSync keeps WriteFile's properties but the fsync: a planted
// link is replaced, not written through, a symlinked parent is refused,
// and the content and mode are those given.
func TestWriteFileNoSync(t *testing.T) {
	modes(t, func(t *testing.T) {
		root, outside, d := fixture(t)
		must(t, d.WriteFileNoSync("dir/flink", []byte("exit record"), 0o640))
		got, err := os.ReadFile(filepath.Join(outside, "secret"))
		must(t, err)
		if string(got) != "host secret" {
			t.Fatalf("host file changed: %q", got)
		}
		fi, err := os.Lstat(filepath.Join(root, "dir", "flink"))
		must(t, err)
		if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 {
			t.Fatalf("dir/flink is %v, want the regular 0640 file written in the link's place", fi.Mode())
		}
		b, err := d.ReadFile("dir/flink", 0)
		must(t, err)
		if string(b) != "exit record" {
			t.Fatalf("read back %q", b)
		}
		if err := d.WriteFileNoSync("link/pwned", []byte("x"), 0o644); !errors.Is(err, ErrUnsafePath) {
			t.Fatalf("WriteFileNoSync through link: %v", err)
		}
		if _, err := os.Stat(filepath.Join(outside, "pwned")); !os.IsNotExist(err) {
			t.Fatalf("file created on the host: %v", err)
		}
	})
}

func TestOperations(t *testing.T) {
	modes(t, func(t *testing.T) {
		root, _, d := fixture(t)
		b, err := d.ReadFile("dir/file.txt", 0)
		must(t, err)
		if string(b) != "hello" {
			t.Fatalf("read %q", b)
		}
		if _, err := d.ReadFile("dir/file.txt", 4); err == nil {
			t.Fatal("ReadFile over its bound succeeded")
		}
		must(t, d.MkdirAll("a/b/c", 0o755))
		must(t, d.WriteFile("a/b/c/f", []byte("1"), 0o640))
		fi, err := os.Stat(filepath.Join(root, "a/b/c/f"))
		must(t, err)
		if fi.Mode().Perm() != 0o640 {
			t.Fatalf("perm %v", fi.Mode().Perm())
		}
		fi, err = d.Lstat("dir/flink")
		must(t, err)
		if fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("Lstat of a symlink: %v", fi.Mode())
		}
		if _, err := d.Lstat("link/secret"); !errors.Is(err, ErrUnsafePath) {
			t.Fatalf("Lstat through a symlink: %v", err)
		}
		ents, err := d.ReadDir("dir")
		must(t, err)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if want := "[file.txt flink inlink]"; fmtNames(names) != want {
			t.Fatalf("ReadDir: %v, want %s", names, want)
		}
		if _, err := d.ReadDir("link"); !errors.Is(err, ErrUnsafePath) {
			t.Fatalf("ReadDir of a symlink: %v", err)
		}
		must(t, d.Rename("a/b/c/f", "a/g"))
		must(t, d.Remove("a/g"))
		must(t, d.Remove("a/b/c"))
		must(t, d.Remove("dir/flink"))
		if _, err := os.Lstat(filepath.Join(root, "dir/flink")); !os.IsNotExist(err) {
			t.Fatalf("link not removed: %v", err)
		}
		sub, err := d.OpenDir("dir")
		must(t, err)
		defer sub.Close()
		if _, err := sub.Open("../link/secret"); !errors.Is(err, ErrUnsafePath) {
			t.Fatalf("sub dir escape: %v", err)
		}
		f, commit, err := d.CreateAtomic("dir/atomic", 0o600)
		must(t, err)
		_, _ = f.Write([]byte("half"))
		if _, err := os.Stat(filepath.Join(root, "dir/atomic")); !os.IsNotExist(err) {
			t.Fatal("atomic file visible before commit")
		}
		must(t, commit(true))
		b, err = os.ReadFile(filepath.Join(root, "dir/atomic"))
		must(t, err)
		if string(b) != "half" {
			t.Fatalf("atomic: %q", b)
		}
	})
}

func fmtNames(n []string) string {
	s := "["
	for i, x := range n {
		if i > 0 {
			s += " "
		}
		s += x
	}
	return s + "]"
}

func TestOpenRootRefusesSymlink(t *testing.T) {
	base := t.TempDir()
	must(t, os.Symlink(os.TempDir(), filepath.Join(base, "l")))
	if _, err := Open(filepath.Join(base, "l")); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("Open of a symlink: %v", err)
	}
}

func TestOpenPath(t *testing.T) {
	modes(t, func(t *testing.T) {
		root, _, d := fixture(t)
		for _, rel := range []string{"dir/flink", "link/secret", "../host/secret", "/etc"} {
			if f, err := d.OpenPath(rel); !errors.Is(err, ErrUnsafePath) {
				if f != nil {
					f.Close()
				}
				t.Errorf("%s: %v, want ErrUnsafePath", rel, err)
			}
		}
		// A FIFO opens without blocking; the descriptor names the file.
		f, err := d.OpenPath("fifo")
		must(t, err)
		defer f.Close()
		fi, err := f.Stat()
		must(t, err)
		want, err := os.Lstat(filepath.Join(root, "fifo"))
		must(t, err)
		if !os.SameFile(fi, want) {
			t.Errorf("OpenPath(fifo) names %v, want %v", fi, want)
		}
		if _, err := d.OpenPath("missing"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("missing: %v", err)
		}
	})
}
