package client

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"

	"github.com/drover-org/drover/sdk/safefs"
)

func TestAllocDirLayout(t *testing.T) {
	d := newAllocDir(t.TempDir(), "alloc-1")
	if err := d.buildShared(); err != nil {
		t.Fatal(err)
	}
	td, err := d.buildTask("web")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"alloc", "alloc/logs", "alloc/data", "alloc/tmp", "web", "web/local", "web/secrets", "web/tmp"} {
		if fi, err := os.Stat(filepath.Join(d.root, p)); err != nil || !fi.IsDir() {
			t.Errorf("%s: not a directory (%v)", p, err)
		}
	}
	if fi, _ := os.Stat(td.Secrets); fi.Mode().Perm() != 0o700 {
		t.Errorf("secrets dir mode = %v; want 0700", fi.Mode().Perm())
	}
	if got, want := d.logBase("web", "stdout"), filepath.Join(d.root, "alloc/logs/web.stdout"); got != want {
		t.Errorf("logBase = %s; want %s", got, want)
	}
	// Building again (a restored alloc) is harmless.
	if err := d.buildShared(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", ".", "..", "a/b", "alloc", `a\b`} {
		if _, err := d.buildTask(bad); err == nil {
			t.Errorf("buildTask(%q) succeeded; want an error", bad)
		}
	}
	if err := d.destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.root); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("alloc dir still exists after destroy: %v", err)
	}
}

func TestWriteDispatchPayload(t *testing.T) {
	payload := snappy.Encode(nil, []byte("input data"))
	cases := []struct {
		name, file string
		data       []byte
		wantErr    error // nil: success
		corrupt    bool
	}{
		{name: "plain file", file: "input.txt", data: payload},
		{name: "subdirectory", file: "in/deep/input.txt", data: payload},
		{name: "dotdot inside", file: "a/../input.txt", data: payload},
		{name: "escapes", file: "../secrets/x", data: payload, wantErr: errPathEscapes},
		{name: "escapes far", file: "../../../etc/passwd", data: payload, wantErr: errPathEscapes},
		{name: "absolute", file: "/etc/passwd", data: payload, wantErr: errPathEscapes},
		{name: "the dir itself", file: ".", data: payload, wantErr: errPathEscapes},
		{name: "not snappy", file: "x", data: []byte("\xff\xff\xff"), corrupt: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newAllocDir(t.TempDir(), "a1")
			td, err := d.buildTask("t")
			if err != nil {
				t.Fatal(err)
			}
			local := td.Local
			err = d.writeDispatchPayload("t", tc.file, tc.data)
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v; want %v", err, tc.wantErr)
				}
			case tc.corrupt:
				if err == nil {
					t.Fatal("corrupt payload accepted")
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(filepath.Join(local, tc.file))
				if err != nil || string(b) != "input data" {
					t.Fatalf("payload file = %q, %v", b, err)
				}
			}
		})
	}
}

// hostSecret is a root-only file outside the alloc dir that a task points
// planted links at; check fails the test if it was read-modified.
func hostSecret(t *testing.T) (path string, check func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(path, []byte("host secret"), 0o600); err != nil {
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
		if err != nil || serr != nil || string(b) != "host secret" || !fi.ModTime().Equal(old) {
			t.Errorf("host file changed: %q (%v), mtime %v (%v)", b, err, fi.ModTime(), serr)
		}
	}
}

// A dispatch payload is written beneath the alloc dir without following a
// link the task planted: a link at the file is replaced (the host file it
// pointed to untouched), a symlinked directory on the way is refused with
// an error naming it, and nothing is created outside.
func TestWriteDispatchPayloadPlantedLinks(t *testing.T) {
	payload := snappy.Encode(nil, []byte("input data"))
	host, check := hostSecret(t)
	hostDir := t.TempDir()
	d := newAllocDir(t.TempDir(), "a1")
	td, err := d.buildTask("t")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, filepath.Join(td.Local, "input.txt")); err != nil {
		t.Fatal(err)
	}
	if err := d.writeDispatchPayload("t", "input.txt", payload); err != nil {
		t.Fatal(err)
	}
	check()
	if b, err := os.ReadFile(filepath.Join(td.Local, "input.txt")); err != nil || string(b) != "input data" {
		t.Errorf("payload = %q, %v", b, err)
	}
	if err := os.Symlink(hostDir, filepath.Join(td.Local, "in")); err != nil {
		t.Fatal(err)
	}
	err = d.writeDispatchPayload("t", "in/input.txt", payload)
	if !errors.Is(err, safefs.ErrUnsafePath) || !strings.Contains(err.Error(), filepath.Join(td.Local, "in")) {
		t.Errorf("through a symlinked dir: %v, want a refusal naming %s", err, filepath.Join(td.Local, "in"))
	}
	if ents, _ := os.ReadDir(hostDir); len(ents) != 0 {
		t.Errorf("written on the host: %v", ents)
	}
}

// The alloc and task dirs are created beneath the alloc dir without
// following a symlink: on a restore, a task that replaced alloc/logs or
// its local/ by a link to a host directory gets a refusal naming it, and
// nothing is created in the host directory.
func TestAllocDirBuildRefusesSymlinks(t *testing.T) {
	for _, c := range []struct{ link, build string }{
		{"alloc/logs", "shared"},
		{"alloc", "shared"},
		{"t/local", "task"},
		{"t/secrets", "task"},
		{"t", "task"},
	} {
		t.Run(c.link, func(t *testing.T) {
			hostDir := t.TempDir()
			d := newAllocDir(t.TempDir(), "a1")
			if err := d.buildShared(); err != nil {
				t.Fatal(err)
			}
			if _, err := d.buildTask("t"); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(d.root, c.link)
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(hostDir, p); err != nil {
				t.Fatal(err)
			}
			var err error
			if c.build == "shared" {
				err = d.buildShared()
			} else {
				_, err = d.buildTask("t")
			}
			if !errors.Is(err, safefs.ErrUnsafePath) || !strings.Contains(err.Error(), p) {
				t.Errorf("build %s: %v, want a refusal naming %s", c.build, err, p)
			}
			if ents, _ := os.ReadDir(hostDir); len(ents) != 0 {
				t.Errorf("created on the host: %v", ents)
			}
		})
	}
}
