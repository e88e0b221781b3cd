package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/client/clientapi"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/driver"
)

// GET /v1/client/allocation/<id>/exec?task=&command=<JSON array>&tty=
// upgrades to a websocket that carries Nomad's exec protocol: the caller
// sends JSON frames {"stdin":{"data":<base64>,"close":bool}} and
// {"tty_size":{"height":h,"width":w}} (an empty frame is a heartbeat);
// the agent sends {"stdout":{"data":...}}, {"stderr":{"data":...}} and
// last {"exited":true,"result":{"exit_code":n}}, then closes the socket.
// An error after the upgrade closes the socket with the error's text as
// the close reason, which Nomad's api package returns as the error.

// clientExec is what the local client serves to exec sessions.
type clientExec interface {
	AllocExecTarget(ctx context.Context, allocID, task string) (*clientapi.ExecTarget, error)
	AllocExec(ctx context.Context, req *clientapi.ExecRequest) (int, error)
}

// Bounds of an exec session.
const (
	// maxExecFrameBytes bounds one frame from the caller: Nomad's client
	// sends stdin in 2 KiB reads (under 3 KiB as base64 JSON).
	maxExecFrameBytes = 256 << 10
	// execIdleTimeout ends a session whose caller sent nothing, not even
	// a heartbeat (Nomad's client sends one every 10 s), for this long:
	// the caller is gone.
	execIdleTimeout = 60 * time.Second
	// execWriteTimeout bounds one frame's write to the caller.
	execWriteTimeout = 30 * time.Second
	// execHeartbeat paces the agent's empty frames, which keep proxies
	// from closing a quiet session.
	execHeartbeat = 10 * time.Second
	// maxExecQueryBytes bounds the command parameter before it is parsed.
	maxExecQueryBytes = 2 * driver.MaxExecCommandBytes
	// maxExecSessions bounds the exec sessions an agent process runs at
	// once (each holds a socket, a driver stream and a process).
	maxExecSessions = 256
)

// execSlots holds one token per running session of this process.
var execSlots = make(chan struct{}, maxExecSessions)

// Nomad's frames (api.ExecStreamingInput and ExecStreamingOutput).
type (
	execIOOperation struct {
		Data  []byte `json:"data,omitempty"`
		Close bool   `json:"close,omitempty"`
	}
	execTerminalSize struct {
		Height int `json:"height,omitempty"`
		Width  int `json:"width,omitempty"`
	}
	execInput struct {
		Stdin   *execIOOperation  `json:"stdin,omitempty"`
		TTYSize *execTerminalSize `json:"tty_size,omitempty"`
	}
	execExitResult struct {
		ExitCode int `json:"exit_code"`
	}
	execOutput struct {
		Stdout *execIOOperation `json:"stdout,omitempty"`
		Stderr *execIOOperation `json:"stderr,omitempty"`
		Exited bool             `json:"exited,omitempty"`
		Result *execExitResult  `json:"result,omitempty"`
	}
)

// execParams is a parsed exec request.
type execParams struct {
	task    string
	command []string
	tty     bool
}

func parseExecParams(r *http.Request) (execParams, error) {
	q := r.URL.Query()
	p := execParams{task: q.Get("task")}
	if p.task == "" {
		return p, badRequest("task: must name the task to exec into")
	}
	if len(p.task) > maxIDBytes {
		return p, badRequest("task: at most %d bytes", maxIDBytes)
	}
	raw := q.Get("command")
	if raw == "" {
		return p, badRequest(`command: must be a JSON array of strings, as ["/bin/sh"]`)
	}
	if len(raw) > maxExecQueryBytes {
		return p, badRequest("command: at most %d bytes", maxExecQueryBytes)
	}
	if err := json.Unmarshal([]byte(raw), &p.command); err != nil {
		return p, badRequest(`command: must be a JSON array of strings, as ["/bin/sh"]: %v`, err)
	}
	if err := driver.CheckExecCommand(p.command); err != nil {
		return p, badRequest("%s", strings.TrimPrefix(err.Error(), driver.ErrInvalidConfig.Error()+": "))
	}
	var err error
	if p.tty, err = parseBool(r, "tty"); err != nil {
		return p, err
	}
	return p, nil
}

