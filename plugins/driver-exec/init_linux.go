package execdriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The task's init runs in two stages, both this binary:
//
// Stage one is the process raw_exec's supervisor starts, in the task's
// cgroup, as root. It starts stage two in new mount, PID and IPC
// namespaces, forwards the signals it gets (StopTask's, SignalTask's) to
// it, and exits as the task's command did: with its code, or killed by
// its signal, so the supervisor records the command's exit.
//
// Stage two is PID 1 of the task's PID namespace. It makes every mount
// private, builds the task's root (chroot_env, /dev, /proc, /sys, /alloc)
// by mounts that live only in its mount namespace, enters it with
// pivot_root, drops the capabilities the task may not have from the
// bounding set, starts the command as the task's user, forwards signals
// to it, reaps orphans, and reports the command's exit to stage one. When
// it exits the kernel kills whatever else is left in the namespace, and
// the mounts vanish with it.

// forwarded are the signals the stages pass on to the command.
var forwarded = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
	syscall.SIGTERM, syscall.SIGALRM, syscall.SIGCONT, syscall.SIGTSTP, syscall.SIGTTIN,
	syscall.SIGTTOU, syscall.SIGWINCH, syscall.SIGPWR, syscall.SIGXCPU, syscall.SIGXFSZ,
	syscall.SIGVTALRM, syscall.SIGPROF, syscall.SIGSYS, syscall.SIGTRAP, syscall.SIGABRT,
}

// runInit runs the stage the environment names and returns the process's
// exit code (stage one may instead die of the command's signal).
func runInit() int {
	raw := os.Getenv(InitEnvVar)
	var spec initSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "exec driver: bad init spec: %v\n", err)
		return 126
	}
	if os.Getenv(stageEnvVar) == "2" {
		return stageTwo(&spec)
	}
	return stageOne(&spec, raw)
}

func stageOne(spec *initSpec, raw string) int {
	// Pdeathsig fires when the thread that forked stage two ends: keep
	// this goroutine on its thread for the process's life.
	runtime.LockOSThread()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "exec driver: locate own executable: %v\n", err)
		return 126
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "exec driver: %v\n", err)
		return 126
	}
	flags := uintptr(syscall.CLONE_NEWNS)
	if !spec.PIDHost {
		flags |= syscall.CLONE_NEWPID
	}
	if !spec.IPCHost {
		flags |= syscall.CLONE_NEWIPC
	}
	if spec.Hostname != "" {
		flags |= syscall.CLONE_NEWUTS
	}
	cmd := &exec.Cmd{
		Path:       exe,
		Args:       os.Args,
		Env:        []string{InitEnvVar + "=" + raw, stageEnvVar + "=2"},
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		ExtraFiles: []*os.File{w},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: flags,
			Setsid:     true,
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "exec driver: start the task's namespaces: %v\n", err)
		return 126
	}
	_ = w.Close()
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	data, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	_ = cmd.Wait()
	close(done)
	signal.Stop(sigs)
	var res initResult
	if err := json.Unmarshal(data, &res); err != nil {
		fmt.Fprintf(os.Stderr, "exec driver: the task's init ended without a result (%v)\n", cmd.ProcessState)
		return 126
	}
	if res.Err != "" {
		fmt.Fprintf(os.Stderr, "exec driver: %s\n", res.Err)
		return 126
	}
	if res.Signal > 0 {
		dieOf(syscall.Signal(res.Signal))
	}
	return res.Code
}

// dieOf ends the process by sig, so its parent sees the command's death:
// the signal's action is set back to the kernel's default (below the Go
// runtime, which would otherwise take it as its own) and sent to this
// thread. A signal whose default is not to terminate falls through.
func dieOf(sig syscall.Signal) {
	type sigaction struct {
		handler  uintptr
		flags    uint64
		restorer uintptr
		mask     uint64
	}
	act := sigaction{} // SIG_DFL
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	var set uint64 = 1 << (uint(sig) - 1)
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, 1 /* SIG_UNBLOCK */, uintptr(unsafe.Pointer(&set)), 0, 8, 0, 0)
	_ = syscall.Tgkill(syscall.Getpid(), syscall.Gettid(), sig)
	os.Exit(128 + int(sig))
}

