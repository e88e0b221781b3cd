package rawexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
	"github.com/drover-org/drover/sdk/safefs"
)

// ShimEnvVar, when set in a process's environment, makes Serve run the task
// supervisor instead of the plugin. The driver sets it when it re-executes
// its own binary; nothing else should.
const ShimEnvVar = "DROVER_RAWEXEC_SHIM"

// shimSpec is everything the supervisor needs to run one task.
type shimSpec struct {
	Path       string          `json:"path"` // resolved executable
	Argv       []string        `json:"argv"` // argv[0] is the command as configured
	Env        []string        `json:"env"`
	Dir        string          `json:"dir"`
	Stdout     string          `json:"stdout,omitempty"`
	Stderr     string          `json:"stderr,omitempty"`
	ExitFile   string          `json:"exit_file"`
	Credential *shimCredential `json:"credential,omitempty"`
	// Cgroup is the task's cgroup, created by the driver; nil runs the
	// task without one (no_cgroups).
	Cgroup *taskCgroup `json:"cgroup,omitempty"`
	// With LogMaxFiles set, Stdout and Stderr are base paths of rotated
	// logs (see rotator), which the supervisor writes from pipes.
	LogMaxFiles    int   `json:"log_max_files,omitempty"`
	LogMaxFileSize int64 `json:"log_max_file_size,omitempty"`
	// NetNS is the allocation's network namespace the task is born in
	// (netns_linux.go); empty: the node's.
	NetNS string `json:"netns,omitempty"`
}

type shimCredential struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
}

// shimStarted is the supervisor's report of a task's start: the task's
// pid, or why the command could not start.
type shimStarted struct {
	PID        int    `json:"pid,omitempty"`
	StartTicks uint64 `json:"start_ticks,omitempty"`
	Err        string `json:"err,omitempty"`
}

// exitRecord is the exit file's content.
type exitRecord struct {
	ExitCode    int32  `json:"exit_code"`
	Signal      int32  `json:"signal"`
	OOMKilled   bool   `json:"oom_killed,omitempty"`
	Err         string `json:"err,omitempty"`
	CompletedAt int64  `json:"completed_at_unix_nano"`
	// PID is the task's: a record left by another run of the task in the
	// same directory (one whose start was abandoned, killed and recorded
	// late) is not mistaken for this run's. 0 in records of older
	// versions.
	PID int `json:"pid,omitempty"`
}

func (r *exitRecord) result() *driverpb.ExitResult {
	return &driverpb.ExitResult{ExitCode: r.ExitCode, Signal: r.Signal, OomKilled: r.OOMKilled, Err: r.Err}
}

// runTask runs one task inside the supervisor: it starts the command in a
// new session (so the task's process group is its pid and the driver can
// signal the group), reports the pid or why the command could not start,
// waits, kills what the task left behind in its group and its cgroup, and
// writes the exit file. It returns the exit recorded, or nil when the
// command did not start; writeErr says why the exit file could not be
// written.
//
// forkMu serializes joining a task's cgroup: joining moves the whole
// supervisor, and two tasks starting at once must each fork in their own.
func runTask(spec *shimSpec, forkMu *sync.Mutex, report func(shimStarted)) (rec *exitRecord, writeErr error) {
	// Held until the exit is recorded (tasklock.go).
	lock, err := lockTaskDir(spec.Dir)
	if err != nil {
		report(shimStarted{Err: err.Error()})
		return nil, nil
	}
	defer syscall.Close(lock)
	// A result left by an earlier run in the same task directory would be
	// taken for this run's. It goes under the lock, so after that run's
	// supervisor wrote it, and relative to the directory locked.
	if err := syscall.Unlinkat(lock, filepath.Base(spec.ExitFile)); err != nil && !errors.Is(err, syscall.ENOENT) {
		report(shimStarted{Err: fmt.Sprintf("remove stale exit file: %v", err)})
		return nil, nil
	}
	cmd, logs, err := spec.command()
	if err != nil {
		report(shimStarted{Err: err.Error()})
		return nil, nil
	}
	fail := func(err error) (*exitRecord, error) {
		closeOutputs(cmd)
		for _, l := range logs {
			l.close()
		}
		report(shimStarted{Err: err.Error()})
		return nil, nil
	}
	cmd, startErr := startTask(spec, cmd, forkMu)
	if startErr != nil {
		return fail(startErr)
	}
	closeOutputs(cmd) // the task holds its own copies
	pumps := make([]*logPump, 0, len(logs))
	for _, l := range logs {
		pumps = append(pumps, startLogPump(l.r, l.w))
	}
	pid := cmd.Process.Pid
	report(shimStarted{PID: pid, StartTicks: procStartTicks(pid)})

	rec = waitExit(cmd)
	rec.PID = pid
	// The task's group dies with its main process, as it would under a
	// supervisor that owns the group; this also reaps what the task
	// backgrounded. ESRCH just means nothing was left.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	if spec.Cgroup != nil {
		// So does everything else the task started, however it detached
		// (setsid, double fork): whatever is in its cgroup. Then the
		// cgroup goes, after the OOM killer's verdict is read from it.
		if err := spec.Cgroup.killAll(); err != nil && rec.Err == "" {
			rec.Err = err.Error()
		}
		rec.OOMKilled = spec.Cgroup.oomKilled()
		if err := spec.Cgroup.destroy(); err != nil && rec.Err == "" {
			rec.Err = err.Error()
		}
	}
	// The whole output is in the log before the exit is recorded: a task
	// reported dead has a complete log.
	for _, p := range pumps {
		p.finish(logDrainTimeout)
	}
	return rec, writeExitFile(spec.ExitFile, rec)
}