// allocExec serves GET /v1/client/allocation/<id>/exec: alloc-exec in
// the allocation's namespace, and alloc-node-exec as well when the task's
// driver does not isolate its file system (checked on the node). Bad
// parameters are refused before the upgrade (400), as Nomad does; every
// later refusal of a websocket request (permission, unknown allocation or
// task) comes after it, as the close frame's reason, which is what
// Nomad's api package returns as the error. A request that is no
// websocket upgrade gets those refusals as HTTP statuses.
func (s clientHandlers) allocExec(w http.ResponseWriter, r *http.Request) {
	p, err := parseExecParams(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	fail := func(err error) { s.writeError(w, err) }
	if websocket.IsWebSocketUpgrade(r) {
		fail = func(err error) { s.refuseExec(w, r, err) }
	}
	s.onExecAlloc(w, r, fail, func(allocID string) {
		c, ok := s.client.(clientExec)
		if !ok {
			fail(errNoClientSupport)
			return
		}
		target, err := c.AllocExecTarget(r.Context(), allocID, p.task)
		if err != nil {
			fail(err)
			return
		}
		if !allowNS(r, target.Namespace, acl.NamespaceCapabilityAllocExec) ||
			target.NoFSIsolation && !allowNS(r, target.Namespace, acl.NamespaceCapabilityAllocNodeExec) {
			s.logger.Warn("alloc exec denied", "alloc_id", allocID, "task", p.task, "driver", target.Driver,
				"accessor_id", s.execAccessor(r))
			fail(errPermissionDenied)
			return
		}
		select {
		case execSlots <- struct{}{}:
		default:
			fail(structs.NewError(structs.ErrUnavailable, "this agent runs %d exec sessions, its limit: try again later", maxExecSessions))
			return
		}
		defer func() { <-execSlots }()
		s.serveExec(w, r, c, allocID, p)
	})
}

// refuseExec upgrades the request and closes the socket at once with
// err's text as the reason.
func (s clientHandlers) refuseExec(w http.ResponseWriter, r *http.Request, err error) {
	conn, uerr := execUpgrader.Upgrade(hijacker{w}, r, nil)
	if uerr != nil {
		return // the upgrader answered the caller
	}
	defer conn.Close()
	sess := &execSession{conn: conn, cancel: func() {}}
	sess.close(execCloseCode(err), err.Error())
}

// execCloseCode is the close code of an error: an internal error for
// the 5xx kinds, a policy violation for a refusal.
func execCloseCode(err error) int {
	if structs.HTTPStatus(err) >= 500 {
		return websocket.CloseInternalServerErr
	}
	return websocket.ClosePolicyViolation
}

// onExecAlloc authorizes the request for the path's allocation, then
// serves it with local when this agent's client holds the allocation,
// else forwards it to the allocation's node with the scheme and transport
// of the cluster's HTTP (TLS where it is on); the websocket upgrade passes
// through the proxy. Refusals go to fail.
func (s clientHandlers) onExecAlloc(w http.ResponseWriter, r *http.Request, fail func(error), local func(allocID string)) {
	allocID := r.PathValue("alloc")
	if allocID == "" || len(allocID) > maxIDBytes {
		s.writeError(w, badRequest("allocation ID: must be 1 to %d bytes", maxIDBytes))
		return
	}
	if !s.allowAlloc(r, allocID, acl.NamespaceCapabilityAllocExec) {
		fail(errPermissionDenied)
		return
	}
	if c, ok := s.client.(allocNamespacer); ok {
		if _, held := c.AllocNamespace(allocID); held {
			local(allocID)
			return
		}
	}
	unknown := structs.NewError(structs.ErrNotFound, "Unknown allocation %q", allocID)
	if r.Header.Get(headerForwarded) != "" || s.srv == nil {
		fail(unknown)
		return
	}
	a, err := s.srv.State().AllocByID(nil, allocID)
	if err != nil {
		fail(err)
		return
	}
	if a == nil {
		fail(unknown)
		return
	}
	n, err := s.srv.State().NodeByID(nil, a.NodeID)
	switch {
	case err != nil:
		fail(err)
	case n == nil:
		fail(structs.NewError(structs.ErrNotFound, "Unknown node %q of allocation %q", a.NodeID, allocID))
	case n.HTTPAddr == "":
		fail(structs.NewError(structs.ErrUnavailable, "node %q of allocation %q advertises no HTTP address", a.NodeID, allocID))
	default:
		s.forwardToNode(w, r, a.NodeID)
	}
}

// execAccessor names the caller's token for the session log: its
// accessor, "anonymous" without a token, "" with ACLs off.
func (s clientHandlers) execAccessor(r *http.Request) string {
	if s.resolver == nil || !s.resolver.ACLEnabled() {
		return ""
	}
	tok, _, err := s.resolver.ResolveToken(requestToken(r))
	if err != nil || tok == nil {
		return "anonymous"
	}
	return tok.AccessorID
}

// hijacker reaches the connection beneath the middleware's writers.
type hijacker struct{ http.ResponseWriter }

func (h hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(h.ResponseWriter).Hijack()
}

var execUpgrader = websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 4096}

