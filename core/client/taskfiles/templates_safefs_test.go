package taskfiles

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/safefs"
)

// A task that plants a symlink in the shared alloc/ directory cannot make
// another task's template write through it onto the host: the render is
// refused, naming the destination, and the host directory stays empty.
func TestTemplateDestinationThroughPlantedSymlinkRefused(t *testing.T) {
	allocDir, taskDir := taskDirFixture(t)
	host := t.TempDir()
	if err := os.Symlink(host, filepath.Join(allocDir, "alloc", "x")); err != nil {
		t.Fatal(err)
	}
	// The same through the task's own directory.
	if err := os.Symlink(host, filepath.Join(taskDir, "local", "y")); err != nil {
		t.Fatal(err)
	}
	for _, dest := range []string{"../alloc/x/pwned.txt", "local/y/pwned.txt", "local/y/sub/pwned.txt"} {
		_, err := renderTemplates(allocDir, taskDir, []*structs.Template{{EmbeddedTmpl: "pwned", DestPath: dest}}, nil)
		if err == nil || !errors.Is(err, safefs.ErrUnsafePath) || !strings.Contains(err.Error(), dest) {
			t.Fatalf("%s: err = %v, want an unsafe-path refusal naming the destination", dest, err)
		}
		ents, err := os.ReadDir(host)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 0 {
			t.Fatalf("%s: the host directory holds %v", dest, ents)
		}
	}
}

// A symlink planted at the destination itself is replaced by the rendered
// file; its target on the host is not written.
func TestTemplateDestinationSymlinkReplaced(t *testing.T) {
	allocDir, taskDir := taskDirFixture(t)
	hostFile := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(hostFile, []byte("root:x:0:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(allocDir, "alloc", "out.conf")
	if err := os.Symlink(hostFile, dst); err != nil {
		t.Fatal(err)
	}
	uid, gid := os.Getuid(), os.Getgid()
	if _, err := renderTemplates(allocDir, taskDir, []*structs.Template{{EmbeddedTmpl: "rendered", DestPath: "../alloc/out.conf", Perms: "0640", Uid: &uid, Gid: &gid}}, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(hostFile); string(b) != "root:x:0:0\n" {
		t.Fatalf("the symlink's target was written: %q", b)
	}
	fi, err := os.Lstat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 {
		t.Fatalf("destination is %v, want a regular file with mode 0640", fi.Mode())
	}
	if b, _ := os.ReadFile(dst); string(b) != "rendered" {
		t.Fatalf("destination holds %q", b)
	}
	if fi, _ := os.Lstat(hostFile); fi.Mode().Perm() != 0o644 {
		t.Fatalf("the host file's mode changed to %v", fi.Mode())
	}
}

// A template's source that is a symlink (to a host file) is refused, not
// read into the rendered file.
func TestTemplateSourceSymlinkRefused(t *testing.T) {
	allocDir, taskDir := taskDirFixture(t)
	hostFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(hostFile, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hostFile, filepath.Join(taskDir, "local", "src.tpl")); err != nil {
		t.Fatal(err)
	}
	_, err := renderTemplates(allocDir, taskDir, []*structs.Template{{SourcePath: "local/src.tpl", DestPath: "local/out"}}, nil)
	if err == nil || !errors.Is(err, safefs.ErrUnsafePath) || !strings.Contains(err.Error(), "local/src.tpl") {
		t.Fatalf("err = %v, want an unsafe-path refusal naming the source", err)
	}
	if _, err := os.Lstat(filepath.Join(taskDir, "local", "out")); !os.IsNotExist(err) {
		t.Fatalf("the destination was written (stat: %v)", err)
	}
}
