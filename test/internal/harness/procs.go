package harness

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Proc is one process, known by pid and start time together so that a
// recycled pid is never taken for the process it replaced.
type Proc struct {
	PID   int
	PPID  int
	Start uint64 // clock ticks after boot: field 22 of /proc/<pid>/stat
	State byte   // R, S, D, Z, …
	Cmd   string // the command line, arguments joined by spaces
}

func (p Proc) String() string { return fmt.Sprintf("%d (%s)", p.PID, p.Cmd) }

// ReadProc reads /proc/<pid>; ok is false when there is no such process.
func ReadProc(pid int) (p Proc, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Proc{}, false
	}
	// The command name is in parentheses and may itself hold spaces and
	// parentheses; the fields after the last ')' are plain.
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return Proc{}, false
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 20 {
		return Proc{}, false
	}
	p.PID = pid
	p.State = f[0][0]
	p.PPID, _ = strconv.Atoi(f[1])
	p.Start, _ = strconv.ParseUint(f[19], 10, 64)
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	p.Cmd = strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
	return p, true
}

// ListProcs is every process on the machine.
func ListProcs() []Proc {
	ents, _ := os.ReadDir("/proc")
	var out []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := ReadProc(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// Alive reports whether p still runs: same pid, same start, not a zombie.
// A zombie has finished; only its exit status waits for its parent.
func (p Proc) Alive() bool {
	now, ok := ReadProc(p.PID)
	return ok && now.Start == p.Start && now.State != 'Z' && now.State != 'X'
}

// PIDAlive is Alive for a bare pid (e.g. one a task wrote to a file).
func PIDAlive(pid int) bool {
	p, ok := ReadProc(pid)
	return ok && p.Alive()
}

// Descendants lists the processes below root (children, their children, …).
func Descendants(root int) []Proc {
	all := ListProcs()
	children := map[int][]Proc{}
	for _, p := range all {
		children[p.PPID] = append(children[p.PPID], p)
	}
	var out []Proc
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

// ChildPlugin finds the agent's `drover __plugin <name>` process. The raw_exec
// shims run the same command line, but they are the driver plugin's
// children, never the agent's.
func ChildPlugin(agentPID int, name string) (Proc, bool) {
	for _, p := range ListProcs() {
		if p.PPID == agentPID && p.Alive() && strings.HasSuffix(p.Cmd, " __plugin "+name) {
			return p, true
		}
	}
	return Proc{}, false
}

// ProcsUnder lists the processes that belong to a data dir: tasks (their
// cwd is in <dir>/alloc/…), anything naming the dir on its command line,
// and the raw_exec shims of bin that are the parents of those tasks. A shim
// runs with cwd "/" and the plugin's command line, so it is only found
// through its task.
func ProcsUnder(dir, bin string) []Proc {
	var out []Proc
	seen := map[int]bool{}
	add := func(p Proc) {
		if !seen[p.PID] {
			seen[p.PID] = true
			out = append(out, p)
		}
	}
	for _, p := range ListProcs() {
		if !p.Alive() {
			continue
		}
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", p.PID))
		if !within(cwd, dir) && !strings.Contains(p.Cmd, dir) {
			continue
		}
		add(p)
		if parent, ok := ReadProc(p.PPID); ok && IsShim(parent, bin) {
			add(parent)
		}
	}
	return out
}

// ProcsOf lists the live processes that run bin: agents, plugins and shims
// started from it. A suite builds its own binary in a temp dir of its own,
// so these are exactly the processes that suite started (or left).
func ProcsOf(bin string) []Proc {
	var out []Proc
	for _, p := range ListProcs() {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID)); exe == bin && p.Alive() {
			out = append(out, p)
		}
	}
	return out
}

func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

// IsShim reports whether p is a raw_exec task shim of bin.
func IsShim(p Proc, bin string) bool {
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID))
	if exe != bin {
		return false
	}
	env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID))
	return bytes.Contains(env, []byte("DROVER_RAWEXEC_SHIM=1"))
}

// KillAll SIGKILLs the processes that still run, and the process group of
// each that leads one (a task is its session's leader, and a shell task's
// children are in its group).
func KillAll(ps []Proc) {
	own := syscall.Getpgrp()
	for _, p := range ps {
		if !p.Alive() {
			continue
		}
		if pgid, err := syscall.Getpgid(p.PID); err == nil && pgid == p.PID && pgid != own {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
}

// StillAlive filters ps down to the processes that still run.
func StillAlive(ps []Proc) []Proc {
	var out []Proc
	for _, p := range ps {
		if p.Alive() {
			out = append(out, p)
		}
	}
	return out
}

// ContainsPID reports whether ps holds a process with that pid.
func ContainsPID(ps []Proc, pid int) bool {
	for _, p := range ps {
		if p.PID == pid {
			return true
		}
	}
	return false
}