// stageTwo runs in the task's namespaces; its result goes to fd 3.
func stageTwo(spec *initSpec) int {
	runtime.LockOSThread() // the bounding set is per thread: fork from this one
	// The result pipe is stage one's alone: the command must neither
	// inherit it (a daemon it leaves would hold stage one's read open)
	// nor be able to write a result of its own into it.
	syscall.CloseOnExec(3)
	report := os.NewFile(3, "result")
	send := func(res initResult) int {
		raw, _ := json.Marshal(res)
		_, _ = report.Write(raw)
		_ = report.Close()
		return 0
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	if spec.Hostname != "" {
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			return send(initResult{Err: fmt.Sprintf("set the hostname %q: %v", spec.Hostname, err)})
		}
	}
	if err := buildRoot(spec); err != nil {
		return send(initResult{Err: err.Error()})
	}
	cmd, err := command(spec)
	if err != nil {
		return send(initResult{Err: err.Error()})
	}
	if err := dropCaps(spec.Caps); err != nil {
		return send(initResult{Err: err.Error()})
	}
	if err := cmd.Start(); err != nil {
		return send(initResult{Err: fmt.Sprintf("start %s: %v", spec.Path, err)})
	}
	pid := cmd.Process.Pid
	go func() {
		for s := range sigs {
			_ = syscall.Kill(pid, s.(syscall.Signal))
		}
	}()
	// As PID 1 this process inherits every orphan of the task: reap
	// them all until the command itself exits.
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return send(initResult{Err: fmt.Sprintf("wait for the command: %v", err)})
		}
		if wpid != pid {
			continue
		}
		if ws.Signaled() {
			return send(initResult{Code: 128 + int(ws.Signal()), Signal: int(ws.Signal())})
		}
		return send(initResult{Code: ws.ExitStatus()})
	}
}

// buildRoot mounts the task's root together beneath spec.Root and enters
// it. Every mount is made in this process's own mount namespace.
func buildRoot(spec *initSpec) error {
	root := spec.Root
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// pivot_root needs the new root to be a mount point.
	if err := unix.Mount(root, root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind the task directory: %w", err)
	}
	for _, b := range spec.Binds {
		if err := bindHost(root, b); err != nil {
			return err
		}
	}
	if err := mountDev(root); err != nil {
		return err
	}
	procFlags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := mountAt(root, "/proc", "proc", "proc", procFlags, ""); err != nil {
		return err
	}
	if err := bindAt(root, "/sys", "/sys", true); err != nil {
		return err
	}
	if spec.AllocShared != "" {
		if err := bindAt(root, spec.AllocShared, "/alloc", false); err != nil {
			return err
		}
	}
	if spec.ResolvConf != "" {
		if err := bindResolvConf(root, spec.ResolvConf); err != nil {
			return err
		}
	}
	if err := bindVolumes(root, spec.Mounts); err != nil {
		return err
	}
	if spec.NoPivotRoot {
		if err := unix.Chroot(root); err != nil {
			return fmt.Errorf("chroot into the task directory: %w", err)
		}
		return unix.Chdir("/")
	}
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root into the task directory: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's root: %w", err)
	}
	return unix.Chdir("/")
}

// bindResolvConf binds the allocation's resolv.conf at the root's
// /etc/resolv.conf (the host's /etc, bound read-only). Where that is a
// symlink (systemd-resolved's stub-resolv.conf), a mount would follow it:
// the file is bound at the link's target instead, made beneath the root
// (the link is the host's; every component of the target is checked).
func bindResolvConf(root, src string) error {
	dst := "/etc/resolv.conf"
	if fi, err := os.Lstat(filepath.Join(root, dst)); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		link, err := os.Readlink(filepath.Join(root, dst))
		if err != nil {
			return fmt.Errorf("resolv.conf: %w", err)
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join("/etc", link)
		}
		dst = filepath.Clean(link)
		if dst == "/" || strings.HasPrefix(dst, "/etc/") && dst != "/etc/resolv.conf" {
			// Under the read-only /etc: no mount point can be made.
			if _, err := os.Lstat(filepath.Join(root, dst)); err != nil {
				return fmt.Errorf("resolv.conf: /etc/resolv.conf links to %s, which the task's root lacks", link)
			}
		}
		p, err := target(root, filepath.Dir(dst))
		if err != nil {
			return fmt.Errorf("resolv.conf: %w", err)
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("resolv.conf: mount point %s: %w", dst, err)
		}
		if fi, err := os.Lstat(filepath.Join(root, dst)); err == nil && !fi.Mode().IsRegular() {
			return fmt.Errorf("resolv.conf: /etc/resolv.conf links to %s, which is not a regular file in the task's root", dst)
		}
	}
	return bindAt(root, src, dst, true)
}

// target is dst beneath root, refusing a path whose components a task
// could have replaced with symlinks (mount would follow them).
func target(root, dst string) (string, error) {
	p := root
	for _, part := range strings.Split(strings.Trim(dst, "/"), "/") {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("mount at %s: %s is a symlink", dst, p)
		}
	}
	return p, nil
}

