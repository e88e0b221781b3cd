package alloc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// AllocExecCommand is `drover alloc exec`.
type AllocExecCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *AllocExecCommand) Synopsis() string { return "Execute commands in task" }

const allocExecHelp = `
Usage: drover alloc exec [options] <allocation> <command> [<args>...]

  Runs a command inside the environment of a running task of the
  allocation, as Nomad's alloc exec: the task's user, environment and
  directory, its cgroup, and the task's file system where its driver
  isolates it. The command's exit code is this command's.

  When ACLs are enabled, this command requires the alloc-exec capability
  in the allocation's namespace, and alloc-node-exec as well for a task
  whose driver does not isolate its file system (raw_exec).

Exec Options:

  -task <name>
    The task to run the command in; may be left out when the allocation's
    group has a single task.

  -job
    Take <allocation> as a job ID and run the command in one of its
    running allocations.

  -i
    Pass stdin to the command (default true). -i=false sends none.

  -t
    Allocate a pseudo-terminal for the command (default: when stdin is a
    terminal and -i is set).

  -e <char>
    The escape character (default "~"; "none" disables it). With a
    terminal, the escape character then "." at the start of a line closes
    the session; the escape character twice sends it once.`

// execHeartbeatEvery paces the empty frames that tell the agent the
// session's caller is alive.
const execHeartbeatEvery = 10 * time.Second

// Nomad's exec frames.
type (
	execIO struct {
		Data  []byte `json:"data,omitempty"`
		Close bool   `json:"close,omitempty"`
	}
	execSize struct {
		Height int `json:"height,omitempty"`
		Width  int `json:"width,omitempty"`
	}
	execIn struct {
		Stdin   *execIO   `json:"stdin,omitempty"`
		TTYSize *execSize `json:"tty_size,omitempty"`
	}
	execOut struct {
		Stdout *execIO `json:"stdout,omitempty"`
		Stderr *execIO `json:"stderr,omitempty"`
		Exited bool    `json:"exited,omitempty"`
		Result *struct {
			ExitCode int `json:"exit_code"`
		} `json:"result,omitempty"`
	}
)

func (c *AllocExecCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("alloc exec", allocExecHelp)
	var task string
	var isJob, stdinOn bool
	var ttyFlag optBool
	fs.StringVar(&task, "task", "", "")
	fs.BoolVar(&isJob, "job", false, "")
	fs.BoolVar(&stdinOn, "i", true, "")
	fs.Var(&ttyFlag, "t", "")
	escape := "~"
	fs.StringVar(&escape, "e", "~", "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() < 2 {
		return c.UsageError(fs, "This command takes at least two arguments: <allocation> <command> [<args>...]")
	}
	command := fs.Args()[1:]
	if escape != "none" && len(escape) != 1 {
		return c.UsageError(fs, `-e: must be one character or "none", got %q`, escape)
	}
	in, inFile := c.ui.In, stdinFile(c.ui.In)
	tty := stdinOn && inFile != nil && isTerminal(inFile)
	if ttyFlag.set {
		tty = ttyFlag.val
	}

	client := c.Client()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var alloc structs.Allocation
	if isJob {
		a, err := runningAllocOfJob(ctx, client, fs.Arg(0))
		if err != nil {
			return c.ui.Errorf("%s", err)
		}
		alloc = *a
	} else {
		id, err := cli.ResolveAllocID(ctx, client, fs.Arg(0))
		if err != nil {
			return c.ui.Errorf("%s", cli.LookupError("allocation", err))
		}
		if _, err := client.Get(ctx, "/v1/allocation/"+id, nil, &alloc); err != nil {
			return c.ui.Errorf("Error querying allocation: %s", err)
		}
	}
	if alloc.ClientStatus == structs.AllocClientStatusComplete || alloc.ClientStatus == structs.AllocClientStatusFailed ||
		alloc.ClientStatus == structs.AllocClientStatusLost {
		return c.ui.Errorf("Allocation %q is %s: it runs no task to exec into", cli.LimitID(alloc.ID, false), alloc.ClientStatus)
	}
	name, err := pickTask(&alloc, task)
	if err != nil {
		return c.ui.Errorf("%s", err)
	}

	cmdJSON, _ := json.Marshal(command)
	q := url.Values{"task": {name}, "command": {string(cmdJSON)}, "tty": {boolString(tty)}}
	conn, err := client.Websocket(ctx, "/v1/client/allocation/"+alloc.ID+"/exec", q)
	if err != nil {
		return c.ui.Errorf("failed to exec into task: %s", err)
	}
	defer conn.Close()

	if tty && inFile != nil && isTerminal(inFile) {
		restore, err := makeRaw(inFile)
		if err != nil {
			return c.ui.Errorf("failed to set the terminal to raw mode: %s", err)
		}
		defer restore()
	}
	if !stdinOn {
		in = nil
	}
	sctx, closeSession := context.WithCancelCause(ctx)
	defer closeSession(nil)
	if in != nil && tty && escape != "none" {
		in = &escapeReader{r: in, esc: escape[0], atLineStart: true, onClose: func() { closeSession(errEscapeClosed) }}
	}
	code, err := runExecSession(sctx, conn, in, c.ui.Out, c.ui.Err, tty, inFile)
	if errors.Is(context.Cause(sctx), errEscapeClosed) {
		return c.ui.Errorf("\r\nexec session closed by the escape sequence")
	}
	if err != nil {
		return c.ui.Errorf("failed to exec into task: %s", err)
	}
	return code
}

