package client

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/safefs"
)

// syncBuffer is a bytes.Buffer safe for a writer and a polling reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// openRoot opens dir as a log stream's root, closed with the test.
func openRoot(t *testing.T, dir string) *safefs.Dir {
	t.Helper()
	root, err := safefs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

func TestLogStreamRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Rotated files read as one stream: "hello " + "big " + "world".
	write("web.stdout.0", "hello ")
	write("web.stdout.1", "big ")
	write("web.stdout.2", "world")
	write("web.stderr.0", "oops")
	write("web.stdout.x", "ignored")
	cases := []struct {
		name   string
		origin string
		offset int64
		want   string
	}{
		{"whole", LogOriginStart, 0, "hello big world"},
		{"from start offset", LogOriginStart, 3, "lo big world"},
		{"offset at file boundary", LogOriginStart, 6, "big world"},
		{"offset past end", LogOriginStart, 100, ""},
		{"from end", LogOriginEnd, 5, "world"},
		{"from end across files", LogOriginEnd, 7, "g world"},
		{"from end past start", LogOriginEnd, 100, "hello big world"},
		{"end zero", LogOriginEnd, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ls := &logStream{root: openRoot(t, dir), dir: ".", prefix: "web.stdout.", dead: func() bool { return true }, poll: time.Millisecond}
			var buf bytes.Buffer
			if err := ls.copy(context.Background(), tc.origin, tc.offset, false, &buf); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tc.want {
				t.Fatalf("got %q; want %q", buf.String(), tc.want)
			}
		})
	}
	t.Run("no files yet", func(t *testing.T) {
		ls := &logStream{root: openRoot(t, dir), dir: "missing", prefix: "web.stdout.", dead: func() bool { return true }}
		var buf bytes.Buffer
		if err := ls.copy(context.Background(), LogOriginStart, 0, false, &buf); err != nil || buf.Len() != 0 {
			t.Fatalf("got %q, %v; want nothing", buf.String(), err)
		}
	})
}