// bindHost populates one chroot_env entry: a host symlink (/bin -> usr/bin
// on a merged-/usr host) becomes the same symlink, a directory a
// read-only bind mount. A source the host lacks is skipped.
func bindHost(root string, b bind) error {
	fi, err := os.Lstat(b.Src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		link, err := os.Readlink(b.Src)
		if err != nil {
			return err
		}
		// The link's directory is resolved beneath root without following
		// a symlink (the task may have made one in an earlier run); the
		// link itself may be ours from that run.
		dir, err := target(root, filepath.Dir(b.Dst))
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.Base(b.Dst))
		if cur, err := os.Readlink(p); err == nil && cur == link {
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(link, p); err != nil {
			return fmt.Errorf("chroot_env %s: %w", b.Dst, err)
		}
		return nil
	}
	if !fi.IsDir() {
		return fmt.Errorf("chroot_env %s: %s is neither a directory nor a symlink", b.Dst, b.Src)
	}
	return bindAt(root, b.Src, b.Dst, true)
}

// bindAt bind-mounts src at dst beneath root, read-only if ro.
func bindAt(root, src, dst string, ro bool) error {
	p, err := target(root, dst)
	if err != nil {
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		err = os.MkdirAll(p, 0o755)
	} else {
		var f *os.File
		if f, err = os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o644); err == nil {
			err = f.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("mount point %s: %w", dst, err)
	}
	if err := unix.Mount(src, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", src, dst, err)
	}
	if ro {
		if err := unix.Mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID, ""); err != nil {
			return fmt.Errorf("make %s read-only: %w", dst, err)
		}
	}
	return nil
}

// mountAt mounts a filesystem of type fstype at dst beneath root.
func mountAt(root, dst, source, fstype string, flags uintptr, data string) error {
	p, err := target(root, dst)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return fmt.Errorf("mount point %s: %w", dst, err)
	}
	if err := unix.Mount(source, p, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s at %s: %w", fstype, dst, err)
	}
	return nil
}

// mountDev gives the task a /dev of its own: a tmpfs with the harmless
// host devices bound in, a private devpts and /dev/shm.
func mountDev(root string) error {
	if err := mountAt(root, "/dev", "tmpfs", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=64k"); err != nil {
		return err
	}
	for _, dev := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if _, err := os.Stat("/dev/" + dev); err != nil {
			continue
		}
		if err := bindAt(root, "/dev/"+dev, "/dev/"+dev, false); err != nil {
			return err
		}
	}
	if err := mountAt(root, "/dev/shm", "shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=65536k"); err != nil {
		return err
	}
	// A devpts of its own where the kernel allows it; a task without a
	// terminal runs without one.
	if mountAt(root, "/dev/pts", "devpts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620") == nil {
		_ = os.Symlink("pts/ptmx", filepath.Join(root, "dev/ptmx"))
	}
	for name, to := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(to, filepath.Join(root, "dev", name)); err != nil {
			return fmt.Errorf("/dev/%s: %w", name, err)
		}
	}
	return nil
}

// command is the task's command inside its root, as its user.
func command(spec *initSpec) (*exec.Cmd, error) {
	path, err := lookPath(spec.Path, spec.WorkDir, spec.Env)
	if err != nil {
		return nil, err
	}
	return &exec.Cmd{
		Path:   path,
		Args:   append([]string{spec.Path}, spec.Args...),
		Env:    append([]string{}, spec.Env...),
		Dir:    spec.WorkDir,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: spec.UID, Gid: spec.GID, Groups: spec.Groups},
			Setpgid:    true,
		},
	}, nil
}

// lookPath finds the command inside the root: a path with a slash as
// given (relative to workDir), a name in the task env's PATH.
func lookPath(cmd, workDir string, env []string) (string, error) {
	if strings.Contains(cmd, "/") {
		p := cmd
		if !filepath.IsAbs(p) {
			p = filepath.Join(workDir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("command %q: %v", cmd, err)
		}
		return p, nil
	}
	search := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			search = v
		}
	}
	for _, dir := range filepath.SplitList(search) {
		if dir == "" {
			continue
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(workDir, dir)
		}
		if p := filepath.Join(dir, cmd); executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found in the task's PATH %q", cmd, search)
}

// dropCaps removes from this thread's bounding set every capability not
// in keep; a command forked from the thread has no more.
func dropCaps(keep []string) error {
	want := map[string]bool{}
	for _, c := range keep {
		want[c] = true
	}
	for n, name := range capNames {
		if want[name] {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(n), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %s: %w", name, err)
		}
	}
	return nil
}

// bindVolumes binds the task's host volumes into its root, after
// everything else, so none is hidden by a later mount.
func bindVolumes(root string, ms []volumeMount) error {
	for _, m := range ms {
		if err := bindAt(root, m.Src, m.Dst, m.RO); err != nil {
			return fmt.Errorf("host volume: %w", err)
		}
	}
	return nil
}
