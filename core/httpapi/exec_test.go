package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	nomad "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/client/clientapi"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testwait"
)

// The fake client's exec: task "t" runs under a driver that isolates its
// file system, task "raw" under one that does not. Commands:
// echo-stdin copies stdin to stdout, writes "bye" to stderr and exits 3;
// tty-size prints the first resize; fail is refused as a task that does
// not run; hang waits for the session's end and reports it on
// fakeExecEnded.
var fakeExecEnded = make(chan error, 4)

func (c *fakeClientAPI) AllocExecTarget(_ context.Context, allocID, task string) (*clientapi.ExecTarget, error) {
	if err := c.known(allocID); err != nil {
		return nil, err
	}
	switch task {
	case "t":
		return &clientapi.ExecTarget{Namespace: "default", Driver: "exec"}, nil
	case "raw":
		return &clientapi.ExecTarget{Namespace: "default", Driver: "raw_exec", NoFSIsolation: true}, nil
	}
	return nil, structs.NewError(structs.ErrNotFound, "Unknown task %q in allocation %q", task, allocID)
}

func (c *fakeClientAPI) AllocExec(ctx context.Context, req *clientapi.ExecRequest) (int, error) {
	c.record("exec " + req.Task + " " + strings.Join(req.Command, " "))
	switch req.Command[0] {
	case "echo-stdin":
		if _, err := io.Copy(req.Stdout, req.Stdin); err != nil {
			return 0, err
		}
		_, _ = req.Stderr.Write([]byte("bye"))
		return 3, nil
	case "tty-size":
		select {
		case sz := <-req.Resize:
			fmt.Fprintf(req.Stdout, "%dx%d tty=%v", sz.Height, sz.Width, req.TTY)
			return 0, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	case "fail":
		return 0, structs.NewError(structs.ErrInvalid, "Task %q not running", req.Task)
	case "hang":
		<-ctx.Done()
		fakeExecEnded <- ctx.Err()
		return 0, ctx.Err()
	}
	return 0, structs.NewError(structs.ErrInvalid, "unknown fake command %q", req.Command[0])
}

func execPath(alloc, task string, tty bool, command ...string) string {
	q := url.Values{}
	q.Set("task", task)
	cmd := `["` + strings.Join(command, `","`) + `"]`
	q.Set("command", cmd)
	q.Set("tty", fmt.Sprint(tty))
	return "/v1/client/allocation/" + alloc + "/exec?" + q.Encode()
}

// dialExec opens an exec websocket on base (an http:// URL).
func dialExec(t *testing.T, base, path string, header http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 20 * time.Second}
	conn, resp, err := d.Dial("ws"+strings.TrimPrefix(base, "http")+path, header)
	if conn != nil {
		t.Cleanup(func() { _ = conn.Close() })
	}
	if resp != nil && resp.Body != nil {
		t.Cleanup(func() { _ = resp.Body.Close() })
	}
	return conn, resp, err
}

