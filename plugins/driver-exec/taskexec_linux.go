package execdriver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

var _ driver.Execer = (*Driver)(nil)

// ExecTask implements driver.Execer: the command runs inside the task's
// isolation. It is rooted in the task's root (the task's init's root, seen
// through /proc/<init>/root, with every mount of the task's mount
// namespace beneath it), joins the task's PID and IPC namespaces and its
// cgroup, runs as the task's user with the default capability bounding
// set, in /, with the task's environment as the task sees it. It is
// forked from a thread of the driver that joined the namespaces, which
// stays alive (and parked) for the command's life, since the command dies
// with it (Pdeathsig).
//
// On cgroup v1 the fork into the task's cgroup happens from another
// thread (raw_exec's startFromThread), which has not joined the
// namespaces: the command then runs in the task's root, user, cgroup and
// environment, but in the host's PID and IPC namespaces.
func (d *Driver) ExecTask(ctx context.Context, start *driverpb.ExecTaskStart, stdio driver.ExecIO) (*driverpb.ExitResult, error) {
	if err := driver.CheckExecCommand(start.GetCommand()); err != nil {
		return nil, err
	}
	pid, cgStart, err := d.raw.TaskProcess(start.GetId())
	if err != nil {
		return nil, err
	}
	initPID, err := onlyChild(pid)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: find the task's init: %v", driver.ErrTaskNotRunning, start.GetId(), err)
	}
	cfg := start.GetTask()
	taskDir := cfg.GetTaskDir()
	if taskDir == "" || !filepath.IsAbs(taskDir) {
		return nil, fmt.Errorf("%w: exec: the task's config (task_dir) is missing", driver.ErrInvalidConfig)
	}
	name := cfg.GetUser()
	if name == "" {
		name = defaultUser
	}
	uid, gid, groups, err := lookupUser(name)
	if err != nil {
		return nil, err
	}
	caps, err := taskCaps(&TaskConfig{}, d.cfg)
	if err != nil {
		return nil, err
	}
	argv := start.GetCommand()
	spec := &initSpec{Root: filepath.Clean(taskDir), Binds: chrootEnv, Path: argv[0], Env: taskEnv(cfg.GetEnv()), WorkDir: "/"}
	if a := cfg.GetAllocDir(); a != "" {
		spec.AllocShared = filepath.Join(a, "alloc")
	}
	path, err := spec.resolveCommand()
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: path,
		Args: append([]string(nil), argv...),
		Env:  spec.Env,
		Dir:  "/",
		SysProcAttr: &syscall.SysProcAttr{
			Chroot:     "/proc/" + strconv.Itoa(initPID) + "/root",
			Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups},
		},
	}
	// release ends the forking thread once the command is done with it.
	release := make(chan struct{})
	defer close(release)
	startFn := func(c *exec.Cmd) (*exec.Cmd, error) {
		type result struct {
			c   *exec.Cmd
			err error
		}
		ch := make(chan result, 1)
		go func() {
			// Never unlocked: the thread has joined the task's namespaces
			// and ends with this goroutine.
			runtime.LockOSThread()
			if err := joinNamespaces(initPID); err != nil {
				ch <- result{c, err}
				return
			}
			if err := dropCaps(caps); err != nil {
				ch <- result{c, err}
				return
			}
			started, err := c, error(nil)
			if cgStart != nil {
				started, err = cgStart(c)
			} else {
				err = c.Start()
			}
			ch <- result{started, err}
			if err == nil {
				<-release
			}
		}()
		r := <-ch
		return r.c, r.err
	}
	d.logger.Info("exec started", "task_id", start.GetId(), "command", argv[0], "tty", start.GetTty(), "init_pid", initPID)
	res, err := driver.RunExecCmd(ctx, cmd, start.GetTty(), start.GetTtySize(), stdio, startFn)
	if err != nil {
		d.logger.Info("exec ended", "task_id", start.GetId(), "command", argv[0], "error", err)
		return nil, err
	}
	d.logger.Info("exec ended", "task_id", start.GetId(), "command", argv[0], "exit_code", res.GetExitCode())
	return res, nil
}

// joinNamespaces moves the calling thread into the PID (for its children)
// and IPC namespaces of pid.
func joinNamespaces(pid int) error {
	for _, ns := range []struct {
		name string
		flag int
	}{{"pid", unix.CLONE_NEWPID}, {"ipc", unix.CLONE_NEWIPC}} {
		f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/" + ns.name)
		if err != nil {
			return fmt.Errorf("open the task's %s namespace: %w", ns.name, err)
		}
		err = unix.Setns(int(f.Fd()), ns.flag)
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("join the task's %s namespace: %w", ns.name, err)
		}
	}
	return nil
}

// onlyChild is the one child of pid: the task's init (stage two) of its
// stage one. A child is listed under the thread that forked it.
func onlyChild(pid int) (int, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	threads, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var kids []string
	for _, th := range threads {
		b, err := os.ReadFile(filepath.Join(dir, th.Name(), "children"))
		if err != nil {
			continue // the thread ended
		}
		kids = append(kids, strings.Fields(string(b))...)
	}
	if len(kids) != 1 {
		return 0, fmt.Errorf("process %d has %d children, want 1", pid, len(kids))
	}
	return strconv.Atoi(kids[0])
}

// resolveCommand finds s.Path as checkCommand does and returns it as a
// path inside the task's root.
func (s *initSpec) resolveCommand() (string, error) {
	if strings.Contains(s.Path, "/") {
		p := s.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(s.WorkDir, p)
		}
		if err := executable(s.hostPath(p)); err != nil {
			return "", fmt.Errorf("%w: command %q: %v", driver.ErrInvalidConfig, s.Path, err)
		}
		return p, nil
	}
	search := defaultPath
	for _, kv := range s.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			search = v
		}
	}
	for _, dir := range filepath.SplitList(search) {
		if dir == "" {
			continue
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(s.WorkDir, dir)
		}
		p := filepath.Join(dir, s.Path)
		if executable(s.hostPath(p)) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: command %q not found in the task's PATH %q", driver.ErrInvalidConfig, s.Path, search)
}
