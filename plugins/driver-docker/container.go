package docker

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// Labels on every container the driver creates: RecoverTask and the GC
// find a task's container by them, never by name alone.
const (
	LabelAllocID  = "com.drover.alloc_id"
	LabelTaskName = "com.drover.task_name"
	LabelTaskID   = "com.drover.task_id"
)

// Paths of the alloc, task-local and secrets dirs inside the container,
// as Nomad's.
const (
	containerAllocDir   = "/alloc"
	containerLocalDir   = "/local"
	containerSecretsDir = "/secrets"
)

// minCPUShares is the engine's floor for cpu_shares.
const minCPUShares = 2

// containerName is unique per task run on the node, as Nomad's
// "<task>-<alloc_id>".
// Characters the engine refuses in a name become '_'.
func containerName(cfg *driverpb.TaskConfig) string {
	name := []byte(cfg.GetTaskName() + "-" + cfg.GetAllocId())
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || (i > 0 && (c == '_' || c == '.' || c == '-'))
		if !ok {
			name[i] = '_'
		}
	}
	return string(name)
}

// createOptions turns a validated task config into the engine's create
// request. It does no I/O, so it is tested without an engine.
func createOptions(cfg *driverpb.TaskConfig, tc *TaskConfig, pc *PluginConfig) (client.ContainerCreateOptions, error) {
	bad := func(format string, args ...any) (client.ContainerCreateOptions, error) {
		return client.ContainerCreateOptions{}, fmt.Errorf("%w: config: %s", driver.ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	labels := make(map[string]string, len(tc.Labels)+3)
	for k, v := range tc.Labels {
		if strings.HasPrefix(k, "com.drover.") {
			return bad("labels: %q is reserved (the com.drover. prefix is the driver's)", k)
		}
		labels[k] = v
	}
	labels[LabelAllocID] = cfg.GetAllocId()
	labels[LabelTaskName] = cfg.GetTaskName()
	labels[LabelTaskID] = cfg.GetId()

	binds, err := binds(cfg, tc, pc)
	if err != nil {
		return client.ContainerCreateOptions{}, err
	}
	vb, err := volumeBinds(cfg)
	if err != nil {
		return client.ContainerCreateOptions{}, err
	}
	binds = append(binds, vb...)
	dns := make([]netip.Addr, 0, len(tc.DNSServers))
	for i, s := range tc.DNSServers {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return bad("dns_servers[%d] %q is not an IP address", i, s)
		}
		dns = append(dns, a)
	}

	cc := &container.Config{
		Image:      tc.Image,
		Env:        containerEnv(cfg.GetEnv()),
		Labels:     labels,
		WorkingDir: tc.WorkDir,
		Hostname:   tc.Hostname,
		User:       cfg.GetUser(),
		Entrypoint: tc.Entrypoint,
	}
	if tc.Command != "" {
		cc.Cmd = append([]string{tc.Command}, tc.Args...)
	} else if len(tc.Args) > 0 {
		cc.Cmd = tc.Args
	}

	hc := &container.HostConfig{
		Binds:       binds,
		Privileged:  tc.Privileged,
		NetworkMode: container.NetworkMode(tc.NetworkMode),
		CapAdd:      tc.CapAdd,
		CapDrop:     capDrop(tc.CapDrop, pc.AllowCaps),
		DNS:         dns,
		ExtraHosts:  tc.ExtraHosts,
		IpcMode:     container.IpcMode(tc.IPCMode),
		PidMode:     container.PidMode(tc.PIDMode),
	}
	if err := portBindings(cfg, tc, cc, hc); err != nil {
		return client.ContainerCreateOptions{}, err
	}
	if len(tc.Logging) == 1 {
		hc.LogConfig = container.LogConfig{Type: tc.Logging[0].driverType(), Config: tc.Logging[0].options()}
	}
	if r := cfg.GetResources(); r != nil {
		if r.GetCpu() > 0 {
			hc.CPUShares = max(r.GetCpu(), minCPUShares)
		}
		// memory is the limit; with memory_max (oversubscription) the
		// limit is memory_max and memory the soft reservation. Swap is
		// never granted beyond the limit.
		if mem := r.GetMemoryMb() << 20; mem > 0 {
			hc.Memory = mem
			if mx := r.GetMemoryMaxMb() << 20; mx > mem {
				hc.Memory = mx
				hc.MemoryReservation = mem
			}
			hc.MemorySwap = hc.Memory
		}
	}
	applyNomadFields(tc, cc, hc)
	if hc.PidsLimit == nil && pc.PidsLimit > 0 {
		hc.PidsLimit = &pc.PidsLimit
	}
	if len(tc.Logging) == 0 && pc.Logging != nil {
		hc.LogConfig = container.LogConfig{Type: pc.Logging.driverType(), Config: pc.Logging.options()}
	}
	engineMounts(tc, hc)
	if err := groupDNS(cfg, hc); err != nil {
		return client.ContainerCreateOptions{}, err
	}
	return client.ContainerCreateOptions{Name: containerName(cfg), Config: cc, HostConfig: hc}, nil
}

// capDrop adds to the task's cap_drop every capability of the engine's
// default set that allow_caps leaves out, as Nomad does: allow_caps bounds
// what a container holds, not only what cap_add may add.
func capDrop(taskDrop, allow []string) []string {
	if slices.Contains(allow, "all") {
		return taskDrop
	}
	out := slices.Clone(taskDrop)
	dropped := map[string]bool{}
	for _, c := range taskDrop {
		dropped[normCap(c)] = true
	}
	if dropped["all"] {
		return out
	}
	for _, c := range engineDefaultCaps {
		if !slices.Contains(allow, c) && !dropped[c] {
			out = append(out, c)
		}
	}
	return out
}

// containerEnv is the task env for the container: the NOMAD_*_DIR
// variables name the container's paths, and the agent's PATH is left out
// so the image's own applies.
func containerEnv(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		switch k {
		case "PATH":
			continue
		case "NOMAD_ALLOC_DIR":
			v = containerAllocDir
		case "NOMAD_TASK_DIR":
			v = containerLocalDir
		case "NOMAD_SECRETS_DIR":
			v = containerSecretsDir
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// binds lists the container's bind mounts: the alloc, local and secrets
// dirs first, then the task's volumes and mount blocks. A relative host
// path is relative to the task dir and must stay inside the alloc dir; an
// absolute one needs the plugin's volumes.enabled.
func binds(cfg *driverpb.TaskConfig, tc *TaskConfig, pc *PluginConfig) ([]string, error) {
	allocDir, taskDir := cfg.GetAllocDir(), cfg.GetTaskDir()
	out := []string{
		filepath.Join(allocDir, "alloc") + ":" + containerAllocDir,
		filepath.Join(taskDir, "local") + ":" + containerLocalDir,
		filepath.Join(taskDir, "secrets") + ":" + containerSecretsDir,
	}
	host := func(field, p string) (string, error) {
		if filepath.IsAbs(p) {
			if !pc.Volumes.Enabled {
				return "", fmt.Errorf("%w: config: %s: host path %q needs the docker plugin config volumes { enabled = true }", driver.ErrInvalidConfig, field, p)
			}
			return filepath.Clean(p), nil
		}
		abs := filepath.Join(taskDir, p)
		rel, err := filepath.Rel(allocDir, abs)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return "", fmt.Errorf("%w: config: %s: relative host path %q leaves the allocation directory", driver.ErrInvalidConfig, field, p)
		}
		// The allocation directory and the task directories are the
		// trusted roots every file operation for a task resolves beneath
		// (a task must not be able to write them): they cannot be bound.
		if rel == "." || !strings.Contains(rel, "/") && rel != "alloc" {
			return "", fmt.Errorf("%w: config: %s: relative host path %q is the allocation or a task directory itself, which a task must not write; bind a directory beneath it (alloc/, local/, secrets/, ...)", driver.ErrInvalidConfig, field, p)
		}
		// Nor the drivers' own files in a task dir (the staging of binds,
		// the log checkpoint, raw_exec's exit file).
		if _, inTask, _ := strings.Cut(rel, "/"); !strings.HasPrefix(rel, "alloc/") && strings.HasPrefix(inTask, ".drover") {
			return "", fmt.Errorf("%w: config: %s: relative host path %q is a driver's own file, which a task must not write", driver.ErrInvalidConfig, field, p)
		}
		return abs, nil
	}
	for i, s := range tc.Volumes {
		v, err := parseVolume(s)
		if err != nil {
			return nil, fmt.Errorf("%w: config: volumes[%d]: %v", driver.ErrInvalidConfig, i, err)
		}
		h, err := host(fmt.Sprintf("volumes[%d]", i), v.host)
		if err != nil {
			return nil, err
		}
		b := h + ":" + v.container
		if v.readonly {
			b += ":ro"
		}
		out = append(out, b)
	}
	for i, m := range tc.Mounts {
		if m.Type != "" && m.Type != "bind" {
			continue // volume and tmpfs: engineMounts
		}
		h, err := host(fmt.Sprintf("mount[%d].source", i), m.Source)
		if err != nil {
			return nil, err
		}
		var opts []string
		if m.Readonly {
			opts = append(opts, "ro")
		}
		for _, bo := range m.BindOptions {
			if bo.Propagation != "" {
				opts = append(opts, bo.Propagation)
			}
		}
		b := h + ":" + m.Target
		if len(opts) > 0 {
			b += ":" + strings.Join(opts, ",")
		}
		out = append(out, b)
	}
	return out, nil
}

// groupDNS applies the group network's dns block to a task in host mode
// (in an isolated mode the pause container carries it) where the task's
// own dns_servers, dns_search_domains and dns_options leave a field unset,
// as Nomad does. A task sharing another container's network
// (network_mode "container:<id>") has that one's resolver.
func groupDNS(cfg *driverpb.TaskConfig, hc *container.HostConfig) error {
	g := cfg.GetDns()
	if g == nil || cfg.GetNetworkIsolation() != nil || hc.NetworkMode.IsContainer() {
		return nil
	}
	if len(hc.DNS) == 0 {
		for i, s := range g.GetServers() {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return fmt.Errorf("%w: dns.servers[%d] %q is not an IP address", driver.ErrInvalidConfig, i, s)
			}
			hc.DNS = append(hc.DNS, a)
		}
	}
	if len(hc.DNSSearch) == 0 {
		hc.DNSSearch = slices.Clone(g.GetSearches())
	}
	if len(hc.DNSOptions) == 0 {
		hc.DNSOptions = slices.Clone(g.GetOptions())
	}
	return nil
}
