package driver

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/sdk/safefs"
)

func TestRotatingLog(t *testing.T) {
	base := filepath.Join(t.TempDir(), "t.stdout")
	r, err := OpenRotatingLog(base, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write([]byte("abcdefghij")); err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	// 10 bytes in files of 4: .0 abcd, .1 efgh, .2 ij; max_files 2 keeps .1 and .2.
	for _, tc := range []struct{ file, want string }{{".0", ""}, {".1", "efgh"}, {".2", "ij"}} {
		b, _ := os.ReadFile(base + tc.file)
		if string(b) != tc.want {
			t.Errorf("%s = %q, want %q", tc.file, b, tc.want)
		}
	}
	// A new writer resumes at the newest file.
	r, err = OpenRotatingLog(base, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = r.Write([]byte("kl"))
	_ = r.Close()
	if b, _ := os.ReadFile(base + ".2"); !strings.HasPrefix(string(b), "ijkl") {
		t.Errorf(".2 after resume = %q", b)
	}
	if _, err := OpenRotatingLog(base, 0, 4); err == nil {
		t.Error("max_files 0 accepted")
	}
}

// hostFile is a file outside the log's directory that a task points its
// planted links at; the test checks it is never written.
func hostFile(t *testing.T) (path string, check func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(path, []byte("host content"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		t.Helper()
		b, err := os.ReadFile(path)
		fi, serr := os.Stat(path)
		if err != nil || serr != nil || string(b) != "host content" || !fi.ModTime().Equal(old) {
			t.Errorf("host file written through the log: %q (%v) mtime %v (%v), want %q at %v", b, err, fi.ModTime(), serr, "host content", old)
		}
	}
}

// A task that plants <base>.1..4 as symlinks to a host file does not get
// the host file written by the rotation: each planted link is replaced by
// a new log file.
func TestRotatingLogReplacesPlantedLinks(t *testing.T) {
	alloc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(alloc, "alloc", "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	host, check := hostFile(t)
	logs := filepath.Join(alloc, "alloc", "logs")
	r, err := OpenRotatingLog(filepath.Join(logs, "t.stdout"), 10, 4)
	if err != nil {
		t.Fatal(err)
	}
	// The running task plants the files the rotation opens next.
	for i := 1; i <= 4; i++ {
		if err := os.Symlink(host, filepath.Join(logs, "t.stdout."+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Write([]byte("0123456789abcdefghij")); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = r.Close()
	check()
	for i, want := range []string{"0123", "4567", "89ab", "cdef", "ghij"} {
		p := filepath.Join(logs, "t.stdout."+strconv.Itoa(i))
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v %v, want a regular file", p, fi, err)
			continue
		}
		if b, _ := os.ReadFile(p); string(b) != want {
			t.Errorf("%s = %q, want %q", p, b, want)
		}
	}
}

// The file a writer resumes is appended to only if it is a regular file of
// one link: a planted symlink, FIFO or hard link is replaced, and the
// open never blocks on the FIFO.
func TestRotatingLogResumeRefusesPlanted(t *testing.T) {
	for _, kind := range []string{"symlink", "fifo", "hardlink"} {
		t.Run(kind, func(t *testing.T) {
			logs := t.TempDir()
			host, check := hostFile(t)
			p := filepath.Join(logs, "t.stdout.0")
			var err error
			switch kind {
			case "symlink":
				err = os.Symlink(host, p)
			case "fifo":
				err = syscall.Mkfifo(p, 0o644)
			case "hardlink":
				err = os.Link(host, p)
			}
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			var r *RotatingLog
			go func() {
				defer close(done)
				r, err = OpenRotatingLog(filepath.Join(logs, "t.stdout"), 2, 100)
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("opening the log blocked on a planted FIFO")
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Write([]byte("task output")); err != nil {
				t.Fatal(err)
			}
			_ = r.Close()
			check()
			fi, err := os.Lstat(p)
			if err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("%s: %v %v, want a regular file", p, fi, err)
			}
			if b, _ := os.ReadFile(p); string(b) != "task output" {
				t.Errorf("%s = %q", p, b)
			}
		})
	}
}

// A log directory replaced by a symlink (the task swapped alloc/logs for a
// link to a host directory) is refused with an error naming it.
func TestRotatingLogRefusesSymlinkedDir(t *testing.T) {
	alloc := t.TempDir()
	hostDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(alloc, "alloc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hostDir, filepath.Join(alloc, "alloc", "logs")); err != nil {
		t.Fatal(err)
	}
	root, err := safefs.Open(alloc)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	_, err = OpenRotatingLogIn(root, "alloc/logs/t.stdout", 2, 4)
	if !errors.Is(err, safefs.ErrUnsafePath) || !strings.Contains(err.Error(), filepath.Join(alloc, "alloc", "logs")) {
		t.Fatalf("err = %v, want an unsafe-path refusal naming alloc/logs", err)
	}
	if ents, _ := os.ReadDir(hostDir); len(ents) != 0 {
		t.Errorf("host dir written: %v", ents)
	}
}

func TestRelBeneath(t *testing.T) {
	for _, c := range []struct {
		root, p, want string
		ok            bool
	}{
		{"/a/alloc", "/a/alloc/alloc/logs/t.stdout", "alloc/logs/t.stdout", true},
		{"/a/alloc", "/a/alloc/web/.x", "web/.x", true},
		{"/a/alloc", "/a/alloc", "", false},
		{"/a/alloc", "/a/allocx/f", "", false},
		{"/a/alloc", "/a/alloc/../etc", "", false},
		{"/a/alloc", "alloc/logs", "", false},
		{"a/alloc", "a/alloc/logs", "", false},
	} {
		got, err := RelBeneath(c.root, c.p)
		if c.ok && (err != nil || got != c.want) || !c.ok && !errors.Is(err, safefs.ErrUnsafePath) {
			t.Errorf("RelBeneath(%q, %q) = %q, %v", c.root, c.p, got, err)
		}
	}
}
