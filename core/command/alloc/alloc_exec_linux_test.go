package alloc

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/internal/testwait"
)

// TestAllocExecTerminal: with stdin a terminal, the CLI asks for a tty,
// puts the terminal in raw mode (restored after), sends its size, passes
// keys through, and "~." at a line start closes the session.
func TestAllocExecTerminal(t *testing.T) {
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	if err := pty.Setsize(master, &pty.Winsize{Rows: 30, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}

	f := clitest.NewFakeAgent(t)
	clitest.ServeAlloc(f, clitest.TestAlloc("t"))
	sizes := make(chan string, 4)
	up := websocket.Upgrader{}
	f.Handle("GET /v1/client/allocation/"+clitest.AllocID+"/exec", func(w http.ResponseWriter, r *http.Request) {
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		for {
			var in execIn
			if err := conn.ReadJSON(&in); err != nil {
				return // the CLI closed the session
			}
			if in.TTYSize != nil {
				sizes <- fmt.Sprintf("%dx%d", in.TTYSize.Height, in.TTYSize.Width)
			}
			if in.Stdin != nil && len(in.Stdin.Data) > 0 {
				_ = conn.WriteJSON(execOut{Stdout: &execIO{Data: in.Stdin.Data}})
			}
		}
	})

	var out, errOut lockedBuf
	ui := &cli.UI{Out: &out, Err: &errOut, In: slave,
		Getenv: func(k string) string { return map[string]string{"DROVER_ADDR": f.Srv.URL}[k] },
		Now:    func() time.Time { return clitest.TestNow }}
	done := make(chan int, 1)
	go func() { done <- cli.Dispatch(ui, []string{"alloc", "exec", "8ba8", "/bin/sh"}, Commands(ui)) }()

	select {
	case got := <-sizes:
		if got != "30x100" {
			t.Fatalf("terminal size sent %q; want 30x100", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no terminal size sent")
	}
	if _, err := master.Write([]byte("ls\r")); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "keys to come back as output", func() bool { return strings.Contains(out.String(), "ls\r") })
	if _, err := master.Write([]byte("~.")); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code == 0 || !strings.Contains(errOut.String(), "closed by the escape sequence") {
			t.Fatalf("exit %d, stderr %q", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("~. did not close the session")
	}
	q, _ := url.ParseQuery(f.Request("GET /v1/client/allocation/" + clitest.AllocID + "/exec").Query)
	if q.Get("tty") != "true" {
		t.Fatalf("tty = %q; want true for a terminal", q.Get("tty"))
	}
	after, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil || after.Lflag != before.Lflag || after.Iflag != before.Iflag {
		t.Fatalf("terminal not restored: %+v, %v", after, err)
	}
}

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
