package rawexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// The task supervisor is one process, re-executed from the driver's own
// binary, that is the parent of every task the driver starts: it forks
// each task, pumps its logs, waits for it, cleans up its process group and
// cgroup and records its exit in the exit file. It runs in a session of
// its own, so the driver plugin dying (or being killed with the agent)
// does not reach it or the tasks; it goes on supervising the tasks it has
// and exits after the last one. A new driver process starts a supervisor
// of its own for new tasks and recovers the earlier ones from their
// handles (recover.go).
//
// One supervisor for all tasks, rather than a process per task, is what
// makes a task's start and exit cost a fork and an exec: re-executing the
// drover binary (a Go runtime start and every package's init) costs tens
// of milliseconds of CPU, paid here once per driver process instead of
// once per task.

// supLinkFD is the supervisor's inherited end of its socket pair with the
// driver.
const supLinkFD = 3

// defaultSupervisorIdle is how long a driver keeps a supervisor with no
// task before letting it exit: a node busy with short tasks (dispatched
// batch jobs) keeps one for good, an idle one has no process left over.
const defaultSupervisorIdle = 5 * time.Second

// errSupervisorGone means the supervisor exited or the link to it broke
// before it reported the task's start.
var errSupervisorGone = errors.New("the raw_exec task supervisor exited")

// errSupervisorLetGo means the supervisor was let go, idle, before it was
// sent the task: start another.
var errSupervisorLetGo = errors.New("the raw_exec task supervisor was let go")

// supRequest asks the supervisor to start a task; ID names it in replies.
type supRequest struct {
	ID   uint64    `json:"id"`
	Spec *shimSpec `json:"spec"`
}

// supReply is the supervisor's message about one task: first its start,
// then, for a task that started, its exit, sent once the exit file is
// written (or could not be: ExitFileErr).
type supReply struct {
	ID          uint64       `json:"id"`
	Started     *shimStarted `json:"started,omitempty"`
	Exit        *exitRecord  `json:"exit,omitempty"`
	ExitFileErr string       `json:"exit_file_err,omitempty"`
}

// runSupervisor is the supervisor process's main: it starts each task the
// driver asks for until the link closes, then waits for the tasks it has.
// It returns the process's exit code.
func runSupervisor() int {
	// The tasks must not inherit the link.
	syscall.CloseOnExec(supLinkFD)
	link := os.NewFile(supLinkFD, "supervisor-link")
	unignoreSignals()

	var (
		sendMu sync.Mutex
		forkMu sync.Mutex
		tasks  sync.WaitGroup
	)
	enc := json.NewEncoder(link)
	send := func(r supReply) {
		// A driver gone does not stop the task: its result is in the
		// exit file for the next driver.
		sendMu.Lock()
		defer sendMu.Unlock()
		_ = enc.Encode(r)
	}
	dec := json.NewDecoder(link)
	for {
		var req supRequest
		if err := dec.Decode(&req); err != nil {
			break
		}
		if req.Spec == nil {
			send(supReply{ID: req.ID, Started: &shimStarted{Err: "start request without a spec"}})
			continue
		}
		tasks.Add(1)
		go func() {
			defer tasks.Done()
			rec, err := runTask(req.Spec, &forkMu, func(s shimStarted) { send(supReply{ID: req.ID, Started: &s}) })
			if rec == nil {
				return
			}
			r := supReply{ID: req.ID, Exit: rec}
			if err != nil {
				r.ExitFileErr = err.Error()
			}
			send(r)
		}()
	}
	tasks.Wait()
	return 0
}