// startInCgroup starts cmd so that the task is born in cg, and returns the
// command that started (a new one when the first way failed). In a v2
// cgroup the kernel forks it there (startInto); in v1 one thread of the
// supervisor joins the cgroup for the fork (startFromThread); in a v2
// cgroup on a kernel without clone3 the whole supervisor joins it for the
// fork and leaves right after, so that it is neither limited nor killed
// with the task.
func startInCgroup(cmd *exec.Cmd, cg *taskCgroup, forkMu *sync.Mutex) (*exec.Cmd, error) {
	if started, ok, err := cg.startInto(cmd); ok {
		return started, err
	}
	if !cg.V2 {
		return cmd, cg.startFromThread(cmd)
	}
	forkMu.Lock()
	defer forkMu.Unlock()
	leave, err := cg.join()
	if err != nil {
		return cmd, err
	}
	startErr := cmd.Start()
	if err := leave(); err != nil && startErr == nil {
		// A supervisor left in the task's cgroup would die with it and
		// lose every task's exit result: do not run the task that way.
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		startErr = fmt.Errorf("leave the task's cgroup: %w", err)
	}
	return cmd, startErr
}

// cloneCmd returns a command like c that has not been started: a Cmd
// whose Start failed cannot be started again.
func cloneCmd(c *exec.Cmd) *exec.Cmd {
	attr := *c.SysProcAttr
	return &exec.Cmd{
		Path: c.Path, Args: c.Args, Env: c.Env, Dir: c.Dir,
		Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr, ExtraFiles: c.ExtraFiles,
		SysProcAttr: &attr,
	}
}

// rotatedLog is a task stream the supervisor writes to a rotated log: the
// task writes to a pipe, whose read end r the supervisor copies into w.
type rotatedLog struct {
	r *os.File
	w *rotator
}

func (l rotatedLog) close() {
	_ = l.r.Close()
	_ = l.w.Close()
}

// command builds the task's exec.Cmd, and the rotated logs to pump once it
// started. Output files are opened here, by the supervisor, so the driver never
// holds a task's files open.
func (s *shimSpec) command() (*exec.Cmd, []rotatedLog, error) {
	cmd := &exec.Cmd{
		Path: s.Path,
		Args: s.Argv,
		// A non-nil empty slice: exec treats nil as "inherit ours".
		Env:         append([]string{}, s.Env...),
		Dir:         s.Dir,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if s.Credential != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{
			Uid:    s.Credential.UID,
			Gid:    s.Credential.GID,
			Groups: s.Credential.Groups,
		}
	}
	// An empty path leaves the stream nil, which exec connects to
	// /dev/null.
	var logs []rotatedLog
	fail := func(err error) (*exec.Cmd, []rotatedLog, error) {
		closeOutputs(cmd)
		for _, l := range logs {
			l.close()
		}
		return nil, nil, err
	}
	if s.Stdout == "" && s.Stderr == "" {
		return cmd, nil, nil
	}
	// The output files are opened beneath the allocation directory, the
	// task dir's parent (the client's layout, <alloc>/<task>): alloc/logs
	// is writable by the tasks, the allocation directory is not.
	root, err := safefs.Open(filepath.Dir(s.Dir))
	if err != nil {
		return fail(fmt.Errorf("open task output: %w", err))
	}
	defer root.Close()
	if s.Stdout != "" {
		f, l, err := s.output(root, s.Stdout)
		if err != nil {
			return fail(err)
		}
		cmd.Stdout = f
		logs = append(logs, l...)
	}
	if s.Stderr != "" {
		f, l, err := s.output(root, s.Stderr)
		if err != nil {
			return fail(err)
		}
		cmd.Stderr = f
		logs = append(logs, l...)
	}
	return cmd, logs, nil
}

