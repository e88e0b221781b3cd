package client

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/core/client/clientapi"
	"github.com/drover-org/drover/core/structs"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times: 100
// on every Linux architecture drover runs on.
const clockTicks = 100

// apiState is what the client-side API keeps between calls: the previous
// CPU samples (a percentage is a difference between two) and the dynamic
// node metadata.
type apiState struct {
	mu sync.Mutex
	// hostCPU is the previous /proc/stat sample, by CPU name.
	hostCPU map[string]cpuTimes
	// taskCPU is the previous sample of each task's process tree, by
	// driver task id.
	taskCPU map[string]taskCPUSample
	// dynMeta is the node metadata set through the API (nil value: a
	// static key removed); metaLoaded says it was read from disk.
	dynMeta map[string]*string
}

type cpuTimes struct{ user, system, idle, total float64 }

type taskCPUSample struct {
	pid         int
	user, sys   float64 // clock ticks
	at          time.Time
	startedTick float64
}

// procPath is a path under the client's /proc.
func (c *Client) procPath(parts ...string) string {
	return filepath.Join(append([]string{c.cfg.ProcRoot}, parts...)...)
}

// mhzPerCore is the node's CPU shares per core, the unit of ticks.
func (c *Client) mhzPerCore() float64 {
	n := c.Node()
	if n == nil || n.NodeResources == nil || n.NodeResources.Cpu.TotalCpuCores == 0 {
		return 0
	}
	return float64(n.NodeResources.Cpu.CpuShares) / float64(n.NodeResources.Cpu.TotalCpuCores)
}

// HostStats samples the host's memory, CPU, disks and uptime
// (/v1/client/stats). CPU percentages cover the time since the previous
// call (since boot on the first).
func (c *Client) HostStats() (*clientapi.HostStats, error) {
	out := &clientapi.HostStats{Timestamp: time.Now().UnixNano(), DeviceStats: []any{}}
	mem, err := readMeminfo(c.procPath("meminfo"))
	if err != nil {
		return nil, err
	}
	out.Memory = mem
	if b, err := os.ReadFile(c.procPath("uptime")); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if up, err := strconv.ParseFloat(f[0], 64); err == nil {
				out.Uptime = uint64(up)
			}
		}
	}
	cur, order, err := readProcStat(c.procPath("stat"))
	if err != nil {
		return nil, err
	}
	c.api.mu.Lock()
	prev := c.api.hostCPU
	c.api.hostCPU = cur
	c.api.mu.Unlock()
	perCore := c.mhzPerCore()
	for _, name := range order {
		now := cur[name]
		d := now
		if p, ok := prev[name]; ok && now.total > p.total {
			d = cpuTimes{user: now.user - p.user, system: now.system - p.system, idle: now.idle - p.idle, total: now.total - p.total}
		}
		if d.total <= 0 {
			continue
		}
		s := &clientapi.HostCPUStats{CPU: name, User: 100 * d.user / d.total, System: 100 * d.system / d.total, Idle: 100 * d.idle / d.total}
		out.CPU = append(out.CPU, s)
		out.CPUTicksConsumed += (100 - s.Idle) / 100 * perCore
	}
	out.DiskStats = diskStats(c.procPath("mounts"))
	if ds := diskStat("", c.cfg.AllocDir); ds != nil {
		ds.Device, ds.Mountpoint = mountOf(c.procPath("mounts"), c.cfg.AllocDir)
		out.AllocDirStats = ds
	}
	return out, nil
}

func readMeminfo(path string) (*clientapi.HostMemoryStats, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	kv := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		kv[strings.TrimSuffix(f[0], ":")] = v * 1024
	}
	m := &clientapi.HostMemoryStats{Total: kv["MemTotal"], Free: kv["MemFree"], Available: kv["MemAvailable"]}
	if m.Available == 0 {
		m.Available = m.Free + kv["Buffers"] + kv["Cached"]
	}
	if m.Total > m.Available {
		m.Used = m.Total - m.Available
	}
	return m, nil
}

