package taskfiles

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/safefs"
)

// hostGitRepo makes a git repository on the test's disk holding one file.
func hostGitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "host-secret.txt"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "-q"}, {"add", "."},
		{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return repo
}

// Every source that reads the client's own disk is refused with the rule,
// before any getter runs; nothing reaches the task's directory.
func TestArtifactLocalSourcesRefused(t *testing.T) {
	repo := hostGitRepo(t)
	for _, tc := range []struct{ src, want string }{
		{"git::file://" + repo, "file:// sources are refused"},
		{"git::" + repo, "the client's file system is not an artifact source"},
		{"git::./relative", "the client's file system is not an artifact source"},
		{"file:///etc/passwd", "file:// sources are refused"},
		{"/etc/passwd", "the client's file system is not an artifact source"},
		{"hg::https://example.com/repo", `getter "hg" is not supported`},
		{"file::/etc", `getter "file" is not supported`},
		{"git::ssh://-oProxyCommand=x/y", `must not start with "-"`},
		{"git::ssh://git@host/repo?ref=--upload-pack=touch", `option ref must not start with "-"`},
	} {
		t.Run(tc.src, func(t *testing.T) {
			allocDir, taskDir := taskDirFixture(t)
			// Through the task's environment as well: the rule applies to
			// the interpolated source.
			lookup := func(k string) (string, bool) { return tc.src, k == "SRC" }
			err := FetchArtifacts(context.Background(), allocDir, taskDir, []*structs.TaskArtifact{{GetterSource: "${SRC}", RelativeDest: "local/"}}, lookup)
			if err == nil || !errors.Is(err, ErrArtifact) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "artifact 1") {
				t.Fatalf("err = %v, want an artifact 1 error containing %q", err, tc.want)
			}
			ents, _ := os.ReadDir(filepath.Join(taskDir, "local"))
			if len(ents) != 0 {
				t.Fatalf("local/ holds %v", ents)
			}
		})
	}
}

// An artifact whose destination crosses a symlink planted in the shared
// alloc/ directory is refused; one whose destination is the planted
// symlink replaces it. Either way the host directory stays empty.
func TestArtifactDestinationThroughPlantedSymlinkRefused(t *testing.T) {
	srv := newArtifactServer(t, map[string][]byte{
		"/plain.txt":  []byte("payload"),
		"/app.tar.gz": tarGz(t, map[string]string{"bin/run.sh": "x"}),
	})
	for _, tc := range []struct {
		src, dest string
		refused   bool
	}{
		{srv.URL + "/plain.txt", "../alloc/x/sub", true},
		{srv.URL + "/app.tar.gz", "../alloc/x/sub", true},
		{srv.URL + "/plain.txt", "../alloc/x/", false},
		{srv.URL + "/app.tar.gz", "../alloc/x/", false},
	} {
		allocDir, taskDir := taskDirFixture(t)
		host := t.TempDir()
		link := filepath.Join(allocDir, "alloc", "x")
		if err := os.Symlink(host, link); err != nil {
			t.Fatal(err)
		}
		err := FetchArtifacts(context.Background(), allocDir, taskDir, []*structs.TaskArtifact{{GetterSource: tc.src, RelativeDest: tc.dest}}, nil)
		if tc.refused {
			if err == nil || !errors.Is(err, ErrArtifact) || !errors.Is(err, safefs.ErrUnsafePath) {
				t.Fatalf("%s -> %s: err = %v, want an unsafe-path refusal", tc.src, tc.dest, err)
			}
		} else {
			if err != nil {
				t.Fatalf("%s -> %s: %v", tc.src, tc.dest, err)
			}
			if fi, err := os.Lstat(link); err != nil || !fi.IsDir() {
				t.Fatalf("%s -> %s: the planted symlink was not replaced by a directory (%v, %v)", tc.src, tc.dest, fi, err)
			}
		}
		if ents, _ := os.ReadDir(host); len(ents) != 0 {
			t.Fatalf("%s -> %s: the host directory holds %v", tc.src, tc.dest, ents)
		}
		// The client's fetch directory is gone.
		if m, _ := filepath.Glob(filepath.Join(allocDir, ".artifact-*")); len(m) != 0 {
			t.Fatalf("fetch directories left: %v", m)
		}
	}
}

