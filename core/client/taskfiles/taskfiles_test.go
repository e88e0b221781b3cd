package taskfiles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/client/internal/artifacttest"
	"github.com/drover-org/drover/core/structs"
)

// taskDirFixture is an alloc dir with one task dir "t" (local/, secrets/).
func taskDirFixture(t *testing.T) (allocDir, taskDir string) {
	t.Helper()
	allocDir = t.TempDir()
	taskDir = filepath.Join(allocDir, "t")
	for _, d := range []string{"local", "secrets"} {
		if err := os.MkdirAll(filepath.Join(taskDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(allocDir, "alloc"), 0o755); err != nil {
		t.Fatal(err)
	}
	return allocDir, taskDir
}

func TestRenderTemplates(t *testing.T) {
	t.Setenv("DROVER_CLIENT_SECRET", "leaked")
	env := map[string]string{"NOMAD_ALLOC_ID": "a-1", "NOMAD_PORT_http": "8080"}
	tests := []struct {
		name     string
		tmpl     *structs.Template
		source   string // written to local/src.tpl first
		wantFile string // the rendered file's content
		wantMode os.FileMode
		wantVars map[string]string
		wantErr  string
	}{
		{name: "env from the task", tmpl: &structs.Template{EmbeddedTmpl: `id={{ env "NOMAD_ALLOC_ID" }}`, DestPath: "local/a.conf"}, wantFile: "id=a-1", wantMode: 0o644},
		{name: "the client's environment is not visible", tmpl: &structs.Template{EmbeddedTmpl: `s={{ env "DROVER_CLIENT_SECRET" }}`, DestPath: "local/s"}, wantFile: "s=", wantMode: 0o644},
		{name: "envOrDefault", tmpl: &structs.Template{EmbeddedTmpl: `{{ envOrDefault "NOPE" "d" }}`, DestPath: "local/d"}, wantFile: "d", wantMode: 0o644},
		{name: "delimiters and perms", tmpl: &structs.Template{EmbeddedTmpl: `p=[[ env "NOMAD_PORT_http" ]] {{ raw }}`, DestPath: "secrets/p", LeftDelim: "[[", RightDelim: "]]", Perms: "0600"}, wantFile: "p=8080 {{ raw }}", wantMode: 0o600},
		{name: "into the shared alloc dir", tmpl: &structs.Template{EmbeddedTmpl: `x`, DestPath: "../alloc/shared.conf"}, wantFile: "x", wantMode: 0o644},
		{name: "source file", source: `from source {{ env "NOMAD_ALLOC_ID" }}`, tmpl: &structs.Template{SourcePath: "local/src.tpl", DestPath: "local/out"}, wantFile: "from source a-1", wantMode: 0o644},
		{name: "sprig-style functions", tmpl: &structs.Template{EmbeddedTmpl: `{{ "abc" | toUpper }} {{ parseInt "41" | add 1 }}`, DestPath: "local/f"}, wantFile: "ABC 42", wantMode: 0o644},
		{name: "env = true", tmpl: &structs.Template{EmbeddedTmpl: "# comment\nPORT={{ env \"NOMAD_PORT_http\" }}\nexport NAME=\"web\"\n", DestPath: "secrets/app.env", Envvars: true},
			wantFile: "# comment\nPORT=8080\nexport NAME=\"web\"\n", wantMode: 0o644, wantVars: map[string]string{"PORT": "8080", "NAME": "web"}},
		{name: "consul data refused", tmpl: &structs.Template{EmbeddedTmpl: `{{ key "config/x" }}`, DestPath: "local/k"}, wantErr: "needs data drover does not serve to templates"},
		{name: "writeToFile denied", tmpl: &structs.Template{EmbeddedTmpl: `{{ writeToFile "/tmp/x" "" "" "0644" "y" }}`, DestPath: "local/w"}, wantErr: "writeToFile"},
		{name: "destination escaping", tmpl: &structs.Template{EmbeddedTmpl: `x`, DestPath: "../../etc/x"}, wantErr: "destination"},
		{name: "bad template", tmpl: &structs.Template{EmbeddedTmpl: `{{ if }}`, DestPath: "local/b"}, wantErr: "template 1 (local/b)"},
		{name: "bad env file", tmpl: &structs.Template{EmbeddedTmpl: "not a pair", DestPath: "local/e", Envvars: true}, wantErr: "line 1: want KEY=value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			allocDir, taskDir := taskDirFixture(t)
			if tc.source != "" {
				if err := os.WriteFile(filepath.Join(taskDir, "local", "src.tpl"), []byte(tc.source), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			vars, err := renderTemplates(allocDir, taskDir, []*structs.Template{tc.tmpl}, env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(taskDir, tc.tmpl.DestPath)
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.wantFile {
				t.Errorf("rendered %q, want %q", got, tc.wantFile)
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != tc.wantMode {
				t.Errorf("mode %v, want %v", fi.Mode().Perm(), tc.wantMode)
			}
			if len(vars) != len(tc.wantVars) {
				t.Errorf("vars %v, want %v", vars, tc.wantVars)
			}
			for k, v := range tc.wantVars {
				if vars[k] != v {
					t.Errorf("vars[%s] = %q, want %q", k, vars[k], v)
				}
			}
		})
	}
}

// tarGz builds a .tar.gz of the given files.
func tarGz(t *testing.T, files map[string]string) []byte { return artifacttest.TarGz(t, files) }

// newArtifactServer serves files and records the headers of its requests.
func newArtifactServer(t *testing.T, files map[string][]byte) *artifacttest.Server {
	return artifacttest.NewServer(t, files)
}

func TestFetchArtifacts(t *testing.T) {
	archive := tarGz(t, map[string]string{"bin/run.sh": "#!/bin/sh\necho hi\n"})
	plain := []byte("plain file\n")
	sum := sha256.Sum256(plain)
	srv := newArtifactServer(t, map[string][]byte{"/app.tar.gz": archive, "/plain.txt": plain})
	lookup := func(k string) (string, bool) {
		if k == "ARTIFACT_HOST" {
			return strings.TrimPrefix(srv.URL, "http://"), true
		}
		return "", false
	}
	tests := []struct {
		name     string
		art      *structs.TaskArtifact
		wantFile string // relative to the task dir
		wantBody string
		wantErr  string
	}{
		{name: "archive unpacked", art: &structs.TaskArtifact{GetterSource: "http://${ARTIFACT_HOST}/app.tar.gz", RelativeDest: "local/"},
			wantFile: "local/bin/run.sh", wantBody: "#!/bin/sh\necho hi\n"},
		{name: "checksum matches", art: &structs.TaskArtifact{GetterSource: srv.URL + "/plain.txt", RelativeDest: "local/docs",
			GetterOptions: map[string]string{"checksum": "sha256:" + hex.EncodeToString(sum[:])}}, wantFile: "local/docs/plain.txt", wantBody: "plain file\n"},
		{name: "file mode", art: &structs.TaskArtifact{GetterSource: srv.URL + "/plain.txt", RelativeDest: "local/renamed.txt", GetterMode: structs.GetterModeFile},
			wantFile: "local/renamed.txt", wantBody: "plain file\n"},
		{name: "checksum mismatch", art: &structs.TaskArtifact{GetterSource: srv.URL + "/plain.txt",
			GetterOptions: map[string]string{"checksum": "sha256:" + strings.Repeat("0", 64)}}, wantErr: "checksum"},
		{name: "not found", art: &structs.TaskArtifact{GetterSource: srv.URL + "/nope.txt?token=secret"}, wantErr: "artifact 1 (" + srv.URL + "/nope.txt)"},
		{name: "local files are no source", art: &structs.TaskArtifact{GetterSource: "file:///etc/passwd"}, wantErr: "artifact download failed"},
		{name: "destination escaping", art: &structs.TaskArtifact{GetterSource: srv.URL + "/plain.txt", RelativeDest: "../../x"}, wantErr: "destination"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			allocDir, taskDir := taskDirFixture(t)
			err := FetchArtifacts(context.Background(), allocDir, taskDir, []*structs.TaskArtifact{tc.art}, lookup)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrArtifact) {
					t.Fatalf("err = %v, want an artifact error containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("error shows the URL's query: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(taskDir, tc.wantFile))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.wantBody {
				t.Errorf("%s = %q, want %q", tc.wantFile, got, tc.wantBody)
			}
		})
	}
	// Headers go with the request.
	allocDir, taskDir := taskDirFixture(t)
	if err := FetchArtifacts(context.Background(), allocDir, taskDir, []*structs.TaskArtifact{{
		GetterSource: srv.URL + "/plain.txt", GetterHeaders: map[string]string{"X-Token": "t-1"},
	}}, lookup); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, h := range srv.Headers() {
		found = found || h.Get("X-Token") == "t-1"
	}
	if !found {
		t.Errorf("no request carried the artifact's header")
	}
}