// optBool is a boolean flag that knows whether it was given.
type optBool struct{ set, val bool }

func (o *optBool) IsBoolFlag() bool { return true }
func (o *optBool) String() string   { return boolString(o != nil && o.val) }
func (o *optBool) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	o.set, o.val = true, b
	return nil
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// stdinFile is in as a file, when it is one.
func stdinFile(in io.Reader) *os.File {
	f, _ := in.(*os.File)
	return f
}

// runningAllocOfJob picks a running allocation of the job.
func runningAllocOfJob(ctx context.Context, client *cli.APIClient, jobID string) (*structs.Allocation, error) {
	var stubs []*structs.AllocListStub
	if _, err := client.Get(ctx, "/v1/job/"+cli.EscapeID(jobID)+"/allocations", nil, &stubs); err != nil {
		return nil, errors.New(cli.LookupError("job", err))
	}
	for _, s := range stubs {
		if s.ClientStatus == structs.AllocClientStatusRunning && s.DesiredStatus == structs.AllocDesiredStatusRun {
			var a structs.Allocation
			if _, err := client.Get(ctx, "/v1/allocation/"+s.ID, nil, &a); err != nil {
				return nil, err
			}
			return &a, nil
		}
	}
	return nil, errors.New("job " + jobID + " has no running allocation")
}

// runExecSession pumps stdin, terminal sizes and heartbeats to the agent
// and its output to stdout and stderr, and returns the command's exit
// code.
func runExecSession(ctx context.Context, conn *websocket.Conn, stdin io.Reader, stdout, stderr io.Writer, tty bool, term *os.File) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	send := func(f *execIn) error {
		mu.Lock()
		defer mu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
		return conn.WriteJSON(f)
	}
	// Ending the session closes the socket, which ends the reader.
	context.AfterFunc(ctx, func() { _ = conn.Close() })

	if stdin != nil {
		// A terminal's Read does not end with the session; the process
		// exits soon after.
		go func() {
			buf := make([]byte, 2048)
			for {
				n, err := stdin.Read(buf)
				if n > 0 && send(&execIn{Stdin: &execIO{Data: append([]byte(nil), buf[:n]...)}}) != nil {
					return
				}
				if err != nil {
					_ = send(&execIn{Stdin: &execIO{Close: true}})
					return
				}
			}
		}()
	} else {
		_ = send(&execIn{Stdin: &execIO{Close: true}})
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(execHeartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if send(&execIn{}) != nil {
					return
				}
			}
		}
	}()
	if tty && term != nil && isTerminal(term) {
		sizes := watchTerminalSize(ctx, term)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sz := range sizes {
				if send(&execIn{TTYSize: &execSize{Height: sz[0], Width: sz[1]}}) != nil {
					return
				}
			}
		}()
	}

	for {
		var f execOut
		if err := conn.ReadJSON(&f); err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			var ce *websocket.CloseError
			if errors.As(err, &ce) && ce.Text != "" {
				return 0, errors.New(ce.Text)
			}
			return 0, errors.New("connection closed before the command exited: " + err.Error())
		}
		switch {
		case f.Stdout != nil && len(f.Stdout.Data) > 0:
			if _, err := stdout.Write(f.Stdout.Data); err != nil {
				return 0, err
			}
		case f.Stderr != nil && len(f.Stderr.Data) > 0:
			if _, err := stderr.Write(f.Stderr.Data); err != nil {
				return 0, err
			}
		case f.Exited && f.Result != nil:
			return f.Result.ExitCode, nil
		}
	}
}

var errEscapeClosed = errors.New("closed by the escape sequence")

// escapeReader passes stdin through, watching for the escape character
// at the start of a line: followed by "." it closes the session (onClose)
// and ends the input; doubled it is sent once.
type escapeReader struct {
	r           io.Reader
	esc         byte
	atLineStart bool
	pending     bool // the escape character was read at a line start
	closed      bool
	onClose     func()
	out         []byte // read and filtered, not yet returned
	err         error  // the underlying reader's, returned once out is drained
}

func (e *escapeReader) Read(p []byte) (int, error) {
	for len(e.out) == 0 {
		if e.closed {
			return 0, io.EOF
		}
		if e.err != nil {
			return 0, e.err
		}
		buf := make([]byte, max(len(p), 1))
		n, err := e.r.Read(buf)
		e.err = err
		for _, b := range buf[:n] {
			if e.closed {
				break
			}
			switch {
			case e.pending:
				e.pending = false
				switch b {
				case '.':
					e.closed = true
					e.onClose()
				case e.esc:
					e.out = append(e.out, b)
				default:
					e.out = append(e.out, e.esc, b)
				}
				e.atLineStart = false
			case e.atLineStart && b == e.esc:
				e.pending = true
			default:
				e.out = append(e.out, b)
				e.atLineStart = b == '\r' || b == '\n'
			}
		}
	}
	n := copy(p, e.out)
	e.out = e.out[n:]
	return n, nil
}