// tarGzEntries builds a .tar.gz of n small files.
func tarGzEntries(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for i := range n {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("f/%d", i), Mode: 0o644, Size: 1, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// An archive that unpacks more files than the bound is refused and leaves
// nothing in the task's directory.
func TestArtifactArchiveFileCountBounded(t *testing.T) {
	srv := newArtifactServer(t, map[string][]byte{"/bomb.tar.gz": tarGzEntries(t, artifactArchiveFiles+10)})
	allocDir, taskDir := taskDirFixture(t)
	err := FetchArtifacts(context.Background(), allocDir, taskDir, []*structs.TaskArtifact{{GetterSource: srv.URL + "/bomb.tar.gz", RelativeDest: "local/"}}, nil)
	if err == nil || !errors.Is(err, ErrArtifact) || !strings.Contains(err.Error(), "too many files") {
		t.Fatalf("err = %v, want the archive's file bound", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(taskDir, "local")); len(ents) != 0 {
		t.Fatalf("local/ holds %v", ents)
	}
}

// An archive whose unpacked size passes the task's budget is refused (a
// gzip bomb: a small download, a large file).
func TestArtifactArchiveUnpackedSizeBounded(t *testing.T) {
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	const size = 8 << 20
	if err := tw.WriteHeader(&tar.Header{Name: "zeros", Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	gz.Close()
	srv := newArtifactServer(t, map[string][]byte{"/bomb.tar.gz": buf.Bytes()})
	allocDir, taskDir := taskDirFixture(t)
	budget := &artifactBudget{bytes: 1 << 20, entries: artifactMaxEntries}
	err := fetchArtifact(context.Background(), allocDir, taskDir, &structs.TaskArtifact{GetterSource: srv.URL + "/bomb.tar.gz", RelativeDest: "local/"}, nil, budget)
	if err == nil || !strings.Contains(err.Error(), "larger than limit") {
		t.Fatalf("err = %v, want the unpacked size bound", err)
	}
	if _, err := os.Stat(filepath.Join(taskDir, "local", "zeros")); !os.IsNotExist(err) {
		t.Fatalf("the bomb reached local/ (stat: %v)", err)
	}
}

// A fetched tree (a cloned repository) with a symlink leading out of it
// is refused; one that stays inside is kept; the byte and entry budgets
// hold for any getter's tree.
func TestCheckArtifactTree(t *testing.T) {
	mk := func(t *testing.T, links map[string]string) string {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("12345"), 0o644); err != nil {
			t.Fatal(err)
		}
		for name, target := range links {
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	big := artifactBudget{bytes: 1 << 20, entries: 100}
	for _, tc := range []struct {
		name   string
		links  map[string]string
		budget artifactBudget
		want   string
	}{
		{"inside", map[string]string{"sub/l": "f", "l": "sub/f"}, big, ""},
		{"absolute", map[string]string{"l": "/etc/shadow"}, big, "symlink to the absolute path /etc/shadow"},
		{"relative out", map[string]string{"sub/l": "../../etc"}, big, "outside the artifact"},
		{"bytes", nil, artifactBudget{bytes: 4, entries: 100}, "more than 4 bytes"},
		{"entries", nil, artifactBudget{bytes: 1 << 20, entries: 1}, "more than 1 files and directories"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkArtifactTree(mk(t, tc.links), tc.budget)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// An archive's symlink entries are not unpacked as symlinks: one leading
// to a host path, and a file "through" it, reach nothing on the host.
func TestArtifactArchiveSymlinkDropped(t *testing.T) {
	host := t.TempDir()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "link", Linkname: host, Typeflag: tar.TypeSymlink, Mode: 0o777}); err != nil {
		t.Fatal(err)
	}
	if err := tw.WriteHeader(&tar.Header{Name: "ok.txt", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte("ok"))
	tw.Close()
	gz.Close()
	srv := newArtifactServer(t, map[string][]byte{"/a.tar.gz": buf.Bytes()})
	allocDir, taskDir := taskDirFixture(t)
	err := FetchArtifacts(context.Background(), allocDir, taskDir, []*structs.TaskArtifact{{GetterSource: srv.URL + "/a.tar.gz", RelativeDest: "local/"}}, nil)
	if err != nil && !errors.Is(err, ErrArtifact) {
		t.Fatalf("err = %v", err)
	}
	if fi, lerr := os.Lstat(filepath.Join(taskDir, "local", "link")); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
		t.Fatalf("the archive's symlink was unpacked as a symlink")
	}
	if ents, _ := os.ReadDir(host); len(ents) != 0 {
		t.Fatalf("the host directory holds %v", ents)
	}
}

// The byte budget is the task's: what one artifact used is not available
// to the next, and an exhausted budget fetches nothing.
func TestArtifactBudgetIsPerTask(t *testing.T) {
	srv := newArtifactServer(t, map[string][]byte{"/a.txt": []byte("1234567"), "/b.txt": []byte("7654321")})
	allocDir, taskDir := taskDirFixture(t)
	budget := &artifactBudget{bytes: 10, entries: 100}
	if err := fetchArtifact(context.Background(), allocDir, taskDir, &structs.TaskArtifact{GetterSource: srv.URL + "/a.txt", RelativeDest: "local/"}, nil, budget); err != nil {
		t.Fatal(err)
	}
	if budget.bytes != 3 {
		t.Fatalf("budget left %d bytes, want 3", budget.bytes)
	}
	if err := fetchArtifact(context.Background(), allocDir, taskDir, &structs.TaskArtifact{GetterSource: srv.URL + "/b.txt", RelativeDest: "local/"}, nil, budget); err == nil {
		t.Fatal("the second artifact passed the task's budget")
	}
	if _, err := os.Stat(filepath.Join(taskDir, "local", "b.txt")); !os.IsNotExist(err) {
		t.Fatalf("b.txt reached local/ (stat: %v)", err)
	}
	budget.bytes = 0
	err := fetchArtifact(context.Background(), allocDir, taskDir, &structs.TaskArtifact{GetterSource: srv.URL + "/b.txt", RelativeDest: "local/"}, nil, budget)
	if !errors.Is(err, errArtifactBound) {
		t.Fatalf("err = %v, want the bound", err)
	}
}

// The size watcher stops a fetch that grows past the budget while the
// getter still writes (a git clone has no limit of its own).
func TestWatchArtifactSizeStopsTheFetch(t *testing.T) {
	dir := t.TempDir()
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchArtifactSize(ctx, dir, artifactBudget{bytes: 1 << 20, entries: 100}, stop)
	}()
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the watcher did not stop the fetch")
	}
	<-done
	if cause := context.Cause(ctx); !errors.Is(cause, errArtifactBound) || !strings.Contains(cause.Error(), "more than 1048576 bytes") {
		t.Fatalf("cause = %v, want the byte bound", cause)
	}
}
