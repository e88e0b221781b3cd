package rawexec

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupRoot is where the kernel's cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// v1Controllers are the cgroup v1 hierarchies a task's cgroup spans:
// freezer stops the whole tree before it is killed (nothing forks past the
// kill), memory and cpu carry the task's limits.
var v1Controllers = []string{"freezer", "memory", "cpu"}

// v2Controllers must be available in the unified hierarchy.
var v2Controllers = []string{"memory", "cpu"}

// cgroupHost is the cgroup layout found on this host: v2 where the root is
// a unified hierarchy with the controllers, v1 otherwise.
type cgroupHost struct {
	root string
	v2   bool
}

// detectCgroups finds a writable hierarchy beneath root and creates
// drover's parent cgroup in it. The error wraps errNoCgroups and names the
// controller that is missing or read-only.
func detectCgroups(root string) (*cgroupHost, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return nil, noCgroupsErr("%s: %v", root, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return detectV2(root)
	}
	h := &cgroupHost{root: root}
	for _, c := range v1Controllers {
		dir := filepath.Join(root, c)
		if err := unix.Statfs(dir, &st); err != nil || st.Type != unix.CGROUP_SUPER_MAGIC {
			return nil, noCgroupsErr("cgroup controller %q is not mounted at %s", c, dir)
		}
		if err := os.MkdirAll(filepath.Join(dir, cgroupParent), 0o755); err != nil {
			return nil, noCgroupsErr("cgroup controller %q is not writable: %v", c, err)
		}
	}
	return h, nil
}

func detectV2(root string) (*cgroupHost, error) {
	raw, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		return nil, noCgroupsErr("cgroup v2 at %s: %v", root, err)
	}
	have := strings.Fields(string(raw))
	var enable []string
	for _, c := range v2Controllers {
		if !containsString(have, c) {
			return nil, noCgroupsErr("cgroup controller %q is not available in the cgroup v2 hierarchy at %s", c, root)
		}
		enable = append(enable, "+"+c)
	}
	parent := filepath.Join(root, cgroupV2Parent)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, noCgroupsErr("cgroup v2 hierarchy at %s is not writable: %v", root, err)
	}
	// The controllers must be delegated down to the task cgroups.
	for _, dir := range []string{root, parent} {
		if err := writeCgroupFile(dir, "cgroup.subtree_control", strings.Join(enable, " ")); err != nil {
			return nil, noCgroupsErr("enable cgroup controllers %v in %s: %v", v2Controllers, dir, err)
		}
	}
	return &cgroupHost{root: root, v2: true}, nil
}

