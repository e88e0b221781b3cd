package operator

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/fsm"
	"github.com/drover-org/drover/core/server/snapshotfile"
	"github.com/drover-org/drover/core/state"
)

// testSnapshotFile is a snapshot file of a state with two nodes.
func testSnapshotFile(t *testing.T) []byte {
	t.Helper()
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []string{"n1", "n2"} {
		node := clitest.TestNode()
		node.ID, node.Name = n+"-0000-0000-0000-000000000000", n
		if err := st.UpsertNode(uint64(10+i), node); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var payload, file bytes.Buffer
	if err := fsm.WriteSnapshot(&payload, snap, "test"); err != nil {
		t.Fatal(err)
	}
	meta := snapshotfile.Meta{ID: "3-11-1", Index: 11, Term: 3, Region: "global", Created: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)}
	if _, err := snapshotfile.Write(&file, meta, &payload); err != nil {
		t.Fatal(err)
	}
	return file.Bytes()
}

func TestOperatorSnapshotSaveInspectRestore(t *testing.T) {
	good := testSnapshotFile(t)
	f := clitest.NewFakeAgent(t)
	f.Handle("GET /v1/operator/snapshot", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(good) })
	f.JSON("PUT /v1/operator/snapshot", map[string]any{"Index": 11})
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.snap")

	r := f.Run(t, "", "operator", "snapshot", "save", "-stale", "-token", "mgmt", file)
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, "State file written to "+file, "index 11")
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, good) {
		t.Fatalf("saved file: %d bytes, %v; want the %d bytes served", len(got), err, len(good))
	}
	if req := f.Request("GET /v1/operator/snapshot"); req.Query != "stale=true" || req.Token != "mgmt" {
		t.Errorf("save request query %q token %q", req.Query, req.Token)
	}

	r = f.Run(t, "", "operator", "snapshot", "inspect", file)
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, "ID         3-11-1", "Index      11", "Term       3", "Checksum   sha256:")
	if !regexp.MustCompile(`(?m)^nodes +2$`).MatchString(r.Out) {
		t.Errorf("inspect: no count of 2 nodes in\n%s", r.Out)
	}

	r = f.Run(t, "", "operator", "snapshot", "restore", file)
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, "Snapshot Restored")
	if req := f.Request("PUT /v1/operator/snapshot"); !bytes.Equal(req.Body, good) {
		t.Errorf("restore sent %d bytes, want the file's %d", len(req.Body), len(good))
	}
}

// TestOperatorSnapshotDamaged: a damaged download is not written over the
// target, and a damaged file is neither inspected nor sent for restore.
func TestOperatorSnapshotDamaged(t *testing.T) {
	good := testSnapshotFile(t)
	bad := bytes.Clone(good[:len(good)-10])
	f := clitest.NewFakeAgent(t)
	f.Handle("GET /v1/operator/snapshot", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(bad) })
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.snap")
	if err := os.WriteFile(file, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := f.Run(t, "", "operator", "snapshot", "save", file)
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "damaged", "truncated")
	if got, _ := os.ReadFile(file); string(got) != "old" {
		t.Errorf("a damaged download replaced the file")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}

	badFile := filepath.Join(dir, "bad.snap")
	if err := os.WriteFile(badFile, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	r = f.Run(t, "", "operator", "snapshot", "inspect", badFile)
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "truncated")
	r = f.Run(t, "", "operator", "snapshot", "restore", badFile)
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "truncated")
	for _, req := range f.Reqs {
		if req.Method == http.MethodPut {
			t.Errorf("a damaged file was sent for restore")
		}
	}
}