// supervisor is the driver's side of a supervisor process.
//
// The link is read only while the supervisor has tasks: every message it
// sends answers a task asked for, so with none left nothing is in flight,
// and no goroutine stays behind for an idle supervisor.
type supervisor struct {
	d          *Driver
	cmd        *exec.Cmd
	conn       net.Conn
	pid        int
	startTicks uint64
	// dead is closed once the supervisor has exited and been reaped;
	// ended once end has cleaned up after it.
	dead    chan struct{}
	ended   chan struct{}
	endOnce sync.Once
	sendMu  sync.Mutex // serializes writes to conn
	enc     *json.Encoder
	mu      sync.Mutex
	nextID  uint64
	calls   map[uint64]*supCall // tasks asked for and not yet exited
	reading bool                // a goroutine reads the link
	closed  bool                // let go, or its link broke: take no new task
	idle    *time.Timer         // lets it go once idle; nil until first idle
}

// supCall is one task's exchange with the supervisor.
type supCall struct {
	started chan *shimStarted // the start report; buffered
	exited  chan *supReply    // the exit; buffered
	// abandoned: the starter stopped waiting (its context ended); a task
	// that starts anyway is killed, and its cgroup removed, here.
	abandoned bool
	spec      *shimSpec
}

// supervisor returns the running supervisor, starting one if there is
// none.
func (d *Driver) supervisor() (*supervisor, error) {
	d.supMu.Lock()
	defer d.supMu.Unlock()
	if s := d.sup; s != nil {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if !closed {
			return s, nil
		}
	}
	s, err := d.startSupervisor()
	if err != nil {
		return nil, err
	}
	d.sup = s
	return s, nil
}

// startSupervisor re-executes the driver's binary as a supervisor, in a
// session of its own, linked by a socket pair.
func (d *Driver) startSupervisor() (*supervisor, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("task supervisor link: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "supervisor-link")
	theirs := os.NewFile(uintptr(fds[1]), "supervisor-link")
	defer theirs.Close()
	conn, err := net.FileConn(ours)
	_ = ours.Close()
	if err != nil {
		return nil, fmt.Errorf("task supervisor link: %w", err)
	}
	cmd := exec.Command(d.shimExe, d.shimArgs...)
	cmd.Env = append([]string{ShimEnvVar + "=1"}, d.shimEnv...)
	// The supervisor must not hold the plugin's stdio: stdout carries
	// go-plugin's handshake and the host waits for it to close.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{theirs} // fd 3 in the supervisor
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("start task supervisor: %w", err)
	}
	s := &supervisor{
		d:          d,
		cmd:        cmd,
		conn:       conn,
		pid:        cmd.Process.Pid,
		startTicks: procStartTicks(cmd.Process.Pid),
		dead:       make(chan struct{}),
		ended:      make(chan struct{}),
		enc:        json.NewEncoder(conn),
		calls:      map[uint64]*supCall{},
	}
	if d.live == nil {
		d.live = map[*supervisor]struct{}{}
	}
	d.live[s] = struct{}{} // under supMu (supervisor)
	d.logger.Debug("task supervisor started", "pid", s.pid)
	return s, nil
}

// start asks the supervisor to start spec and waits for its report. With
// abandoned set, the start's outcome is no longer the caller's business:
// the task, if it starts, is killed and its cgroup removed without it.
// errSupervisorLetGo means the task was not sent: try another supervisor.
func (s *supervisor) start(ctx context.Context, spec *shimSpec) (c *supCall, started *shimStarted, abandoned bool, err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, false, errSupervisorLetGo
	}
	s.nextID++
	id := s.nextID
	c = &supCall{started: make(chan *shimStarted, 1), exited: make(chan *supReply, 1), spec: spec}
	s.calls[id] = c
	if s.idle != nil {
		s.idle.Stop()
	}
	if !s.reading {
		s.reading = true
		go s.read()
	}
	s.mu.Unlock()

	s.sendMu.Lock()
	err = s.enc.Encode(supRequest{ID: id, Spec: spec})
	s.sendMu.Unlock()
	if err != nil {
		// The supervisor is gone (its end of the link is closed), so no
		// whole request reached it: nothing started. Let it go; its
		// reader reaps it.
		s.mu.Lock()
		delete(s.calls, id)
		s.closed = true
		s.mu.Unlock()
		_ = s.conn.Close()
		return nil, nil, false, fmt.Errorf("%w: %v", errSupervisorLetGo, err)
	}
	ctx, cancel := context.WithTimeout(ctx, shimStartTimeout)
	defer cancel()
	report := func(st *shimStarted) (*supCall, *shimStarted, bool, error) {
		if st.Err != "" {
			return nil, nil, false, fmt.Errorf("start command %q: %s", spec.Path, st.Err)
		}
		return c, st, false, nil
	}
	select {
	case st := <-c.started:
		return report(st)
	case <-s.dead:
		// The report may have come before the link's end.
		select {
		case st := <-c.started:
			return report(st)
		default:
		}
		return nil, nil, false, fmt.Errorf("%w (pid %d) before it reported the task's start", errSupervisorGone, s.pid)
	case <-ctx.Done():
		if s.abandon(id, c) {
			return nil, nil, true, fmt.Errorf("wait for the task supervisor to start the task: %w", ctx.Err())
		}
		return report(<-c.started) // reported meanwhile
	}
}