// output opens what the task writes a stream to: the file at path, or,
// with rotation, a pipe into the rotated log based at path. Either is
// opened beneath root without following a symlink a task planted.
func (s *shimSpec) output(root *safefs.Dir, path string) (*os.File, []rotatedLog, error) {
	rel, err := driver.RelBeneath(root.Name(), path)
	if err != nil {
		return nil, nil, fmt.Errorf("open task output: %w", err)
	}
	if s.LogMaxFiles == 0 {
		f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("open task output: %w", err)
		}
		return f, nil, nil
	}
	rot, err := openRotator(root, rel, s.LogMaxFiles, s.LogMaxFileSize)
	if err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		_ = rot.Close()
		return nil, nil, fmt.Errorf("task output pipe: %w", err)
	}
	return w, []rotatedLog{{r: r, w: rot}}, nil
}

func closeOutputs(cmd *exec.Cmd) {
	for _, w := range []any{cmd.Stdout, cmd.Stderr} {
		if f, ok := w.(*os.File); ok {
			_ = f.Close()
		}
	}
}

// waitExit waits for the task's main process and converts its status the
// way a shell reports it: a process killed by signal N exits 128+N.
func waitExit(cmd *exec.Cmd) *exitRecord {
	err := cmd.Wait()
	rec := &exitRecord{CompletedAt: time.Now().UnixNano()}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		rec.ExitCode = int32(cmd.ProcessState.ExitCode())
	case ws.Signaled():
		rec.Signal = int32(ws.Signal())
		rec.ExitCode = 128 + rec.Signal
	default:
		rec.ExitCode = int32(ws.ExitStatus())
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		rec.Err = err.Error()
	}
	return rec
}

// maxExitFileSize bounds the exit file read back.
const maxExitFileSize = 64 << 10

// exitFileAt opens the exit file's trusted root, the allocation directory
// (the parent of the task dir the file is in), and returns the file's path
// beneath it: the file is written and read without following a symlink.
func exitFileAt(path string) (*safefs.Dir, string, error) {
	taskDir := filepath.Dir(path)
	root, err := safefs.Open(filepath.Dir(taskDir))
	if err != nil {
		return nil, "", err
	}
	return root, filepath.Join(filepath.Base(taskDir), filepath.Base(path)), nil
}

// writeExitFile writes rec atomically (temp file, rename): a reader sees
// either no file or the whole record, even if the supervisor dies midway.
// A link planted at path is replaced, never written through. It is not
// fsynced (a disk flush per task): the client records the exit durably
// as soon as the driver reports it, milliseconds later, so a crash of the
// machine can only lose an exit the client never heard of, and that task
// is then reported as one the reboot lost (recover.go), as a task still
// running at the crash is.
func writeExitFile(path string, rec *exitRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	root, rel, err := exitFileAt(path)
	if err != nil {
		return err
	}
	defer root.Close()
	return root.WriteFileNoSync(rel, data, 0o644)
}

// readExitFile returns the recorded exit, or nil if there is none yet.
func readExitFile(path string) (*exitRecord, error) {
	root, rel, err := exitFileAt(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer root.Close()
	data, err := root.ReadFile(rel, maxExitFileSize)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec exitRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("exit file %s: %w", path, err)
	}
	return &rec, nil
}

// unignoreSignals makes the task start with SIGHUP and SIGINT at their
// default action. An agent started under nohup (or as a shell's background
// job) has them ignored, and an ignored signal stays ignored across every
// exec down to the task, whose `trap … HUP` or change_mode = "signal"
// would then never fire. The Go runtime keeps exactly these two ignored
// when it finds them so; once it handles them (Notify), exec resets them
// to the default in the child. The supervisor itself still drops them.
func unignoreSignals() {
	var sigs []os.Signal
	for _, s := range []os.Signal{syscall.SIGHUP, syscall.SIGINT} {
		if signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	if len(sigs) > 0 {
		signal.Notify(make(chan os.Signal, 1), sigs...)
	}
}
