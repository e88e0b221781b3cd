package client

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/golang/snappy"
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
			local := filepath.Join(t.TempDir(), "local")
			if err := os.MkdirAll(local, 0o755); err != nil {
				t.Fatal(err)
			}
			err := writeDispatchPayload(local, tc.file, tc.data)
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
