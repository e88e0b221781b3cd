package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// proc is one process, known by pid and start time together so that a
// recycled pid is never taken for the process it replaced.
type proc struct {
	PID   int
	PPID  int
	Start uint64 // clock ticks after boot: field 22 of /proc/<pid>/stat
	State byte   // R, S, D, Z, …
	Cmd   string // the command line, arguments joined by spaces
}

func (p proc) String() string { return fmt.Sprintf("%d (%s)", p.PID, p.Cmd) }

// readProc reads /proc/<pid>; ok is false when there is no such process.
func readProc(pid int) (p proc, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return proc{}, false
	}
	// The command name is in parentheses and may itself hold spaces and
	// parentheses; the fields after the last ')' are plain.
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return proc{}, false
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 20 {
		return proc{}, false
	}
	p.PID = pid
	p.State = f[0][0]
	p.PPID, _ = strconv.Atoi(f[1])
	p.Start, _ = strconv.ParseUint(f[19], 10, 64)
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	p.Cmd = strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
	return p, true
}

// listProcs is every process on the machine.
func listProcs() []proc {
	ents, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// alive reports whether p still runs: same pid, same start, not a zombie.
// A zombie has finished; only its exit status waits for its parent.
func (p proc) alive() bool {
	now, ok := readProc(p.PID)
	return ok && now.Start == p.Start && now.State != 'Z' && now.State != 'X'
}

// pidAlive is alive for a bare pid (e.g. one a task wrote to a file).
func pidAlive(pid int) bool {
	p, ok := readProc(pid)
	return ok && p.alive()
}

// descendants lists the processes below root (children, their children, …).
func descendants(root int) []proc {
	all := listProcs()
	children := map[int][]proc{}
	for _, p := range all {
		children[p.PPID] = append(children[p.PPID], p)
	}
	var out []proc
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			out = append(out, c)
			queue = append(queue, c.PID)
		}
	}
	return out
}

// childPlugin finds the agent's `drover plugin <name>` process. The raw_exec
// shims run the same command line, but they are the driver plugin's
// children, never the agent's.
func childPlugin(agentPID int, name string) (proc, bool) {
	for _, p := range listProcs() {
		if p.PPID == agentPID && p.alive() && strings.HasSuffix(p.Cmd, " plugin "+name) {
			return p, true
		}
	}
	return proc{}, false
}

// procsUnder lists the processes that belong to a data dir: tasks (their
// cwd is in <dir>/alloc/…), anything naming the dir on its command line,
// and the raw_exec shims that are the parents of those tasks. A shim runs
// with cwd "/" and the plugin's command line, so it is only found through
// its task.
func procsUnder(dir string) []proc {
	var out []proc
	seen := map[int]bool{}
	add := func(p proc) {
		if !seen[p.PID] {
			seen[p.PID] = true
			out = append(out, p)
		}
	}
	for _, p := range listProcs() {
		if !p.alive() {
			continue
		}
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", p.PID))
		if !within(cwd, dir) && !strings.Contains(p.Cmd, dir) {
			continue
		}
		add(p)
		if parent, ok := readProc(p.PPID); ok && isShim(parent) {
			add(parent)
		}
	}
	return out
}

func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

// isShim reports whether p is a raw_exec task shim of the binary under test.
func isShim(p proc) bool {
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID))
	if exe != droverBin {
		return false
	}
	env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID))
	return bytes.Contains(env, []byte("DROVER_RAWEXEC_SHIM=1"))
}

// killAll SIGKILLs the processes that still run, and the process group of
// each that leads one (a task is its session's leader, and a shell task's
// children are in its group).
func killAll(ps []proc) {
	own := syscall.Getpgrp()
	for _, p := range ps {
		if !p.alive() {
			continue
		}
		if pgid, err := syscall.Getpgid(p.PID); err == nil && pgid == p.PID && pgid != own {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
}

// stillAlive filters ps down to the processes that still run.
func stillAlive(ps []proc) []proc {
	var out []proc
	for _, p := range ps {
		if p.alive() {
			out = append(out, p)
		}
	}
	return out
}
