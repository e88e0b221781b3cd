package client

import (
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/drover-org/drover/core/structs"
)

const (
	// defaultCoreMHz stands in for a core's speed when /proc/cpuinfo does
	// not tell it (some VMs and ARM kernels), so the node still offers CPU.
	defaultCoreMHz = 1000

	// driverFingerprintTimeout bounds one driver's Fingerprint call; a
	// wedged plugin must not hold up registration.
	driverFingerprintTimeout = 10 * time.Second
)

// hostFacts is what the host fingerprint found.
type hostFacts struct {
	Attributes map[string]string
	Resources  *structs.NodeResources
}

// fingerprintHost collects the node attributes and resources of this
// machine with Nomad's attribute names. procRoot is "/proc" outside tests.
// A source that cannot be read leaves its attributes out rather than
// failing the node: a node with fewer attributes can still run work.
func fingerprintHost(procRoot, allocDir, version string) hostFacts {
	attrs := map[string]string{
		"kernel.name":    runtime.GOOS,
		"cpu.arch":       runtime.GOARCH,
		"drover.version": version,
		"nomad.version":  version,
	}
	res := &structs.NodeResources{}

	cores, mhz, model := 0, 0.0, ""
	if f, err := os.Open(filepath.Join(procRoot, "cpuinfo")); err == nil {
		cores, mhz, model = parseCPUInfo(f)
		f.Close()
	}
	if cores == 0 {
		cores = runtime.NumCPU()
	}
	if mhz <= 0 {
		mhz = defaultCoreMHz
	}
	total := int64(float64(cores) * mhz)
	attrs["cpu.numcores"] = strconv.Itoa(cores)
	attrs["cpu.frequency"] = strconv.Itoa(int(mhz))
	attrs["cpu.totalcompute"] = strconv.FormatInt(total, 10)
	if model != "" {
		attrs["cpu.modelname"] = model
	}
	res.Cpu = structs.NodeCpuResources{CpuShares: total, TotalCpuCores: uint16(cores)}
	for i := range cores {
		res.Cpu.ReservableCpuCores = append(res.Cpu.ReservableCpuCores, uint16(i))
	}

	if f, err := os.Open(filepath.Join(procRoot, "meminfo")); err == nil {
		if total, ok := parseMemInfo(f); ok {
			attrs["memory.totalbytes"] = strconv.FormatUint(total, 10)
			res.Memory.MemoryMB = int64(total / (1024 * 1024))
		}
		f.Close()
	}

	if b, err := os.ReadFile(filepath.Join(procRoot, "sys/kernel/osrelease")); err == nil {
		attrs["kernel.version"] = strings.TrimSpace(string(b))
	}
	if f, err := os.Open("/etc/os-release"); err == nil {
		id, ver := parseOSRelease(f)
		f.Close()
		if id != "" {
			attrs["os.name"] = id
		}
		if ver != "" {
			attrs["os.version"] = ver
		}
	}
	if _, ok := attrs["os.name"]; !ok {
		attrs["os.name"] = runtime.GOOS
	}

	if host, err := os.Hostname(); err == nil {
		attrs["unique.hostname"] = host
	}
	if ip := firstIP(); ip != "" {
		attrs["unique.network.ip-address"] = ip
	}

	var st syscall.Statfs_t
	if err := syscall.Statfs(allocDir, &st); err == nil {
		size := uint64(st.Bsize)
		totalB, freeB := uint64(st.Blocks)*size, uint64(st.Bavail)*size
		attrs["unique.storage.volume"] = allocDir
		attrs["unique.storage.bytestotal"] = strconv.FormatUint(totalB, 10)
		attrs["unique.storage.bytesfree"] = strconv.FormatUint(freeB, 10)
		// Like Nomad, offer what is free now: space other users hold is
		// not ours to schedule.
		res.Disk.DiskMB = int64(freeB / (1024 * 1024))
	}
	return hostFacts{Attributes: attrs, Resources: res}
}

// parseCPUInfo reads /proc/cpuinfo: the number of processors, the fastest
// reported "cpu MHz" and the model name.
func parseCPUInfo(r io.Reader) (cores int, mhz float64, model string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "processor":
			cores++
		case "cpu MHz":
			if f, err := strconv.ParseFloat(v, 64); err == nil && f > mhz {
				mhz = f
			}
		case "model name":
			if model == "" {
				model = v
			}
		}
	}
	return cores, mhz, model
}

