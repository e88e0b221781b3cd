package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/test/internal/harness"
)

// clientAPIScript is the task of TestClientAPIOnDevAgent: it writes a
// file, plants symlinks out of its directories (to /etc/shadow and to
// the alloc dir's grandparent), and records every SIGUSR1 it gets.
const clientAPIScript = `echo hello > "$NOMAD_ALLOC_DIR/data/hello.txt"
ln -s /etc/shadow "$NOMAD_TASK_DIR/shadow"
ln -s ../../.. "$NOMAD_ALLOC_DIR/data/up"
trap 'echo got-usr1 >> "$NOMAD_ALLOC_DIR/data/sig.txt"' USR1
while true; do sleep 0.2; done`

// TestClientAPIOnDevAgent drives the client-side API of a dev agent
// through Nomad's official client: the alloc file system (with a task's
// symlinks refused), stats, signal, restart and node metadata.
func TestClientAPIOnDevAgent(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	nc := a.nomadClient()

	job := nomadapi.NewServiceJob("e2e-clientapi", "e2e-clientapi", "global", 50)
	job.Datacenters = []string{"*"}
	task := nomadapi.NewTask("t", "raw_exec").
		SetConfig("command", "/bin/sh").
		SetConfig("args", []string{"-c", clientAPIScript}).
		Require(&nomadapi.Resources{CPU: clientAPIInt(20), MemoryMB: clientAPIInt(32)})
	job.AddTaskGroup(nomadapi.NewTaskGroup("g", 1).AddTask(task))
	if _, _, err := nc.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	var alloc *nomadapi.Allocation
	clientAPIWait(t, "the alloc runs and wrote its file", func() (bool, string) {
		stubs, _, err := nc.Jobs().Allocations("e2e-clientapi", false, nil)
		if err != nil || len(stubs) == 0 {
			return false, fmt.Sprint(err)
		}
		if alloc, _, err = nc.Allocations().Info(stubs[0].ID, nil); err != nil {
			return false, err.Error()
		}
		if alloc.ClientStatus != "running" {
			return false, alloc.ClientStatus
		}
		_, _, err = nc.AllocFS().Stat(alloc, "alloc/data/up", nil)
		// The last file the task makes is a symlink: stat refuses it.
		return err != nil && strings.Contains(err.Error(), "403"), fmt.Sprint(err)
	})

	// The file system.
	root, _, err := nc.AllocFS().List(alloc, "/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if names := fileNames(root); names != "alloc,t" {
		t.Errorf("ls / = %s; want alloc,t", names)
	}
	data, _, err := nc.AllocFS().List(alloc, "alloc/data", nil)
	if err != nil || !strings.Contains(fileNames(data), "hello.txt") {
		t.Fatalf("ls alloc/data = %s, %v", fileNames(data), err)
	}
	for _, f := range data {
		if f.Name == "up" && !strings.HasPrefix(f.FileMode, "L") {
			t.Errorf("the task's symlink is listed as %+v", f)
		}
	}
	if got := readCloser(t)(nc.AllocFS().Cat(alloc, "alloc/data/hello.txt", nil)); got != "hello\n" {
		t.Errorf("cat = %q", got)
	}
	if got := readCloser(t)(nc.AllocFS().ReadAt(alloc, "alloc/data/hello.txt", 1, 3, nil)); got != "ell" {
		t.Errorf("readat = %q", got)
	}
	cancel := make(chan struct{})
	frames, errs := nc.AllocFS().Stream(alloc, "alloc/data/hello.txt", "end", 2, cancel, nil)
	select {
	case f := <-frames:
		if f == nil || string(f.Data) != "o\n" || f.Offset != 6 {
			t.Errorf("stream frame = %+v", f)
		}
	case err := <-errs:
		t.Fatalf("stream: %v", err)
	case <-a.proc.Exited():
		t.Fatal("agent exited")
	}
	close(cancel)
	for path, want := range map[string]int{
		"t/local/shadow":             http.StatusForbidden,
		"alloc/data/up/etc/passwd":   http.StatusForbidden,
		"alloc/data/up":              http.StatusForbidden,
		"t/secrets/x":                http.StatusForbidden,
		"../../../etc/passwd":        http.StatusBadRequest,
		"/etc/passwd":                http.StatusNotFound, // "/" is the alloc dir
		"alloc/data/missing":         http.StatusNotFound,
		"alloc/data":                 http.StatusBadRequest, // a directory
		"alloc/data/../../../../etc": http.StatusBadRequest,
	} {
		status, body, err := a.Raw(http.MethodGet, "/v1/client/fs/cat/"+alloc.ID+"?path="+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if status != want || strings.Contains(string(body), "root:") {
			t.Errorf("cat %s: %d %.200q; want %d", path, status, body, want)
		}
	}
	status, _, err := a.Raw(http.MethodGet, "/v1/client/fs/ls/4b4e1e4c-0000-4000-8000-000000000000?path=/", nil)
	if err != nil || status != http.StatusNotFound {
		t.Errorf("ls of an unknown alloc: %d, %v; want 404", status, err)
	}

	// Stats.
	usage, err := nc.Allocations().Stats(alloc, nil)
	if err != nil || usage.Tasks["t"] == nil || usage.Tasks["t"].ResourceUsage.MemoryStats.RSS == 0 {
		t.Errorf("alloc stats = %+v, %v", usage, err)
	}
	host, err := nc.Nodes().Stats(alloc.NodeID, nil)
	if err != nil || host.Memory == nil || host.Memory.Total == 0 || len(host.CPU) == 0 || host.Uptime == 0 {
		t.Errorf("node stats = %+v, %v", host, err)
	}
	if checks, err := nc.Allocations().Checks(alloc.ID, nil); err != nil || len(checks) != 0 {
		t.Errorf("checks of an alloc without checks = %v, %v", checks, err)
	}

	// Signal: the task records it.
	if err := nc.Allocations().Signal(alloc, nil, "t", "SIGUSR1"); err != nil {
		t.Fatal(err)
	}
	clientAPIWait(t, "the task got SIGUSR1", func() (bool, string) {
		rc, err := nc.AllocFS().Cat(alloc, "alloc/data/sig.txt", nil)
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		return strings.Contains(string(b), "got-usr1"), string(b)
	})
	if err := nc.Allocations().Signal(alloc, nil, "t", "SIGNOPE"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("an unknown signal: %v; want a 400", err)
	}

	// Restart: in place, counted in Restarts, the alloc keeps running.
	if err := nc.Allocations().Restart(alloc, "t", nil); err != nil {
		t.Fatal(err)
	}
	clientAPIWait(t, "the task restarted", func() (bool, string) {
		al, _, err := nc.Allocations().Info(alloc.ID, nil)
		if err != nil {
			return false, err.Error()
		}
		ts := al.TaskStates["t"]
		if ts == nil {
			return false, "no task state"
		}
		return ts.Restarts == 1 && ts.State == "running" && al.ClientStatus == "running", fmt.Sprintf("%s restarts=%d", ts.State, ts.Restarts)
	})

	// Node metadata: applied, read back, and on the node the servers hold.
	v := "blue"
	if _, err := nc.Nodes().Meta().Apply(&nomadapi.NodeMetaApplyRequest{NodeID: alloc.NodeID, Meta: map[string]*string{"color": &v}}, nil); err != nil {
		t.Fatal(err)
	}
	meta, err := nc.Nodes().Meta().Read(alloc.NodeID, nil)
	if err != nil || meta.Meta["color"] != "blue" || meta.Dynamic["color"] == nil {
		t.Fatalf("meta read = %+v, %v", meta, err)
	}
	clientAPIWait(t, "the node carries the new meta", func() (bool, string) {
		n, _, err := nc.Nodes().Info(alloc.NodeID, nil)
		if err != nil {
			return false, err.Error()
		}
		return n.Meta["color"] == "blue", fmt.Sprint(n.Meta)
	})
	bad := "x"
	if _, err := nc.Nodes().Meta().Apply(&nomadapi.NodeMetaApplyRequest{Meta: map[string]*string{"a b": &bad}}, nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("a bad meta key: %v; want a 400", err)
	}
}

func clientAPIInt(n int) *int { return &n }

func clientAPIWait(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	harness.WaitFor(t, waitTimeout, what, cond)
}

func fileNames(fs []*nomadapi.AllocFileInfo) string {
	var names []string
	for _, f := range fs {
		names = append(names, f.Name)
	}
	return strings.Join(names, ",")
}

// readCloser reads what a nomad/api call returned, failing on its error.
func readCloser(t *testing.T) func(io.ReadCloser, error) string {
	return func(rc io.ReadCloser, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
}
