package harness

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is one agent (or other long-running drover command) started by
// a test, with its output in a log file.
type Process struct {
	Cmd     *exec.Cmd
	LogPath string
	exited  chan struct{} // closed once the process has been waited for
}

// Start runs bin with args, its stdout and stderr in a new file at logPath.
func Start(bin string, args []string, logPath string) (*Process, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// If the test binary dies (a panic, a timeout), the agent dies too
	// instead of holding its ports.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &Process{Cmd: cmd, LogPath: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// PID is the process's pid.
func (p *Process) PID() int { return p.Cmd.Process.Pid }

// Exited is closed once the process has ended and been waited for.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Running reports whether the process has not ended yet.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Log is what the process has written so far.
func (p *Process) Log() string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(cannot read log %s: %v)", p.LogPath, err)
	}
	return string(b)
}

// Stop sends sig and waits up to timeout for the process to end; when it
// does not, it is killed. graceful is true when the process ended by
// itself with exit status 0 after sig; an error says why it was not.
func (p *Process) Stop(sig os.Signal, timeout time.Duration) (graceful bool, err error) {
	if !p.Running() {
		return false, fmt.Errorf("process %d had already exited (%v)", p.PID(), p.Cmd.ProcessState)
	}
	_ = p.Cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		if !p.Cmd.ProcessState.Success() {
			return false, fmt.Errorf("process %d exited with %v after %v", p.PID(), p.Cmd.ProcessState, sig)
		}
		return true, nil
	case <-time.After(timeout):
		p.Kill()
		return false, fmt.Errorf("process %d still running %s after %v; killed it", p.PID(), timeout, sig)
	}
}

// Kill SIGKILLs the process and waits until it has been reaped.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Kill()
	<-p.exited
}