func TestLogStreamFollow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "web.stdout.0")
	if err := os.WriteFile(path, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	dead := false
	ls := &logStream{root: openRoot(t, dir), dir: ".", prefix: "web.stdout.", poll: time.Millisecond, dead: func() bool {
		mu.Lock()
		defer mu.Unlock()
		return dead
	}}
	var out syncBuffer
	errCh := make(chan error, 1)
	go func() { errCh <- ls.copy(context.Background(), LogOriginStart, 0, true, &out) }()

	waitFor(t, "first line", func() bool { return out.String() == "one\n" })
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("two\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "appended line", func() bool { return out.String() == "one\ntwo\n" })
	// The task writes its last words and dies: follow drains and ends.
	if _, err := f.WriteString("three\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	mu.Lock()
	dead = true
	mu.Unlock()
	select {
	case err := <-errCh:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testTimeout):
		t.Fatal("follow did not end after the task died")
	}
	if out.String() != "one\ntwo\nthree\n" {
		t.Fatalf("got %q", out.String())
	}
}

func TestLogStreamFollowEndsWithContext(t *testing.T) {
	ls := &logStream{root: openRoot(t, t.TempDir()), dir: ".", prefix: "web.stdout.", poll: time.Millisecond, dead: func() bool { return false }}
	ctx, cancel := context.WithCancel(context.Background())
	errCh := make(chan error, 1)
	go func() { errCh <- ls.copy(ctx, LogOriginStart, 0, true, &bytes.Buffer{}) }()
	cancel()
	select {
	case err := <-errCh:
		if err != nil {
			t.Fatalf("err = %v; want nil at the end of a follow", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("follow ignored its context")
	}
}

func TestAllocLogsErrors(t *testing.T) {
	srv := newFakeServer()
	c := newTestClient(t, srv, newFakeWorld(), t.TempDir())
	srv.upsert(testAlloc("a1", c.NodeID(), testJob("batch", fakeTaskSpec("main", `{"exit_code": 0}`))))
	waitFor(t, "alloc complete", func() bool { return srv.clientStatus("a1") == structs.AllocClientStatusComplete })

	cases := []struct {
		name                     string
		alloc, task, typ, origin string
		offset                   int64
		kind                     error
	}{
		{"unknown alloc", "nope", "main", "stdout", "", 0, structs.ErrNotFound},
		{"unknown task", "a1", "nope", "stdout", "", 0, structs.ErrNotFound},
		{"bad type", "a1", "main", "stdin", "", 0, structs.ErrInvalid},
		{"bad origin", "a1", "main", "stdout", "middle", 0, structs.ErrInvalid},
		{"negative offset", "a1", "main", "stdout", "start", -1, structs.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.AllocLogs(context.Background(), tc.alloc, tc.task, tc.typ, tc.origin, tc.offset, false, &bytes.Buffer{})
			if !errors.Is(err, tc.kind) {
				t.Fatalf("err = %v; want kind %v", err, tc.kind)
			}
		})
	}
	// A known task with no output yet reads as empty, and follow on a
	// dead task ends at once.
	var buf bytes.Buffer
	if err := c.AllocLogs(context.Background(), "a1", "main", "stderr", "", 0, true, &buf); err != nil || buf.Len() != 0 {
		t.Fatalf("got %q, %v", buf.String(), err)
	}
}

// TestLogStreamFollowsRotation follows a log while it rotates, including
// past files the rotation deleted before the reader got to them.
func TestLogStreamFollowsRotation(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(name string) {
		t.Helper()
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	dead := false
	ls := &logStream{root: openRoot(t, dir), dir: ".", prefix: "web.stdout.", poll: time.Millisecond, dead: func() bool {
		mu.Lock()
		defer mu.Unlock()
		return dead
	}}
	write("web.stdout.0", "a")
	var out syncBuffer
	errCh := make(chan error, 1)
	go func() { errCh <- ls.copy(context.Background(), LogOriginStart, 0, true, &out) }()
	waitFor(t, "first file", func() bool { return out.String() == "a" })
	write("web.stdout.1", "b")
	waitFor(t, "second file", func() bool { return out.String() == "ab" })
	// The reader is at .1 when rotation deletes it and .2 before the
	// reader could see .2: it goes on at the oldest file left.
	remove("web.stdout.0")
	remove("web.stdout.1")
	write("web.stdout.3", "d")
	waitFor(t, "the file after the deleted ones", func() bool { return out.String() == "abd" })
	write("web.stdout.3", "e")
	mu.Lock()
	dead = true
	mu.Unlock()
	select {
	case err := <-errCh:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testTimeout):
		t.Fatal("follow did not end after the task died")
	}
	if out.String() != "abde" {
		t.Fatalf("got %q; want %q", out.String(), "abde")
	}
}

func TestLogRotationFromLogsBlock(t *testing.T) {
	cases := []struct {
		name      string
		lc        *structs.LogConfig
		wantFiles int32
		wantBytes int64
	}{
		{"no block: Nomad's defaults", nil, 10, 10 << 20},
		{"as configured", &structs.LogConfig{MaxFiles: 3, MaxFileSizeMB: 2}, 3, 2 << 20},
		{"unset fields default", &structs.LogConfig{MaxFiles: 4}, 4, 10 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := logRotation(tc.lc)
			if r.GetMaxFiles() != tc.wantFiles || r.GetMaxFileSizeBytes() != tc.wantBytes {
				t.Fatalf("rotation = %v; want %d files of %d bytes", r, tc.wantFiles, tc.wantBytes)
			}
		})
	}
	if r := logRotation(&structs.LogConfig{Disabled: true, MaxFiles: 3}); r != nil {
		t.Fatalf("disabled logs rotate as %v; want none (output discarded)", r)
	}
}

// A task that plants a link to a host file, a FIFO or a hard link in
// place of one of its log files, or replaces alloc/logs by a link to a
// host directory, does not get the host file read through the logs API:
// the read is refused (ErrPermissionDenied) naming the file, never blocks,
// and the host file's content never appears.
func TestAllocLogsRefusesPlantedFiles(t *testing.T) {
	srv := newFakeServer()
	c := newTestClient(t, srv, newFakeWorld(), t.TempDir())
	srv.upsert(testAlloc("a1", c.NodeID(), testJob("batch", fakeTaskSpec("main", `{"exit_code": 0}`))))
	waitFor(t, "alloc complete", func() bool { return srv.clientStatus("a1") == structs.AllocClientStatusComplete })
	allocRoot := filepath.Join(c.cfg.AllocDir, "a1")
	logs := filepath.Join(allocRoot, "alloc", "logs")
	host, check := hostSecret(t)
	hostDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "main.stdout.0"), []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, refused string // refused: the path the error names
		plant         func(t *testing.T) error
	}{
		{"symlink", "main.stdout.0", func(t *testing.T) error { return os.Symlink(host, filepath.Join(logs, "main.stdout.0")) }},
		{"symlink after a file", "main.stdout.1", func(t *testing.T) error {
			if err := os.WriteFile(filepath.Join(logs, "main.stdout.0"), []byte("task output\n"), 0o644); err != nil {
				return err
			}
			return os.Symlink(host, filepath.Join(logs, "main.stdout.1"))
		}},
		{"fifo", "main.stdout.0", func(t *testing.T) error { return syscall.Mkfifo(filepath.Join(logs, "main.stdout.0"), 0o644) }},
		{"hard link", "main.stdout.0", func(t *testing.T) error { return os.Link(host, filepath.Join(logs, "main.stdout.0")) }},
		{"symlinked logs dir", "logs", func(t *testing.T) error {
			if err := os.RemoveAll(logs); err != nil {
				return err
			}
			return os.Symlink(hostDir, logs)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.RemoveAll(logs); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(logs, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tc.plant(t); err != nil {
				t.Fatal(err)
			}
			for _, origin := range []string{LogOriginStart, LogOriginEnd} {
				var buf syncBuffer
				done := make(chan error, 1)
				go func() { done <- c.AllocLogs(context.Background(), "a1", "main", "stdout", origin, 0, false, &buf) }()
				var err error
				select {
				case err = <-done:
				case <-time.After(testTimeout):
					t.Fatalf("origin %s: reading the logs blocked", origin)
				}
				if strings.Contains(buf.String(), "host secret") {
					t.Fatalf("origin %s: the host file was served: %q", origin, buf.String())
				}
				want := filepath.Join(logs, tc.refused)
				if tc.refused == "logs" {
					want = logs
				}
				if !errors.Is(err, structs.ErrPermissionDenied) || !strings.Contains(err.Error(), want) {
					t.Errorf("origin %s: err = %v; want a refusal (permission denied) naming %s", origin, err, want)
				}
			}
			check()
		})
	}
}