// create makes the task's cgroup, empty, with res's limits written. Its
// name is the task's id and a suffix of its own: every start gets a new
// cgroup, so the supervisor of an earlier run of the same task, removing its
// cgroup as it ends, can never remove this one.
func (h *cgroupHost) create(id string, res cgroupResources) (*taskCgroup, error) {
	var run [4]byte
	if _, err := rand.Read(run[:]); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	name := cgroupName(id) + "." + hex.EncodeToString(run[:])
	cg := &taskCgroup{V2: h.v2, Dirs: map[string]string{}}
	if h.v2 {
		cg.Dirs[unifiedKey] = filepath.Join(h.root, cgroupV2Parent, name)
	} else {
		for _, c := range v1Controllers {
			cg.Dirs[c] = filepath.Join(h.root, c, cgroupParent, name)
		}
	}
	for _, dir := range cg.Dirs {
		if err := os.Mkdir(dir, 0o755); err != nil {
			_ = cg.destroy()
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
	}
	if err := cg.setLimits(res); err != nil {
		_ = cg.destroy()
		return nil, err
	}
	return cg, nil
}

func (cg *taskCgroup) setLimits(res cgroupResources) error {
	mem := res.memoryLimitBytes()
	if cg.V2 {
		dir := cg.Dirs[unifiedKey]
		if err := writeCgroupFile(dir, "cpu.weight", strconv.FormatInt(res.cpuWeight(), 10)); err != nil {
			return err
		}
		if mem > 0 {
			if err := writeCgroupFile(dir, "memory.max", strconv.FormatInt(mem, 10)); err != nil {
				return err
			}
			if res.MemoryMaxMB > res.MemoryMB && res.MemoryMB > 0 {
				// What the task asked for is protected; the rest up to
				// memory_max is best effort.
				if err := writeCgroupFile(dir, "memory.low", strconv.FormatInt(res.MemoryMB<<20, 10)); err != nil {
					return err
				}
			}
			// Swapping would let the task outgrow its limit.
			if err := writeCgroupFile(dir, "memory.swap.max", "0"); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		return nil
	}
	if err := writeCgroupFile(cg.Dirs["cpu"], "cpu.shares", strconv.FormatInt(res.cpuShares(), 10)); err != nil {
		return err
	}
	if mem > 0 {
		dir := cg.Dirs["memory"]
		if err := writeCgroupFile(dir, "memory.limit_in_bytes", strconv.FormatInt(mem, 10)); err != nil {
			return err
		}
		if res.MemoryMaxMB > res.MemoryMB && res.MemoryMB > 0 {
			if err := writeCgroupFile(dir, "memory.soft_limit_in_bytes", strconv.FormatInt(res.MemoryMB<<20, 10)); err != nil {
				return err
			}
		}
		// memory+swap at the same limit: no escape into swap. The file
		// exists only where swap accounting is on.
		if err := writeCgroupFile(dir, "memory.memsw.limit_in_bytes", strconv.FormatInt(mem, 10)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// join moves the calling process (all its threads) into the cgroup; its
// children are born there. It returns how to move it back where it was.
func (cg *taskCgroup) join() (leave func() error, err error) {
	orig, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	pid := strconv.Itoa(os.Getpid())
	var back []string // directories to return to, in join order
	leave = func() error {
		var errs []error
		for _, dir := range back {
			if err := writeCgroupFile(dir, "cgroup.procs", pid); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	for key, dir := range cg.Dirs {
		var from string
		if cg.V2 {
			from = filepath.Join(cgroupRoot, orig[""])
		} else {
			from = filepath.Join(cgroupRoot, key, orig[key])
		}
		if err := writeCgroupFile(dir, "cgroup.procs", pid); err != nil {
			_ = leave()
			return nil, fmt.Errorf("join cgroup %s: %w", dir, err)
		}
		back = append(back, from)
	}
	return leave, nil
}

// threadHome is the cgroup path, by v1 controller, of the supervisor's
// threads that are not forking a task: read once, from a thread at home.
var threadHome struct {
	once sync.Once
	dirs map[string]string
	err  error
}

// startFromThread starts cmd in cg, a v1 cgroup, from a thread of its own
// that alone joins the cgroup for the fork. In v1 a cgroup holds threads,
// and a child is born in the cgroups of the thread that forked it, so the
// rest of the supervisor (other tasks' log pumps and starts) never runs
// in a task's cgroup, starts need not take turns, and the move is of one
// thread instead of every thread of the process. Writing "0" moves the
// writing thread, which the kernel does without the lock that a move of
// another thread or process takes (and with which it holds up every fork
// on the host). The thread goes home after the fork; if it cannot, it is
// not unlocked, so that it ends with its goroutine rather than run
// anything else from the task's cgroup, and the task is killed.
func (cg *taskCgroup) startFromThread(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err, stranded := cg.forkFromThread(cmd)
		if !stranded {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// forkFromThread runs on a locked thread: it joins cg, starts cmd and
// goes home; stranded means the thread could not go home.
func (cg *taskCgroup) forkFromThread(cmd *exec.Cmd) (err error, stranded bool) {
	threadHome.once.Do(func() {
		// This thread has joined no cgroup yet: its own are home.
		threadHome.dirs, threadHome.err = readCgroups("/proc/thread-self/cgroup")
	})
	if threadHome.err != nil {
		return fmt.Errorf("find the supervisor's cgroups: %w", threadHome.err), false
	}
	var back []string // the home directories to return to, in join order
	leave := func() error {
		var errs []error
		for _, dir := range back {
			if err := writeCgroupFile(dir, "tasks", "0"); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	for key, dir := range cg.Dirs {
		home, ok := threadHome.dirs[key]
		if !ok {
			_ = leave()
			return fmt.Errorf("join cgroup %s: the supervisor is in no %s cgroup", dir, key), false
		}
		if err := writeCgroupFile(dir, "tasks", "0"); err != nil {
			if lerr := leave(); lerr != nil {
				return fmt.Errorf("join cgroup %s: %w", dir, errors.Join(err, lerr)), true
			}
			return fmt.Errorf("join cgroup %s: %w", dir, err), false
		}
		back = append(back, filepath.Join(cgroupRoot, key, home))
	}
	startErr := cmd.Start()
	if err := leave(); err != nil {
		if startErr == nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
		return fmt.Errorf("leave the task's cgroup: %w", err), true
	}
	return startErr, false
}

// startInto starts cmd directly in cg when it is a v2 cgroup (clone3's
// CLONE_INTO_CGROUP, Linux 5.7), so the supervisor never joins a task's
// cgroup: none of its memory is charged to a task, and tasks start in
// parallel. ok is false where the kernel cannot (v1; an older kernel;
// clone3 filtered by a seccomp profile): the caller then joins the cgroup
// for the fork. The command that ran is returned, as a failed Start leaves
// cmd unusable.
func (cg *taskCgroup) startInto(cmd *exec.Cmd) (started *exec.Cmd, ok bool, err error) {
	if !cg.V2 {
		return nil, false, nil
	}
	dir, err := os.OpenFile(cg.Dirs[unifiedKey], os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, false, nil // joining reports what is wrong with it
	}
	defer dir.Close()
	try := cloneCmd(cmd)
	try.SysProcAttr.UseCgroupFD = true
	try.SysProcAttr.CgroupFD = int(dir.Fd())
	err = try.Start()
	// ENOSYS: no clone3, or a seccomp profile that hides it; E2BIG: a
	// kernel older than CLONE_INTO_CGROUP; EPERM: a seccomp profile that
	// refuses clone3 outright.
	if errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.E2BIG) || errors.Is(err, syscall.EPERM) {
		return nil, false, nil
	}
	return try, true, err
}

// ownCgroups reads /proc/self/cgroup: the calling process's cgroup path by
// v1 controller, and by "" in the unified hierarchy.
func ownCgroups() (map[string]string, error) { return readCgroups("/proc/self/cgroup") }

// readCgroups reads a /proc/.../cgroup file.
func readCgroups(file string) (map[string]string, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}

// pids lists the cgroup's processes; a removed cgroup has none.
func (cg *taskCgroup) pids() ([]int, error) {
	raw, err := os.ReadFile(filepath.Join(cg.procsDir(), "cgroup.procs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(raw)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// killAll kills every process of the task, however it detached itself
// (setsid, double fork): the cgroup is frozen so nothing forks between
// reading the list and the kill, every member is SIGKILLed, the cgroup is
// thawed so the kills land, and killAll returns once the cgroup is empty.
func (cg *taskCgroup) killAll() error {
	deadline := time.Now().Add(cgroupKillTimeout)
	dir := cg.procsDir()
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	// An empty cgroup stays empty: only a member can fork into it, and
	// nothing else moves a process in once the task started. Freezing it
	// would cost most: the freezer flips kernel static keys, patching
	// text on every CPU, twice per task.
	if pids, err := cg.pids(); err == nil && len(pids) == 0 {
		return nil
	}
	if cg.V2 {
		// cgroup.kill (Linux 5.14) does the freeze-kill-thaw itself.
		if err := writeCgroupFile(dir, "cgroup.kill", "1"); err == nil {
			return cg.waitEmpty(deadline)
		}
	}
	cg.freeze(deadline)
	pids, err := cg.pids()
	if err != nil {
		cg.thaw()
		return err
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			cg.thaw()
			return fmt.Errorf("kill pid %d of cgroup %s: %w", pid, dir, err)
		}
	}
	cg.thaw()
	// Whatever forked while the cgroup was not frozen is killed on the
	// next round.
	return cg.waitEmptyKilling(deadline)
}

// freeze stops every process of the cgroup and reports whether it could.
// A freeze that does not settle by the deadline is given up on: the kill
// still goes ahead, only a fork racing it could escape.
func (cg *taskCgroup) freeze(deadline time.Time) bool {
	dir := cg.procsDir()
	var file, value string
	if cg.V2 {
		file, value = "cgroup.freeze", "1"
	} else {
		file, value = "freezer.state", "FROZEN"
	}
	if err := writeCgroupFile(dir, file, value); err != nil {
		return false
	}
	return pollUntil(deadline, func() bool {
		if cg.V2 {
			return cgroupKeyValue(dir, "cgroup.events", "frozen") == "1"
		}
		raw, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
		// THAWED: another party thawed it meanwhile; go ahead unfrozen.
		state := strings.TrimSpace(string(raw))
		return err != nil || state == "FROZEN" || state == "THAWED"
	}) && cg.frozen()
}

func (cg *taskCgroup) frozen() bool {
	if cg.V2 {
		return cgroupKeyValue(cg.procsDir(), "cgroup.events", "frozen") == "1"
	}
	raw, err := os.ReadFile(filepath.Join(cg.procsDir(), "freezer.state"))
	return err == nil && strings.TrimSpace(string(raw)) == "FROZEN"
}

func (cg *taskCgroup) thaw() {
	if cg.V2 {
		_ = writeCgroupFile(cg.procsDir(), "cgroup.freeze", "0")
		return
	}
	_ = writeCgroupFile(cg.procsDir(), "freezer.state", "THAWED")
}

// waitEmptyKilling waits for the cgroup to empty, killing any member it
// still sees (one forked before the freeze settled).
func (cg *taskCgroup) waitEmptyKilling(deadline time.Time) error {
	if pollUntil(deadline, func() bool {
		p, err := cg.pids()
		for _, pid := range p {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return err == nil && len(p) == 0
	}) {
		return nil
	}
	p, _ := cg.pids()
	return fmt.Errorf("cgroup %s still holds pids %v after %v", cg.procsDir(), p, cgroupKillTimeout)
}

func (cg *taskCgroup) waitEmpty(deadline time.Time) error {
	if pollUntil(deadline, func() bool { p, err := cg.pids(); return err == nil && len(p) == 0 }) {
		return nil
	}
	p, _ := cg.pids()
	return fmt.Errorf("cgroup %s still holds pids %v after %v", cg.procsDir(), p, cgroupKillTimeout)
}

// oomKilled reports whether the kernel's OOM killer killed a process of the
// cgroup for exceeding its memory limit.
func (cg *taskCgroup) oomKilled() bool {
	var v string
	if cg.V2 {
		v = cgroupKeyValue(cg.Dirs[unifiedKey], "memory.events", "oom_kill")
	} else {
		v = cgroupKeyValue(cg.Dirs["memory"], "memory.oom_control", "oom_kill")
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return err == nil && n > 0
}

// destroy kills what is left in the cgroup and removes it; a cgroup that
// does not exist is no error.
func (cg *taskCgroup) destroy() error {
	if err := cg.killAll(); err != nil {
		return err
	}
	deadline := time.Now().Add(cgroupKillTimeout)
	var errs []error
	for _, dir := range cg.Dirs {
		var last error
		ok := pollUntil(deadline, func() bool {
			last = syscall.Rmdir(dir)
			// EBUSY: a killed process is still on its way out.
			return last == nil || errors.Is(last, syscall.ENOENT) || !errors.Is(last, syscall.EBUSY)
		})
		if !ok || (last != nil && !errors.Is(last, syscall.ENOENT)) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, last))
		}
	}
	return errors.Join(errs...)
}

// cgroupKeyValue reads the value of key from a flat-keyed cgroup file
// ("key value" lines); "" when absent.
func cgroupKeyValue(dir, file, key string) string {
	raw, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			return f[1]
		}
	}
	return ""
}

func writeCgroupFile(dir, file, value string) error {
	// O_WRONLY without O_CREATE: a missing file is a missing feature.
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, filepath.Join(dir, file), err)
	}
	return nil
}

// pollUntil checks cond every few milliseconds until it holds or the
// deadline passes; the kernel offers no notification for most of what is
// waited on here.
func pollUntil(deadline time.Time, cond func() bool) bool {
	interval := time.Millisecond
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
		if interval < 50*time.Millisecond {
			interval *= 2
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