// serveExec upgrades the request and runs the session.
func (s clientHandlers) serveExec(w http.ResponseWriter, r *http.Request, c clientExec, allocID string, p execParams) {
	conn, err := execUpgrader.Upgrade(hijacker{w}, r, nil)
	if err != nil {
		return // the upgrader answered the caller
	}
	defer conn.Close()
	accessor := s.execAccessor(r)
	started := time.Now()
	s.logger.Info("alloc exec started", "alloc_id", allocID, "task", p.task, "command", p.command,
		"tty", p.tty, "accessor_id", accessor, "remote", r.RemoteAddr)

	// The session ends with the caller's socket and with the agent.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()

	sess := &execSession{conn: conn, cancel: cancel}
	stdinR, stdinW := io.Pipe()
	defer stdinR.Close()
	resize := make(chan clientapi.TerminalSize, 1)

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sess.readInput(ctx, stdinW, resize)
	}()
	go func() {
		defer wg.Done()
		sess.heartbeat(ctx)
	}()

	code, err := c.AllocExec(ctx, &clientapi.ExecRequest{
		AllocID: allocID, Task: p.task, Command: p.command, TTY: p.tty,
		Stdin:  stdinR,
		Stdout: execStream{sess, false},
		Stderr: execStream{sess, true},
		Resize: resize,
	})
	_ = stdinR.CloseWithError(io.ErrClosedPipe)
	args := []any{"alloc_id", allocID, "task", p.task, "command", p.command, "accessor_id", accessor,
		"duration", time.Since(started)}
	switch {
	case err == nil:
		s.logger.Info("alloc exec ended", append(args, "exit_code", code)...)
		_ = sess.send(&execOutput{Stdout: &execIOOperation{Close: true}})
		if !p.tty {
			_ = sess.send(&execOutput{Stderr: &execIOOperation{Close: true}})
		}
		_ = sess.send(&execOutput{Exited: true, Result: &execExitResult{ExitCode: code}})
		sess.close(websocket.CloseNormalClosure, "")
	case ctx.Err() != nil:
		// The caller went away (or the agent stops): the command was
		// killed.
		s.logger.Info("alloc exec ended", append(args, "reason", sess.endReason(s.stopping))...)
		sess.close(websocket.CloseGoingAway, "session ended")
	default:
		s.logger.Info("alloc exec ended", append(args, "error", err)...)
		sess.close(execCloseCode(err), err.Error())
	}
	cancel()
	// The reader ends when the socket closes.
	_ = conn.Close()
	wg.Wait()
}

// execSession is the agent's side of one exec websocket.
type execSession struct {
	conn   *websocket.Conn
	cancel context.CancelFunc

	mu      sync.Mutex // serializes writes
	closed  bool
	readErr error
}

func (e *execSession) send(f *execOutput) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return net.ErrClosed
	}
	_ = e.conn.SetWriteDeadline(time.Now().Add(execWriteTimeout))
	if err := e.conn.WriteJSON(f); err != nil {
		// A caller that does not read is gone: end the session.
		e.cancel()
		return err
	}
	return nil
}

// close sends a close frame, once; reason is cut to what a close frame
// carries (123 bytes).
func (e *execSession) close(code int, reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.closed = true
	if len(reason) > 123 {
		reason = reason[:120] + "..."
	}
	_ = e.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(execWriteTimeout))
}

// endReason says why a session ended before the command did.
func (e *execSession) endReason(stopping context.Context) string {
	if stopping.Err() != nil {
		return "agent shutting down"
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.readErr != nil {
		return "connection closed: " + e.readErr.Error()
	}
	return "connection closed"
}

// readInput reads the caller's frames into the command's stdin and
// resizes until the socket closes, which ends the session.
func (e *execSession) readInput(ctx context.Context, stdin *io.PipeWriter, resize chan clientapi.TerminalSize) {
	defer func() { _ = stdin.Close() }()
	e.conn.SetReadLimit(maxExecFrameBytes)
	stdinOpen := true
	for {
		_ = e.conn.SetReadDeadline(time.Now().Add(execIdleTimeout))
		_, msg, err := e.conn.ReadMessage()
		if err != nil {
			e.mu.Lock()
			e.readErr = err
			e.mu.Unlock()
			e.cancel()
			return
		}
		var in execInput
		if err := json.Unmarshal(msg, &in); err != nil {
			e.close(websocket.CloseUnsupportedData, "invalid frame: "+err.Error())
			e.cancel()
			return
		}
		if in.Stdin != nil && stdinOpen {
			if len(in.Stdin.Data) > 0 {
				if _, err := stdin.Write(in.Stdin.Data); err != nil {
					stdinOpen = false // the command no longer reads
				}
			}
			if in.Stdin.Close {
				stdinOpen = false
				_ = stdin.Close()
			}
		}
		if sz := in.TTYSize; sz != nil && sz.Height > 0 && sz.Width > 0 {
			// Only the latest size matters.
			select {
			case <-resize:
			default:
			}
			select {
			case resize <- clientapi.TerminalSize{Height: sz.Height, Width: sz.Width}:
			case <-ctx.Done():
			}
		}
	}
}

// heartbeat sends an empty frame every execHeartbeat until ctx ends.
func (e *execSession) heartbeat(ctx context.Context) {
	t := time.NewTicker(execHeartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if e.send(&execOutput{}) != nil {
				return
			}
		}
	}
}

// execStream writes the command's output as stdout or stderr frames.
type execStream struct {
	sess   *execSession
	stderr bool
}

func (s execStream) Write(p []byte) (int, error) {
	f := &execOutput{}
	op := &execIOOperation{Data: p}
	if s.stderr {
		f.Stderr = op
	} else {
		f.Stdout = op
	}
	if err := s.sess.send(f); err != nil {
		return 0, err
	}
	return len(p), nil
}