// readProcStat reads the per-CPU lines of /proc/stat (cpu0, cpu1, ...).
func readProcStat(path string) (map[string]cpuTimes, []string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]cpuTimes{}
	var order []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		var v [10]float64
		for i := 1; i < len(f) && i <= 10; i++ {
			v[i-1], _ = strconv.ParseFloat(f[i], 64)
		}
		// user nice system idle iowait irq softirq steal guest guest_nice;
		// guest time is in user already.
		t := cpuTimes{user: v[0] + v[1], system: v[2] + v[5] + v[6], idle: v[3] + v[4]}
		t.total = t.user + t.system + t.idle + v[7]
		out[f[0]] = t
		order = append(order, f[0])
	}
	return out, order, nil
}

// diskStats describes the block-device filesystems of a mounts file.
func diskStats(mounts string) []*clientapi.HostDiskStats {
	b, err := os.ReadFile(mounts)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	out := []*clientapi.HostDiskStats{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[0], "/dev/") || seen[f[0]] {
			continue
		}
		seen[f[0]] = true
		if ds := diskStat(f[0], unescapeMount(f[1])); ds != nil {
			ds.Mountpoint = unescapeMount(f[1])
			out = append(out, ds)
		}
	}
	return out
}

// unescapeMount undoes the octal escapes of a mounts file's paths.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountOf is the device and mount point of the longest mount holding path.
func mountOf(mounts, path string) (string, string) {
	b, err := os.ReadFile(mounts)
	if err != nil {
		return "", ""
	}
	dev, mp := "", ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		m := unescapeMount(f[1])
		if (path == m || strings.HasPrefix(path, strings.TrimSuffix(m, "/")+"/")) && len(m) >= len(mp) {
			dev, mp = f[0], m
		}
	}
	return dev, mp
}

func diskStat(device, path string) *clientapi.HostDiskStats {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil || st.Blocks == 0 {
		return nil
	}
	bs := uint64(st.Bsize)
	size := st.Blocks * bs
	used := (st.Blocks - st.Bfree) * bs
	ds := &clientapi.HostDiskStats{Device: device, Size: size, Used: used, Available: st.Bavail * bs}
	if used+ds.Available > 0 {
		ds.UsedPercent = 100 * float64(used) / float64(used+ds.Available)
	}
	if st.Files > 0 {
		ds.InodesUsedPercent = 100 * float64(st.Files-st.Ffree) / float64(st.Files)
	}
	return ds
}

// AllocStats samples the resource usage of an allocation's running tasks
// (/v1/client/allocation/<id>/stats): memory from the task's own memory
// cgroup when the driver made one (cgroup v1 or v2), else the RSS of its
// process tree; CPU from its process tree's times in /proc. CPU percent
// covers the time since the previous call (since the task started on the
// first). A task that does not run is left out.
func (c *Client) AllocStats(allocID string) (*clientapi.AllocResourceUsage, error) {
	ar := c.runner(allocID)
	if ar == nil {
		return nil, structs.NewError(structs.ErrNotFound, "Unknown allocation %q", allocID)
	}
	now := time.Now()
	out := &clientapi.AllocResourceUsage{
		Tasks:         map[string]*clientapi.TaskResourceUsage{},
		Timestamp:     now.UnixNano(),
		ResourceUsage: &clientapi.ResourceUsage{MemoryStats: &clientapi.MemoryStats{}, CpuStats: &clientapi.CPUStats{}, DeviceStats: []any{}},
	}
	tree := c.procTree()
	for _, tr := range ar.tasks {
		_, h := tr.snapshot()
		if h == nil || h.GetPid() <= 0 || !tr.running() {
			continue
		}
		ru := c.taskUsage(tr.id, int(h.GetPid()), tree, now)
		out.Tasks[tr.task.Name] = &clientapi.TaskResourceUsage{ResourceUsage: ru, Timestamp: now.UnixNano(), Pids: map[string]*clientapi.ResourceUsage{}}
		sum := out.ResourceUsage
		sum.MemoryStats.RSS += ru.MemoryStats.RSS
		sum.MemoryStats.Cache += ru.MemoryStats.Cache
		sum.MemoryStats.Swap += ru.MemoryStats.Swap
		sum.MemoryStats.Usage += ru.MemoryStats.Usage
		sum.MemoryStats.MaxUsage += ru.MemoryStats.MaxUsage
		sum.MemoryStats.Measured = ru.MemoryStats.Measured
		sum.CpuStats.Percent += ru.CpuStats.Percent
		sum.CpuStats.TotalTicks += ru.CpuStats.TotalTicks
		sum.CpuStats.UserMode += ru.CpuStats.UserMode
		sum.CpuStats.SystemMode += ru.CpuStats.SystemMode
		sum.CpuStats.Measured = ru.CpuStats.Measured
	}
	c.forgetTaskSamples(ar)
	return out, nil
}