// abandon marks c abandoned unless its start report came first; it
// reports whether it did.
func (s *supervisor) abandon(id uint64, c *supCall) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(c.started) > 0 {
		return false
	}
	if _, ok := s.calls[id]; !ok {
		return false
	}
	c.abandoned = true
	return true
}

// read dispatches the supervisor's replies while it has tasks; at the
// link's end it reaps the supervisor.
func (s *supervisor) read() {
	dec := json.NewDecoder(s.conn)
	for {
		var r supReply
		if err := dec.Decode(&r); err != nil {
			s.end()
			return
		}
		if !s.dispatch(&r) {
			return
		}
	}
}

// end reaps the supervisor once its link is gone, and cleans up after the
// starts it left abandoned.
func (s *supervisor) end() {
	s.endOnce.Do(func() {
		// Only the supervisor's exit ends the link while it has tasks:
		// wait for it, so that nothing it does races what follows.
		_ = s.conn.Close()
		err := s.cmd.Wait()
		s.mu.Lock()
		s.closed = true
		s.reading = false
		close(s.dead)
		if s.idle != nil {
			s.idle.Stop()
		}
		var orphaned []*taskCgroup
		for _, c := range s.calls {
			if c.abandoned && len(c.started) == 0 && c.spec.Cgroup != nil {
				orphaned = append(orphaned, c.spec.Cgroup)
			}
		}
		s.mu.Unlock()
		for _, cg := range orphaned {
			s.d.destroyCgroup("", cg)
		}
		s.d.forgetSupervisor(s)
		s.d.logger.Debug("task supervisor exited", "pid", s.pid, "status", s.cmd.ProcessState.String(), "error", err)
		s.d.supervisorEnded(s)
	})
}

// dispatch hands r to its task's starter or watcher. It reports whether
// the link is still to be read: not once the supervisor has no task left.
func (s *supervisor) dispatch(r *supReply) bool {
	s.mu.Lock()
	if c := s.calls[r.ID]; c != nil {
		switch {
		case r.Started != nil:
			c.started <- r.Started
			if r.Started.Err != "" {
				delete(s.calls, r.ID)
			}
			if c.abandoned {
				if r.Started.Err == "" {
					// Nobody tracks this task: end it; its exit comes
					// back as for any other.
					_ = syscall.Kill(-r.Started.PID, syscall.SIGKILL)
				} else if c.spec.Cgroup != nil {
					go s.d.destroyCgroup("", c.spec.Cgroup)
				}
			}
		case r.Exit != nil:
			c.exited <- r
			delete(s.calls, r.ID)
		}
	}
	if len(s.calls) > 0 {
		s.mu.Unlock()
		return true
	}
	s.reading = false
	s.mu.Unlock()
	s.d.supervisorIdle(s)
	return false
}