// TestExecThroughNomadClient: Nomad's official client runs a command
// through the agent, with stdin, stdout, stderr, the exit code and a
// terminal size.
func TestExecThroughNomadClient(t *testing.T) {
	w := newClientAPIWorld(t)
	// Exec needs the client's own *http.Transport (for its websocket).
	nc, err := nomad.NewClient(&nomad.Config{Address: w.serverURL,
		HttpClient: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	alloc := &nomad.Allocation{ID: "aaaa2222", NodeID: "node-a", Namespace: "default"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var stdout, stderr bytes.Buffer
	code, err := nc.Allocations().Exec(ctx, alloc, "t", false, []string{"echo-stdin"},
		strings.NewReader("hello through the socket"), &stdout, &stderr, nil, nil)
	if err != nil || code != 3 || stdout.String() != "hello through the socket" || stderr.String() != "bye" {
		t.Fatalf("Exec = %d, %v; stdout %q stderr %q", code, err, stdout.String(), stderr.String())
	}

	sizes := make(chan nomad.TerminalSize, 1)
	sizes <- nomad.TerminalSize{Height: 24, Width: 80}
	stdout.Reset()
	code, err = nc.Allocations().Exec(ctx, alloc, "t", true, []string{"tty-size"},
		strings.NewReader(""), &stdout, &stderr, sizes, nil)
	if err != nil || code != 0 || stdout.String() != "24x80 tty=true" {
		t.Fatalf("Exec(tty) = %d, %v; stdout %q", code, err, stdout.String())
	}

	// An error after the upgrade reaches the caller as the close reason.
	_, err = nc.Allocations().Exec(ctx, alloc, "t", false, []string{"fail"}, strings.NewReader(""), &stdout, &stderr, nil, nil)
	if err == nil || !strings.Contains(err.Error(), `Task "t" not running`) {
		t.Fatalf("Exec(fail) = %v; want the task's refusal", err)
	}
}

// TestExecForwardedByServer: a session opened on a server agent is
// proxied, upgrade and all, to the node that runs the allocation.
func TestExecForwardedByServer(t *testing.T) {
	w := newClientAPIWorld(t)
	conn, resp, err := dialExec(t, w.serverURL, execPath("aaaa2222", "t", false, "echo-stdin"), nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	for _, f := range []string{`{"stdin":{"data":"Zm9yd2FyZGVk"}}`, `{}`, `{"stdin":{"close":true}}`} {
		if err := conn.WriteMessage(websocket.TextMessage, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut string
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		var f execOutput
		if err := conn.ReadJSON(&f); err != nil {
			t.Fatalf("read: %v (stdout so far %q)", err, out)
		}
		if f.Stdout != nil {
			out += string(f.Stdout.Data)
		}
		if f.Stderr != nil {
			errOut += string(f.Stderr.Data)
		}
		if f.Exited {
			if f.Result == nil || f.Result.ExitCode != 3 || out != "forwarded" || errOut != "bye" {
				t.Fatalf("exit %+v, stdout %q, stderr %q", f.Result, out, errOut)
			}
			break
		}
	}
	if w.client.lastCall() != "exec t echo-stdin" {
		t.Fatalf("node's client saw %q", w.client.lastCall())
	}
}

// TestExecCallerGoneEndsSession: closing the socket ends the command's
// session (the client kills the command when its context ends).
func TestExecCallerGoneEndsSession(t *testing.T) {
	w := newClientAPIWorld(t)
	conn, _, err := dialExec(t, w.nodeURL, execPath("aaaa2222", "t", false, "hang"), nil)
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "the session to reach the client", func() bool {
		return w.client.lastCall() == "exec t hang"
	})
	_ = conn.Close()
	select {
	case err := <-fakeExecEnded:
		if err == nil {
			t.Fatal("session ended without its context's error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("closing the socket did not end the session")
	}
}

// TestExecRequestErrors: refused requests get their HTTP status before
// any upgrade, and never reach the client.
func TestExecRequestErrors(t *testing.T) {
	w := newClientAPIWorld(t)
	long := strings.Repeat("x", 70<<10)
	for _, tc := range []struct {
		name, base, path string
		code             int
	}{
		{"no task", w.nodeURL, "/v1/client/allocation/aaaa2222/exec?command=%5B%22sh%22%5D", 400},
		{"no command", w.nodeURL, "/v1/client/allocation/aaaa2222/exec?task=t", 400},
		{"command not JSON", w.nodeURL, "/v1/client/allocation/aaaa2222/exec?task=t&command=sh", 400},
		{"empty command", w.nodeURL, "/v1/client/allocation/aaaa2222/exec?task=t&command=%5B%5D", 400},
		{"command too long", w.nodeURL, execPath("aaaa2222", "t", false, "echo", long), 400},
		{"bad tty", w.nodeURL, "/v1/client/allocation/aaaa2222/exec?task=t&command=%5B%22sh%22%5D&tty=maybe", 400},
		{"long task", w.nodeURL, execPath("aaaa2222", strings.Repeat("t", maxIDBytes+1), false, "sh"), 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(w.client.calls)
			conn, resp, err := dialExec(t, tc.base, tc.path, nil)
			if err == nil || conn != nil || resp == nil || resp.StatusCode != tc.code {
				status := 0
				if resp != nil {
					status = resp.StatusCode
				}
				t.Fatalf("dial = %v, status %d; want %d", err, status, tc.code)
			}
			w.client.mu.Lock()
			after := len(w.client.calls)
			w.client.mu.Unlock()
			if after != before {
				t.Fatalf("refused request reached the client")
			}
		})
	}
}

// TestExecRefusedAfterUpgrade: past its parameters, a websocket request
// is refused as Nomad's are, by a close frame whose reason is the error
// (what Nomad's api package returns); a plain GET gets the status.
func TestExecRefusedAfterUpgrade(t *testing.T) {
	w := newClientAPIWorld(t)
	for _, tc := range []struct {
		name, base, path, reason string
		status                   int
	}{
		{"unknown task", w.nodeURL, execPath("aaaa2222", "nope", false, "sh"), `Unknown task "nope" in allocation "aaaa2222"`, 404},
		{"unknown alloc on node", w.nodeURL, execPath("nope", "t", false, "sh"), `Unknown allocation "nope"`, 404},
		{"unknown alloc on server", w.serverURL, execPath("nope", "t", false, "sh"), `Unknown allocation "nope"`, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, _, err := dialExec(t, tc.base, tc.path, nil)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			wantClosed(t, conn, tc.reason)
			resp, err := http.Get(tc.base + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("plain GET: %d; want %d", resp.StatusCode, tc.status)
			}
		})
	}

	// Nomad's api test (TestAllocations_ExecErrors): an allocation the
	// cluster does not know fails with exactly Nomad's message.
	nc, err := nomad.NewClient(&nomad.Config{Address: w.serverURL,
		HttpClient: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	alloc := &nomad.Allocation{ID: "4b4e1e4c-0000-4000-8000-000000000000", NodeID: "4b4e1e4c-0000-4000-8000-000000000001", Namespace: "default"}
	code, err := nc.Allocations().Exec(context.Background(), alloc, "bar", false, []string{"command"}, strings.NewReader(""), io.Discard, io.Discard, nil, nil)
	if code != -2 || err == nil || err.Error() != `Unknown allocation "4b4e1e4c-0000-4000-8000-000000000000"` {
		t.Fatalf("Exec(unknown alloc) = %d, %v", code, err)
	}
}

// wantClosed reads until the socket closes and checks the reason.
func wantClosed(t *testing.T, conn *websocket.Conn, reason string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		_, _, err := conn.ReadMessage()
		if err == nil {
			continue
		}
		ce, ok := err.(*websocket.CloseError)
		if !ok || ce.Text != reason {
			t.Fatalf("socket ended with %v; want the close reason %q", err, reason)
		}
		return
	}
}

// execACLResolver resolves the secrets of TestExecACL.
type execACLResolver map[string]*acl.ACL

func (r execACLResolver) ACLEnabled() bool { return true }

func (r execACLResolver) ResolveToken(secret string) (*structs.ACLToken, *acl.ACL, error) {
	a, ok := r[secret]
	if !ok {
		return nil, nil, structs.NewError(structs.ErrPermissionDenied, "ACL token not found")
	}
	return &structs.ACLToken{AccessorID: "acc-" + secret, SecretID: secret}, a, nil
}

// TestExecACL: alloc-exec opens a session into an isolated task; a task
// whose driver does not isolate its file system (raw_exec) needs
// alloc-node-exec as well; read does not exec.
func TestExecACL(t *testing.T) {
	compile := func(rules string) *acl.ACL {
		p, err := acl.ParsePolicy("p", rules)
		if err != nil {
			t.Fatal(err)
		}
		return acl.Compile([]*acl.Policy{p})
	}
	res := execACLResolver{
		"exec":      compile("namespace \"default\" {\n capabilities = [\"alloc-exec\"]\n}"),
		"node-exec": compile("namespace \"default\" {\n capabilities = [\"alloc-exec\", \"alloc-node-exec\"]\n}"),
		"read":      compile("namespace \"default\" {\n policy = \"read\"\n}"),
		"other-ns":  compile("namespace \"team\" {\n policy = \"write\"\n capabilities = [\"alloc-node-exec\"]\n}"),
	}
	fc := &fakeClientAPI{fakeClient: fakeClient{allocID: "aaaa2222"}, dir: t.TempDir(), nodeID: "node-a"}
	api, _ := newTestAPI(t, Config{Client: fc, Resolver: res})
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)

	for _, tc := range []struct {
		secret, task string
		allowed      bool
	}{
		{"exec", "t", true},
		{"exec", "raw", false},
		{"node-exec", "raw", true},
		{"node-exec", "t", true},
		{"read", "t", false},
		{"other-ns", "t", false},
		{"other-ns", "raw", false},
	} {
		t.Run(tc.secret+"/"+tc.task, func(t *testing.T) {
			h := http.Header{"X-Nomad-Token": {tc.secret}}
			path := execPath("aaaa2222", tc.task, false, "echo-stdin")
			conn, _, err := dialExec(t, ts.URL, path, h)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			if !tc.allowed {
				wantClosed(t, conn, "Permission denied")
				req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
				req.Header = h
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden {
					t.Fatalf("plain GET: %d; want 403", resp.StatusCode)
				}
				return
			}
			_ = conn.WriteMessage(websocket.TextMessage, []byte(`{"stdin":{"close":true}}`))
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			for {
				var f execOutput
				if err := conn.ReadJSON(&f); err != nil {
					t.Fatalf("read: %v", err)
				}
				if f.Exited {
					return
				}
			}
		})
	}
}

// execMatrixCases are the ACL matrix's cases of exec: alloc-exec in the
// allocation's namespace lets a caller through to the (here unknown)
// node; read-only holds no alloc-exec.
func execMatrixCases(w *aclWorld, nobody string) []matrixCase {
	p := "GET /v1/client/allocation/{alloc}/exec"
	return []matrixCase{
		{p, "GET", execPath(w.allocs["team"], "t", false, "sh"), nil, "--x-x"},
		{p, "GET", execPath(w.allocs["default"], "t", false, "sh"), nil, "----x"},
		{p, "GET", execPath(nobody, "t", false, "sh"), nil, "----4"},
	}
}

// TestExecBadFrames: a frame over the bound, or one that is not JSON,
// ends the session (the command is killed) and closes the socket.
func TestExecBadFrames(t *testing.T) {
	w := newClientAPIWorld(t)
	for _, tc := range []struct {
		name  string
		frame []byte
		code  int
	}{
		{"oversized", bytes.Repeat([]byte("x"), maxExecFrameBytes+1), websocket.CloseMessageTooBig},
		{"not JSON", []byte(`{"stdin":`), websocket.CloseUnsupportedData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, _, err := dialExec(t, w.nodeURL, execPath("aaaa2222", "t", false, "hang"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := conn.WriteMessage(websocket.TextMessage, tc.frame); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-fakeExecEnded:
				if err == nil {
					t.Fatal("session ended without its context's error")
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the bad frame did not end the session")
			}
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			for {
				_, _, err := conn.ReadMessage()
				if err == nil {
					continue
				}
				if !websocket.IsCloseError(err, tc.code) {
					t.Fatalf("socket ended with %v; want close code %d", err, tc.code)
				}
				break
			}
		})
	}
}

// TestExecSessionLimit: past maxExecSessions running sessions, one more
// is refused, and served again once a slot frees.
func TestExecSessionLimit(t *testing.T) {
	w := newClientAPIWorld(t)
	for range maxExecSessions {
		execSlots <- struct{}{}
	}
	conn, _, err := dialExec(t, w.nodeURL, execPath("aaaa2222", "t", false, "fail"), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantClosed(t, conn, fmt.Sprintf("this agent runs %d exec sessions, its limit: try again later", maxExecSessions))
	for range maxExecSessions {
		<-execSlots
	}
	conn, _, err = dialExec(t, w.nodeURL, execPath("aaaa2222", "t", false, "fail"), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantClosed(t, conn, `Task "t" not running`)
}
