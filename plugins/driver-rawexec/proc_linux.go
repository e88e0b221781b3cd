package rawexec

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
)

// readProcStat returns a process's state letter and start time (in clock
// ticks since boot) from /proc/<pid>/stat.
func readProcStat(pid int) (state byte, startTicks uint64, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name (field 2) is parenthesised and may itself contain
	// spaces and parentheses; the fields after the last ')' are plain.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state); field 22 (starttime) is fields[19].
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	ticks, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], ticks, true
}

// procStartTicks returns the process's start time, 0 if unknown.
func procStartTicks(pid int) uint64 {
	_, ticks, _ := readProcStat(pid)
	return ticks
}

// procAlive reports whether pid runs and is the process that started at
// startTicks (0: unknown, not checked). A zombie counts as dead: it has
// exited and only waits to be reaped.
func procAlive(pid int, startTicks uint64) bool {
	state, ticks, ok := readProcStat(pid)
	if !ok || state == 'Z' || state == 'X' {
		return false
	}
	return startTicks == 0 || ticks == startTicks
}

// pidReused reports whether pid now belongs to a process other than the one
// that started at startTicks.
func pidReused(pid int, startTicks uint64) bool {
	_, ticks, ok := readProcStat(pid)
	return ok && startTicks != 0 && ticks != startTicks
}

// bootID identifies the current boot; pids from another boot mean nothing.
// It is read once: a process never outlives its boot.
var bootID = sync.OnceValue(func() string {
	data, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
})