// forgetTaskSamples drops the CPU samples of an alloc's tasks that no
// longer run, so the map holds only live tasks.
func (c *Client) forgetTaskSamples(ar *allocRunner) {
	c.api.mu.Lock()
	defer c.api.mu.Unlock()
	for _, tr := range ar.tasks {
		if !tr.running() {
			delete(c.api.taskCPU, tr.id)
		}
	}
}

// procTree maps each process to its children, from /proc/<pid>/stat.
func (c *Client) procTree() map[int][]int {
	ents, err := os.ReadDir(c.cfg.ProcRoot)
	if err != nil {
		return nil
	}
	out := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := readPidStat(c.procPath(e.Name(), "stat"))
		if !ok {
			continue
		}
		out[st.ppid] = append(out[st.ppid], pid)
	}
	return out
}

type pidStat struct {
	ppid         int
	utime, stime float64
	startTime    float64
	rssPages     uint64
}

// readPidStat parses /proc/<pid>/stat; the command name may hold spaces
// and parentheses, so fields are counted from its last ')'.
func readPidStat(path string) (pidStat, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return pidStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return pidStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15,
	// starttime 22, rss 24.
	if len(f) < 22 {
		return pidStat{}, false
	}
	var st pidStat
	st.ppid, _ = strconv.Atoi(f[1])
	st.utime, _ = strconv.ParseFloat(f[11], 64)
	st.stime, _ = strconv.ParseFloat(f[12], 64)
	st.startTime, _ = strconv.ParseFloat(f[19], 64)
	st.rssPages, _ = strconv.ParseUint(f[21], 10, 64)
	return st, true
}

// descendants is pid and every process beneath it.
func descendants(pid int, tree map[int][]int) []int {
	out := []int{pid}
	for i := 0; i < len(out) && len(out) < 1<<16; i++ {
		out = append(out, tree[out[i]]...)
	}
	return out
}