// parseMemInfo returns MemTotal from /proc/meminfo in bytes.
func parseMemInfo(r io.Reader) (uint64, bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "MemTotal:" {
			continue
		}
		n, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			return 0, false
		}
		if len(fields) >= 3 && strings.EqualFold(fields[2], "kB") {
			n *= 1024
		}
		return n, true
	}
	return 0, false
}

// parseOSRelease returns ID and VERSION_ID from an os-release file.
func parseOSRelease(r io.Reader) (id, version string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		v = strings.Trim(strings.TrimSpace(v), `"'`)
		switch k {
		case "ID":
			id = v
		case "VERSION_ID":
			version = v
		}
	}
	return id, version
}

// firstIP is the node's first global unicast address, IPv4 preferred. It
// reads interface configuration only; no packet is sent.
func firstIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	var v6 string
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || !ipn.IP.IsGlobalUnicast() {
			continue
		}
		if ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
		if v6 == "" {
			v6 = ipn.IP.String()
		}
	}
	return v6
}

// fingerprintDrivers asks every allowed driver whether it can run here.
// A driver whose Fingerprint fails is reported undetected with the error
// as its health description, so the operator sees why in `node status`.
func fingerprintDrivers(ctx context.Context, p DriverProvider, allowed func(string) bool) (map[string]*structs.DriverInfo, map[string]string) {
	infos := map[string]*structs.DriverInfo{}
	attrs := map[string]string{}
	if p == nil {
		return infos, attrs
	}
	for _, name := range p.Names() {
		if !allowed(name) {
			continue
		}
		info := &structs.DriverInfo{UpdateTime: time.Now(), Attributes: map[string]string{}}
		infos[name] = info
		d, err := p.Driver(name)
		if err != nil {
			info.HealthDescription = fmt.Sprintf("driver unavailable: %v", err)
			continue
		}
		fctx, cancel := context.WithTimeout(ctx, driverFingerprintTimeout)
		fp, err := d.Fingerprint(fctx)
		cancel()
		if err != nil {
			info.HealthDescription = fmt.Sprintf("fingerprint failed: %v", err)
			continue
		}
		info.Detected, info.Healthy, info.HealthDescription = fp.GetDetected(), fp.GetHealthy(), fp.GetHealthDescription()
		for k, v := range fp.GetAttributes() {
			info.Attributes[k] = v
			if info.Detected {
				attrs[k] = v
			}
		}
	}
	return infos, attrs
}

// driverFilter applies the client options driver.allowlist and
// driver.denylist (comma-separated names), as Nomad's client does.
func driverFilter(options map[string]string) func(string) bool {
	list := func(key string) map[string]bool {
		m := map[string]bool{}
		for _, n := range strings.Split(options[key], ",") {
			if n = strings.TrimSpace(n); n != "" {
				m[n] = true
			}
		}
		return m
	}
	allow, deny := list("driver.allowlist"), list("driver.denylist")
	return func(name string) bool {
		if len(allow) > 0 && !allow[name] {
			return false
		}
		return !deny[name]
	}
}

// computedClass hashes what makes nodes interchangeable for the scheduler
// (datacenter, class, pool, non-unique attributes and meta, drivers), so
// that feasibility results can be shared between nodes of one class.
// Attributes and meta under "unique." are excluded by definition.
func computedClass(n *structs.Node) string {
	h := fnv.New64a()
	write := func(parts ...string) {
		for _, p := range parts {
			h.Write([]byte(p))
			h.Write([]byte{0})
		}
	}
	write(n.Datacenter, n.NodeClass, n.NodePool)
	for _, m := range []map[string]string{n.Attributes, n.Meta} {
		keys := make([]string, 0, len(m))
		for k := range m {
			if !strings.HasPrefix(k, "unique.") {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			write(k, m[k])
		}
		write("|")
	}
	names := make([]string, 0, len(n.Drivers))
	for k := range n.Drivers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		d := n.Drivers[k]
		write(k, strconv.FormatBool(d.Detected), strconv.FormatBool(d.Healthy))
	}
	return fmt.Sprintf("v1:%d", h.Sum64())
}
