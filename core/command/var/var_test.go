package varcmd

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/httpapi"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/builtin"
)

// devAgent is a real dev server (ACLs off) behind the HTTP API.
func devAgent(t *testing.T) map[string]string {
	t.Helper()
	srv, err := server.New(server.Config{Logger: hclog.NewNullLogger(), DevMode: true,
		Schedulers: builtin.InProcess{}, KnownDrivers: []string{"raw_exec"}, HeartbeatTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.WaitForLeader(ctx); err != nil {
		_ = srv.Shutdown()
		t.Fatal(err)
	}
	h := httpapi.New(httpapi.Config{Server: srv, Logger: hclog.NewNullLogger(),
		Jobs: srv.Jobs(), Nodes: srv.Nodes(), Deployments: srv.Deployments(), Operator: srv.Operator(), System: srv,
		Namespaces: srv.Namespaces(), NodePools: srv.NodePools(), Services: srv.Services(), CSI: srv.CSI(), JobTypes: srv,
		Variables: srv.Variables()})
	ts := httptest.NewServer(h.Handler())
	t.Cleanup(func() {
		ts.Close()
		_ = h.Shutdown(context.Background())
		_ = srv.Shutdown()
	})
	return map[string]string{"DROVER_ADDR": ts.URL, "SHELL": "/bin/sh"}
}

func TestVarCommands(t *testing.T) {
	env := devAgent(t)
	run := func(stdin string, args ...string) clitest.Result {
		t.Helper()
		return clitest.RunCLI(t, env, stdin, nil, args...)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(file, []byte("CERT"), 0o600); err != nil {
		t.Fatal(err)
	}

	r := run("", "var", "put", "app/db", "user=u", "pass=p", "cert=@"+file)
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "put", r.Out, `Wrote variable "app/db" at index`)

	r = run("", "var", "get", "app/db")
	clitest.WantCode(t, r, 0)
	var v structs.Variable
	if err := json.Unmarshal([]byte(r.Out), &v); err != nil || v.Items["cert"] != "CERT" || v.Items["user"] != "u" {
		t.Fatalf("get -out json: %q, %v", r.Out, err)
	}
	r = run("", "var", "get", "-item", "pass", "app/db")
	clitest.WantCode(t, r, 0)
	if r.Out != "p\n" {
		t.Errorf("get -item: %q", r.Out)
	}
	r = run("", "var", "get", "-out", "table", "app/db")
	clitest.WantContains(t, "get table", r.Out, "Path        = app/db", "Items", "user = u")

	// A stale check index is a conflict that shows the current variable.
	r = run("", "var", "put", "-check-index", "1", "app/db", "user=x")
	if r.Code == 0 || !strings.Contains(r.ErrOut, "Check-index conflict") || !strings.Contains(r.Out, "user = u") {
		t.Errorf("stale put: %d %q %q", r.Code, r.Out, r.ErrOut)
	}
	r = run(`{"Items": {"from": "spec"}}`, "var", "put", "-check-index", "0", "app/web", "-")
	clitest.WantCode(t, r, 0)
	r = run("", "var", "put", "bad path", "k=v")
	if r.Code == 0 || !strings.Contains(r.ErrOut, "Path") {
		t.Errorf("bad path: %d %q", r.Code, r.ErrOut)
	}

	r = run("", "var", "list", "app/")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "list", r.Out, "Namespace  Path", "default    app/db", "default    app/web")
	r = run("", "var", "list", "-per-page", "1")
	clitest.WantContains(t, "list page", r.Out, "app/db", "Next page: -page-token=default.app/web")
	r = run("", "var", "list", "-per-page", "1", "-page-token", "default.app/web")
	if !strings.Contains(r.Out, "app/web") || strings.Contains(r.Out, "app/db") || strings.Contains(r.Out, "Next page") {
		t.Errorf("second page: %q", r.Out)
	}

	// The lock is held while the child runs, and released after.
	r = run("", "var", "lock", "-ttl", "10s", "locks/job", "echo child-ran; exit 3")
	if r.Code != 3 || !strings.Contains(r.Out, "child-ran") || !strings.Contains(r.Out, `Lock acquired on "locks/job"`) {
		t.Errorf("lock: %d %q %q", r.Code, r.Out, r.ErrOut)
	}
	r = run("", "var", "get", "locks/job")
	if r.Code != 0 || strings.Contains(r.Out, `"Lock"`) {
		t.Errorf("lock still held after the child: %q", r.Out)
	}
	r = run("", "var", "lock", "-ttl", "1s", "locks/job", "true")
	if r.Code == 0 || !strings.Contains(r.ErrOut, "TTL") {
		t.Errorf("bad TTL: %d %q", r.Code, r.ErrOut)
	}

	r = run("", "var", "purge", "-check-index", "1", "app/web")
	if r.Code == 0 || !strings.Contains(r.ErrOut, "conflict") {
		t.Errorf("stale purge: %d %q", r.Code, r.ErrOut)
	}
	r = run("", "var", "purge", "app/web")
	clitest.WantCode(t, r, 0)
	r = run("", "var", "get", "app/web")
	if r.Code == 0 || !strings.Contains(r.ErrOut, "Variable not found") {
		t.Errorf("get after purge: %d %q", r.Code, r.ErrOut)
	}

	r = run("", "operator", "keyring", "rotate", "-full")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "rotate", r.Out, "active")
	r = run("", "operator", "keyring", "list")
	clitest.WantCode(t, r, 0)
	if strings.Count(r.Out, "inactive") != 1 || strings.Count(r.Out, "active") != 2 {
		t.Errorf("keyring list: %q", r.Out)
	}
	r = run("", "var", "get", "-item", "user", "app/db")
	if r.Out != "u\n" {
		t.Errorf("get after a full rotation: %q %q", r.Out, r.ErrOut)
	}
}