// taskUsage measures one task whose main process is pid.
func (c *Client) taskUsage(taskID string, pid int, tree map[int][]int, now time.Time) *clientapi.ResourceUsage {
	page := uint64(os.Getpagesize())
	var user, sys float64
	var rss uint64
	var started float64
	for i, p := range descendants(pid, tree) {
		st, ok := readPidStat(c.procPath(strconv.Itoa(p), "stat"))
		if !ok {
			continue
		}
		if i == 0 {
			started = st.startTime
		}
		user += st.utime
		sys += st.stime
		rss += st.rssPages * page
	}
	mem := &clientapi.MemoryStats{RSS: rss, Usage: rss, Measured: []string{"RSS"}}
	if cg := c.taskMemoryCgroup(pid); cg != nil {
		mem = cg
	}

	// The CPU share since the previous sample, or since the task's start.
	c.api.mu.Lock()
	if c.api.taskCPU == nil {
		c.api.taskCPU = map[string]taskCPUSample{}
	}
	prev, ok := c.api.taskCPU[taskID]
	c.api.taskCPU[taskID] = taskCPUSample{pid: pid, user: user, sys: sys, at: now, startedTick: started}
	c.api.mu.Unlock()
	var du, ds, secs float64
	if ok && prev.pid == pid && prev.startedTick == started && now.After(prev.at) {
		du, ds, secs = user-prev.user, sys-prev.sys, now.Sub(prev.at).Seconds()
	} else if up := c.uptime(); up > 0 {
		du, ds, secs = user, sys, up-started/clockTicks
	}
	cpu := &clientapi.CPUStats{Measured: []string{"System Mode", "User Mode", "Percent", "Total Ticks"}}
	if secs > 0 {
		cpu.UserMode = 100 * du / clockTicks / secs
		cpu.SystemMode = 100 * ds / clockTicks / secs
		cpu.Percent = cpu.UserMode + cpu.SystemMode
		cpu.TotalTicks = cpu.Percent / 100 * c.mhzPerCore()
	}
	return &clientapi.ResourceUsage{MemoryStats: mem, CpuStats: cpu, DeviceStats: []any{}}
}

func (c *Client) uptime() float64 {
	b, err := os.ReadFile(c.procPath("uptime"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	up, _ := strconv.ParseFloat(f[0], 64)
	return up
}

// cgroupMounts is where the kernel's cgroup hierarchies are mounted.
const cgroupMounts = "/sys/fs/cgroup"

// taskMemoryCgroup reads the memory of pid's memory cgroup, when the
// process has one of its own: not the root and not this agent's (a
// driver that makes no cgroup leaves its tasks in the agent's).
func (c *Client) taskMemoryCgroup(pid int) *clientapi.MemoryStats {
	task := readCgroups(c.procPath(strconv.Itoa(pid), "cgroup"))
	self := readCgroups(c.procPath("self", "cgroup"))
	if p, ok := task["memory"]; ok && p != "/" && p != self["memory"] {
		dir := filepath.Join(cgroupMounts, "memory", filepath.Clean("/"+p))
		usage, err := readUint(filepath.Join(dir, "memory.usage_in_bytes"))
		if err != nil {
			return nil
		}
		st := readKV(filepath.Join(dir, "memory.stat"))
		maxUsage, _ := readUint(filepath.Join(dir, "memory.max_usage_in_bytes"))
		return &clientapi.MemoryStats{RSS: st["total_rss"], Cache: st["total_cache"], Swap: st["total_swap"], Usage: usage, MaxUsage: maxUsage,
			Measured: []string{"RSS", "Cache", "Swap", "Usage", "Max Usage"}}
	}
	if p, ok := task[""]; ok && p != "/" && p != self[""] {
		dir := filepath.Join(cgroupMounts, filepath.Clean("/"+p))
		usage, err := readUint(filepath.Join(dir, "memory.current"))
		if err != nil {
			return nil
		}
		st := readKV(filepath.Join(dir, "memory.stat"))
		peak, _ := readUint(filepath.Join(dir, "memory.peak"))
		swap, _ := readUint(filepath.Join(dir, "memory.swap.current"))
		return &clientapi.MemoryStats{RSS: st["anon"], Cache: st["file"], Swap: swap, Usage: usage, MaxUsage: peak,
			Measured: []string{"RSS", "Cache", "Swap", "Usage", "Max Usage"}}
	}
	return nil
}

// readCgroups maps each v1 controller (and "" for the v2 hierarchy) of a
// /proc/<pid>/cgroup file to the process's cgroup path.
func readCgroups(path string) map[string]string {
	out := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			out[ctl] = parts[2]
		}
	}
	return out
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

func readKV(path string) map[string]uint64 {
	out := map[string]uint64{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				out[f[0]] = v
			}
		}
	}
	return out
}
