package client

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/client/internal/artifacttest"
	"github.com/drover-org/drover/core/structs"
)

// tarGz builds a .tar.gz of the given files.
func tarGz(t *testing.T, files map[string]string) []byte { return artifacttest.TarGz(t, files) }

// newArtifactServer serves files and records the headers of its requests.
func newArtifactServer(t *testing.T, files map[string][]byte) *artifacttest.Server {
	return artifacttest.NewServer(t, files)
}

// A real raw_exec task gets its artifact and rendered template before it
// starts, and the template's env file in its environment; a failed
// artifact fails the task with Nomad's event.
func TestRawExecArtifactsAndTemplates(t *testing.T) {
	files := newArtifactServer(t, map[string][]byte{"/tool.tar.gz": tarGz(t, map[string]string{"tool.sh": "#!/bin/sh\necho \"tool says $1\"\n"})})
	srv := newFakeServer()
	state := t.TempDir()
	c := newRawExecClient(t, srv, state)
	defer c.Shutdown()
	select {
	case <-c.Registered():
	case <-time.After(testTimeout):
		t.Fatal("client did not register")
	}
	task := rawTask("web", "/bin/sh", "-c", `local/tool.sh "$GREETING" > ../alloc/out.txt && cat local/app.conf >> ../alloc/out.txt`)
	task.Artifacts = []*structs.TaskArtifact{{GetterSource: files.URL + "/tool.tar.gz", RelativeDest: "local/"}}
	task.Templates = []*structs.Template{
		{EmbeddedTmpl: `alloc={{ env "NOMAD_ALLOC_ID" }}`, DestPath: "local/app.conf"},
		{EmbeddedTmpl: `GREETING=hello`, DestPath: "secrets/env", Envvars: true},
	}
	srv.upsert(testAlloc("files-1", c.NodeID(), testJob("batch", task)))

	bad := rawTask("web", "/bin/true")
	bad.Artifacts = []*structs.TaskArtifact{{GetterSource: files.URL + "/missing.tar.gz"}}
	srv.upsert(testAlloc("files-2", c.NodeID(), testJob("batch", bad)))

	waitFor(t, "files-1 complete", func() bool { return srv.clientStatus("files-1") == structs.AllocClientStatusComplete })
	out, err := os.ReadFile(filepath.Join(state, "alloc", "files-1", "alloc", "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "tool says hello\nalloc=files-1"; string(out) != want {
		t.Errorf("task wrote %q, want %q", out, want)
	}
	waitFor(t, "files-2 failed", func() bool { return srv.clientStatus("files-2") == structs.AllocClientStatusFailed })
	st := srv.alloc("files-2").TaskStates["web"]
	var types []string
	for _, ev := range st.Events {
		types = append(types, ev.Type)
	}
	if !strings.Contains(strings.Join(types, ","), structs.TaskArtifactDownloadFn+","+structs.TaskArtifactDownloadFailed) {
		t.Errorf("events %v, want %q then %q", types, structs.TaskArtifactDownloadFn, structs.TaskArtifactDownloadFailed)
	}
}
