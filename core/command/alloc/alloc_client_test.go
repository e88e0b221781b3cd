package alloc

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/client/clientapi"
	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

func TestAllocRestartAndSignal(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	clitest.ServeAlloc(f, clitest.TestAlloc("t"))
	f.JSON("PUT /v1/client/allocation/"+clitest.AllocID+"/restart", struct{}{})
	f.JSON("PUT /v1/client/allocation/"+clitest.AllocID+"/signal", struct{}{})

	for _, tc := range []struct {
		args []string
		want clientapi.AllocRestartRequest
	}{
		{[]string{"8ba8", "t"}, clientapi.AllocRestartRequest{TaskName: "t"}},
		{[]string{"-task", "t", "8ba8"}, clientapi.AllocRestartRequest{TaskName: "t"}},
		{[]string{"-all-tasks", "8ba8"}, clientapi.AllocRestartRequest{AllTasks: true}},
		{[]string{"8ba8"}, clientapi.AllocRestartRequest{}},
	} {
		r := f.Run(t, "", append([]string{"alloc", "restart"}, tc.args...)...)
		clitest.WantCode(t, r, 0)
		var got clientapi.AllocRestartRequest
		if err := json.Unmarshal(f.Request("PUT /v1/client/allocation/"+clitest.AllocID+"/restart").Body, &got); err != nil || got != tc.want {
			t.Errorf("restart %v sent %+v (%v); want %+v", tc.args, got, err, tc.want)
		}
	}
	r := f.Run(t, "", "alloc", "restart", "-all-tasks", "8ba8", "t")
	clitest.WantCode(t, r, 1)

	r = f.Run(t, "", "alloc", "signal", "-s", "SIGHUP", "8ba8", "t")
	clitest.WantCode(t, r, 0)
	var sig clientapi.AllocSignalRequest
	if err := json.Unmarshal(f.Request("PUT /v1/client/allocation/"+clitest.AllocID+"/signal").Body, &sig); err != nil || sig.Signal != "SIGHUP" || sig.Task != "t" {
		t.Errorf("signal sent %+v, %v", sig, err)
	}
	f.Fail("PUT /v1/client/allocation/"+clitest.AllocID+"/signal", 400, `Signal: unknown signal "NOPE"`)
	r = f.Run(t, "", "alloc", "signal", "-s", "NOPE", "8ba8")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "unknown signal")
}

func TestAllocFS(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	clitest.ServeAlloc(f, clitest.TestAlloc("t"))
	mod := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Handle("GET /v1/client/fs/stat/"+clitest.AllocID, func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Query().Get("path")
		fi := clientapi.FileInfo{Name: "out", Size: 2048, FileMode: "-rw-r--r--", ModTime: mod, ContentType: "text/plain"}
		if p == "/" || p == "alloc" {
			fi = clientapi.FileInfo{Name: "/", IsDir: true, FileMode: "drwxr-xr-x", ModTime: mod}
		}
		_ = json.NewEncoder(w).Encode(fi)
	})
	f.JSON("GET /v1/client/fs/ls/"+clitest.AllocID, []*clientapi.FileInfo{
		{Name: "alloc", IsDir: true, FileMode: "drwxr-xr-x", ModTime: mod, Size: 4096},
		{Name: "t", IsDir: true, FileMode: "drwxr-xr-x", ModTime: mod, Size: 4096},
	})
	f.Handle("GET /v1/client/fs/stream/"+clitest.AllocID, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("plain") == "true" {
			_, _ = w.Write([]byte("line1\nline2\nline3\n"))
			return
		}
		enc := json.NewEncoder(w)
		_ = enc.Encode(map[string]any{"Offset": 6, "Data": []byte("line1\n"), "File": "alloc/out"})
	})

	r := f.Run(t, "", "alloc", "fs", "8ba8")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, "Mode", "drwxr-xr-x", "alloc/", "t/")
	if q := f.Request("GET /v1/client/fs/ls/" + clitest.AllocID).Query; q != "path=%2F" {
		t.Errorf("ls query %q", q)
	}

	r = f.Run(t, "", "alloc", "fs", "8ba8", "alloc/out")
	clitest.WantCode(t, r, 0)
	if r.Out != "line1\nline2\nline3\n" {
		t.Errorf("cat printed %q", r.Out)
	}
	r = f.Run(t, "", "alloc", "fs", "-n", "1", "8ba8", "alloc/out")
	clitest.WantCode(t, r, 0)
	if r.Out != "line3\n" {
		t.Errorf("tail printed %q", r.Out)
	}
	if q := f.Request("GET /v1/client/fs/stream/" + clitest.AllocID).Query; !strings.Contains(q, "origin=end") {
		t.Errorf("tail query %q", q)
	}
	r = f.Run(t, "", "alloc", "fs", "-f", "8ba8", "alloc/out")
	clitest.WantCode(t, r, 0)
	if r.Out != "line1\n" {
		t.Errorf("follow printed %q", r.Out)
	}
	r = f.Run(t, "", "alloc", "fs", "-stat", "-H", "8ba8", "alloc/out")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, "-rw-r--r--", "2.0 KiB", "text/plain", "out")

	f.Fail("GET /v1/client/fs/stat/"+clitest.AllocID, 403, `path "t/local/shadow": unsafe path: crosses a symbolic link`)
	r = f.Run(t, "", "alloc", "fs", "8ba8", "t/local/shadow")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "crosses a symbolic link")
}

func TestAllocChecks(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	clitest.ServeAlloc(f, clitest.TestAlloc("t"))
	f.JSON("GET /v1/client/allocation/"+clitest.AllocID+"/checks", map[string]*structs.CheckStatus{
		"abc": {ID: "abc", Check: "alive", Group: "g", Service: "web", Status: "success", StatusCode: 200, Mode: "healthiness", Timestamp: 1700000000, Output: "ok"},
	})
	r := f.Run(t, "", "alloc", "checks", "8ba8")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, "Status of 1 Nomad Service Checks", "Name", "alive", "success", "200", "healthiness")
	f.JSON("GET /v1/client/allocation/"+clitest.AllocID+"/checks", map[string]any{})
	r = f.Run(t, "", "alloc", "checks", "8ba8")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, "No checks")
}
