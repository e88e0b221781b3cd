package alloc

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/drover-org/drover/core/command/clitest"
)

// serveExec answers the exec websocket as an agent: stdin comes back as
// stdout, then "done" on stderr and exit code 5; with reason set, the
// socket is closed with it instead.
func serveExec(t *testing.T, f *clitest.FakeAgent, reason string) {
	up := websocket.Upgrader{}
	f.Handle("GET /v1/client/allocation/"+clitest.AllocID+"/exec", func(w http.ResponseWriter, r *http.Request) {
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			t.Errorf("upgrade: %v", err)
			return
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if reason != "" {
			_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, reason), time.Now().Add(10*time.Second))
			return
		}
		for {
			var in execIn
			if err := conn.ReadJSON(&in); err != nil {
				t.Errorf("read: %v", err)
				return
			}
			if in.Stdin == nil {
				continue
			}
			if len(in.Stdin.Data) > 0 {
				_ = conn.WriteJSON(execOut{Stdout: &execIO{Data: in.Stdin.Data}})
			}
			if in.Stdin.Close {
				break
			}
		}
		_ = conn.WriteJSON(execOut{Stderr: &execIO{Data: []byte("done")}})
		_ = conn.WriteJSON(map[string]any{"exited": true, "result": map[string]int{"exit_code": 5}})
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(10*time.Second))
	})
}

func TestAllocExec(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	clitest.ServeAlloc(f, clitest.TestAlloc("t"))
	serveExec(t, f, "")

	r := f.Run(t, "typed input", "alloc", "exec", "8ba8", "/bin/sh", "-c", "cat")
	clitest.WantCode(t, r, 5)
	if r.Out != "typed input" || r.ErrOut != "done" {
		t.Fatalf("stdout %q stderr %q", r.Out, r.ErrOut)
	}
	q, err := url.ParseQuery(f.Request("GET /v1/client/allocation/" + clitest.AllocID + "/exec").Query)
	if err != nil {
		t.Fatal(err)
	}
	var cmd []string
	if err := json.Unmarshal([]byte(q.Get("command")), &cmd); err != nil || len(cmd) != 3 || cmd[2] != "cat" ||
		q.Get("task") != "t" || q.Get("tty") != "false" {
		t.Fatalf("query %v (command %v, %v)", q, cmd, err)
	}

	// -i=false sends no stdin; -t asks for a terminal.
	r = f.Run(t, "not sent", "alloc", "exec", "-i=false", "-t", "-task", "t", "8ba8", "true")
	clitest.WantCode(t, r, 5)
	if r.Out != "" {
		t.Fatalf("stdout %q; want nothing sent", r.Out)
	}
	q, _ = url.ParseQuery(f.Request("GET /v1/client/allocation/" + clitest.AllocID + "/exec").Query)
	if q.Get("tty") != "true" {
		t.Fatalf("tty = %q", q.Get("tty"))
	}
}

func TestAllocExecErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(f *clitest.FakeAgent)
		args   []string
		stderr string
	}{
		{"usage", nil, []string{"8ba8"}, "at least two arguments"},
		{"unknown task", nil, []string{"-task", "nope", "8ba8", "sh"}, "Could not find task named: nope"},
		{"denied", func(f *clitest.FakeAgent) {
			f.Fail("GET /v1/client/allocation/"+clitest.AllocID+"/exec", 403, "Permission denied")
		}, []string{"8ba8", "sh"}, "Permission denied"},
		{"closed with reason", func(f *clitest.FakeAgent) { serveExec(t, f, `Task "t" not running`) }, []string{"8ba8", "sh"}, `Task "t" not running`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := clitest.NewFakeAgent(t)
			clitest.ServeAlloc(f, clitest.TestAlloc("t"))
			if tc.setup != nil {
				tc.setup(f)
			}
			r := f.Run(t, "", append([]string{"alloc", "exec"}, tc.args...)...)
			if r.Code == 0 {
				t.Fatalf("exit 0; want a failure (stderr %q)", r.ErrOut)
			}
			clitest.WantContains(t, "stderr", r.ErrOut, tc.stderr)
		})
	}
}

// TestEscapeReader: the escape character then "." at a line start closes
// the session; doubled it is sent once; elsewhere it passes.
func TestEscapeReader(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		closed   bool
	}{
		{"ls\r~.echo never", "ls\r", true},
		{"~.", "", true},
		{"a~.b\n", "a~.b\n", false},
		{"~~x\n~y", "~x\n~y", false},
		{"plain text", "plain text", false},
	} {
		closed := false
		r := &escapeReader{r: strings.NewReader(tc.in), esc: '~', atLineStart: true, onClose: func() { closed = true }}
		var got []byte
		buf := make([]byte, 1) // one byte at a time: the worst case for a two-byte output
		for {
			n, err := r.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				break
			}
		}
		if string(got) != tc.want || closed != tc.closed {
			t.Errorf("%q: read %q closed=%v; want %q closed=%v", tc.in, got, closed, tc.want, tc.closed)
		}
	}
}