// supervisorIdle lets an idle supervisor go, now or after the idle delay
// if it is still idle then.
func (d *Driver) supervisorIdle(s *supervisor) {
	d.supMu.Lock()
	closing := d.closing
	d.supMu.Unlock()
	if d.supIdle <= 0 || closing {
		d.closeIfIdle(s)
		return
	}
	// One timer per supervisor, pushed back at each idle moment: a busy
	// node goes idle between every two tasks.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle == nil {
		s.idle = time.AfterFunc(d.supIdle, func() { d.closeIfIdle(s) })
		return
	}
	s.idle.Reset(d.supIdle)
}

// closeIfIdle lets s go if it supervises no task: its link is closed, on
// which it exits, and it is reaped.
func (d *Driver) closeIfIdle(s *supervisor) {
	d.supMu.Lock()
	s.mu.Lock()
	idle := len(s.calls) == 0 && !s.closed
	if idle {
		s.closed = true
	}
	s.mu.Unlock()
	if d.sup == s && idle {
		d.sup = nil
	}
	d.supMu.Unlock()
	if idle {
		s.end()
	}
}

// Shutdown lets the driver's task supervisors go as soon as they have no
// task, without the idle delay, and waits until each has exited and been
// reaped, or until ctx ends: at once for an idle one, after its last task
// for a busy one (Shutdown kills no task). A driver embedded in a process
// calls it last, so that no idle timer or reaper outlives it.
func (d *Driver) Shutdown(ctx context.Context) error {
	d.supMu.Lock()
	d.closing = true
	live := make([]*supervisor, 0, len(d.live))
	for s := range d.live {
		live = append(live, s)
	}
	d.supMu.Unlock()
	for _, s := range live {
		s.mu.Lock()
		if s.idle != nil {
			s.idle.Stop()
		}
		s.mu.Unlock()
		d.closeIfIdle(s)
	}
	for _, s := range live {
		select {
		case <-s.ended:
		case <-ctx.Done():
			return fmt.Errorf("wait for the raw_exec task supervisor (pid %d) to exit: %w", s.pid, ctx.Err())
		}
	}
	return nil
}

func (d *Driver) forgetSupervisor(s *supervisor) {
	d.supMu.Lock()
	defer d.supMu.Unlock()
	if d.sup == s {
		d.sup = nil
	}
}

// supervisorEnded drops s, reaped, from the live ones.
func (d *Driver) supervisorEnded(s *supervisor) {
	d.supMu.Lock()
	delete(d.live, s)
	d.supMu.Unlock()
	close(s.ended)
}

// launch starts spec through the supervisor, starting one if need be (or
// another, if the one found was let go or found dead before it got the
// task).
func (d *Driver) launch(ctx context.Context, spec *shimSpec) (*supervisor, *supCall, *shimStarted, bool, error) {
	for attempt := 0; ; attempt++ {
		s, err := d.supervisor()
		if err != nil {
			return nil, nil, nil, false, err
		}
		c, st, abandoned, err := s.start(ctx, spec)
		if errors.Is(err, errSupervisorLetGo) && attempt < 3 {
			d.forgetSupervisor(s)
			continue
		}
		return s, c, st, abandoned, err
	}
}

// watchSupervised waits for a task this driver process started through
// its supervisor.
func (d *Driver) watchSupervised(t *task, s *supervisor, c *supCall) {
	var r *supReply
	select {
	case r = <-c.exited:
	case <-s.dead:
		// The exit may have come before the link's end.
		select {
		case r = <-c.exited:
		default:
		}
	}
	if r == nil {
		// The supervisor died. Its exit file, if it wrote one, or the
		// task directly.
		d.logger.Warn("task supervisor exited before the task; watching the task", "task_id", t.id, "supervisor_pid", s.pid)
		d.watchRecovered(t)
		return
	}
	if r.ExitFileErr != "" {
		d.logger.Error("could not record the task's exit", "task_id", t.id, "error", r.ExitFileErr)
	}
	// The record as the supervisor sent it, which is what it wrote to the
	// exit file (for a driver that recovers the task): reading the file
	// back would only cost a lookup and a read per task.
	t.finish(r.Exit)
	d.logger.Info("task exited", "task_id", t.id, "exit_code", r.Exit.ExitCode, "signal", r.Exit.Signal)
}
