package docker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/drover-org/drover/sdk/driver"
)

// NomadFields are the docker task config keys Nomad documents beyond the
// ones TaskConfig names itself. Every one is accepted; those the engine
// API carries are honoured, the others are warned about (the driver's log
// names the field and why), never a failed start.
type NomadFields struct {
	// AuthSoftFail: a pull with the task's auth that fails is retried
	// without it (public images with a registry-wide auth).
	AuthSoftFail bool `json:"auth_soft_fail"`
	// Mounts is the older, list form of `mount`.
	LegacyMounts []Mount `json:"mounts"`
	// PortMap (Nomad's deprecated `port_map { label = port }`) maps a
	// network label to the container port; its labels are forwarded as
	// `ports` lists them.
	PortMap oneOrMany[map[string]int] `json:"port_map"`

	DNSSearchDomains []string          `json:"dns_search_domains"`
	DNSOptions       []string          `json:"dns_options"`
	Init             bool              `json:"init"`
	Interactive      bool              `json:"interactive"`
	TTY              bool              `json:"tty"`
	SecurityOpt      []string          `json:"security_opt"`
	ShmSize          int64             `json:"shm_size"`
	Ulimit           oneOrMany[ulimit] `json:"ulimit"`
	Sysctl           oneOrMany[sysctl] `json:"sysctl"`
	StorageOpt       map[string]string `json:"storage_opt"`
	Devices          []Device          `json:"devices"`
	CPUSetCPUs       string            `json:"cpuset_cpus"`
	CPUHardLimit     bool              `json:"cpu_hard_limit"`
	CPUCFSPeriod     int64             `json:"cpu_cfs_period"`
	MemoryHardLimit  int64             `json:"memory_hard_limit"`
	PidsLimit        int64             `json:"pids_limit"`
	OOMScoreAdj      int               `json:"oom_score_adj"`
	ReadonlyRootfs   bool              `json:"readonly_rootfs"`
	Runtime          string            `json:"runtime"`
	UTSMode          string            `json:"uts_mode"`
	UsernsMode       string            `json:"userns_mode"`
	CgroupnsMode     string            `json:"cgroupns"`
	VolumeDriver     string            `json:"volume_driver"`
	GroupAdd         []string          `json:"group_add"`
	Healthchecks     oneOrMany[struct {
		Disable bool `json:"disable"`
	}] `json:"healthchecks"`
	Isolation string `json:"isolation"`

	// Accepted, not honoured: warned about.
	Load                 string   `json:"load"`
	MacAddress           string   `json:"mac_address"`
	IPv4Address          string   `json:"ipv4_address"`
	IPv6Address          string   `json:"ipv6_address"`
	NetworkAliases       []string `json:"network_aliases"`
	AdvertiseIPv6Address bool     `json:"advertise_ipv6_address"`
	ImagePlatform        string   `json:"image_platform"`
}

// Device is a `devices` entry.
type Device struct {
	HostPath          string `json:"host_path"`
	ContainerPath     string `json:"container_path"`
	CgroupPermissions string `json:"cgroup_permissions"`
}

// ulimit is the `ulimit { nofile = "1024:2048" }` block: name to "soft" or
// "soft:hard".
type ulimit map[string]string

// sysctl is the `sysctl { "net.core.somaxconn" = "16384" }` block.
type sysctl map[string]string

// MountOptions are a mount block's type-specific blocks.
type MountOptions struct {
	BindOptions   oneOrMany[bindOptions]   `json:"bind_options"`
	TmpfsOptions  oneOrMany[tmpfsOptions]  `json:"tmpfs_options"`
	VolumeOptions oneOrMany[volumeOptions] `json:"volume_options"`
}

type bindOptions struct {
	Propagation string `json:"propagation"`
}

type tmpfsOptions struct {
	Size int64  `json:"size"`
	Mode uint32 `json:"mode"`
}

type volumeOptions struct {
	NoCopy       bool                         `json:"no_copy"`
	Labels       oneOrMany[map[string]string] `json:"labels"`
	DriverConfig oneOrMany[struct {
		Name    string                       `json:"name"`
		Options oneOrMany[map[string]string] `json:"options"`
	}] `json:"driver_config"`
}

// warning is a field accepted but not honoured, and why.
type warning struct{ field, why string }

func (w warning) String() string { return w.field + ": " + w.why }

// checkNomadFields checks the values of the Nomad fields; errors wrap
// ErrInvalidConfig and name the field.
func (tc *TaskConfig) checkNomadFields() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: config: %s", driver.ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	for _, u := range tc.Ulimit {
		for name, v := range u {
			if _, _, err := parseUlimit(v); err != nil {
				return bad("ulimit.%s %q: %v", name, v, err)
			}
		}
	}
	for i, dv := range tc.Devices {
		if dv.HostPath == "" || !filepath.IsAbs(dv.HostPath) {
			return bad("devices[%d].host_path %q must be an absolute path", i, dv.HostPath)
		}
		if dv.ContainerPath != "" && !filepath.IsAbs(dv.ContainerPath) {
			return bad("devices[%d].container_path %q must be an absolute path", i, dv.ContainerPath)
		}
		if strings.Trim(dv.CgroupPermissions, "rwm") != "" {
			return bad("devices[%d].cgroup_permissions %q may hold only r, w and m", i, dv.CgroupPermissions)
		}
	}
	for name, n := range map[string]int64{"shm_size": tc.ShmSize, "pids_limit": tc.PidsLimit, "memory_hard_limit": tc.MemoryHardLimit, "cpu_cfs_period": tc.CPUCFSPeriod} {
		if n < 0 {
			return bad("%s must not be negative, got %d", name, n)
		}
	}
	if tc.CPUCFSPeriod > 1000000 || (tc.CPUCFSPeriod > 0 && tc.CPUCFSPeriod < 1000) {
		return bad("cpu_cfs_period %d must be between 1000 and 1000000 microseconds", tc.CPUCFSPeriod)
	}
	if tc.OOMScoreAdj < -1000 || tc.OOMScoreAdj > 1000 {
		return bad("oom_score_adj %d must be between -1000 and 1000", tc.OOMScoreAdj)
	}
	for _, m := range []struct{ field, v string }{{"uts_mode", tc.UTSMode}, {"userns_mode", tc.UsernsMode}} {
		if m.v != "" && m.v != "host" {
			return bad("%s %q must be \"host\" or unset", m.field, m.v)
		}
	}
	if tc.CgroupnsMode != "" && tc.CgroupnsMode != "host" && tc.CgroupnsMode != "private" {
		return bad("cgroupns %q must be \"host\" or \"private\"", tc.CgroupnsMode)
	}
	for _, pm := range tc.PortMap {
		for label, port := range pm {
			if port < 1 || port > 65535 {
				return bad("port_map.%s %d must be a port between 1 and 65535", label, port)
			}
		}
	}
	for i, m := range tc.allMounts() {
		if err := m.checkOptions(); err != nil {
			return bad("mount[%d].%v", i, err)
		}
	}
	return nil
}

// allMounts are the mount blocks, the legacy mounts list merged into
// them when the config was parsed.
func (tc *TaskConfig) allMounts() []Mount { return tc.Mounts }

// portMapTo is the container port port_map gives label.
func (tc *TaskConfig) portMapTo(label string) (int, bool) {
	for _, pm := range tc.PortMap {
		if n, ok := pm[label]; ok {
			return n, true
		}
	}
	return 0, false
}

func (m Mount) checkOptions() error {
	if len(m.BindOptions) > 1 || len(m.TmpfsOptions) > 1 || len(m.VolumeOptions) > 1 {
		return fmt.Errorf("bind_options, tmpfs_options and volume_options may each be given once")
	}
	for _, b := range m.BindOptions {
		switch b.Propagation {
		case "", "private", "rprivate", "shared", "rshared", "slave", "rslave":
		default:
			return fmt.Errorf("bind_options.propagation %q is not a propagation mode", b.Propagation)
		}
	}
	return nil
}

func parseUlimit(v string) (soft, hard int64, err error) {
	s, h, hasHard := strings.Cut(v, ":")
	if soft, err = strconv.ParseInt(s, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("must be \"soft\" or \"soft:hard\" numbers")
	}
	hard = soft
	if hasHard {
		if hard, err = strconv.ParseInt(h, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("must be \"soft\" or \"soft:hard\" numbers")
		}
	}
	if hard < soft {
		return 0, 0, fmt.Errorf("hard limit %d is below the soft limit %d", hard, soft)
	}
	return soft, hard, nil
}

// unsupported lists the fields of tc the driver accepts but cannot
// honour on this engine, and why.
func unsupported(tc *TaskConfig) []warning {
	var warns []warning
	if tc.TTY {
		warns = append(warns, warning{"tty", "the task's output is read from the engine's multiplexed log stream, which a TTY replaces; it runs without one"})
	}
	if tc.CPUHardLimit {
		// The task's MHz as a CFS quota needs the node's total MHz,
		// which the driver protocol does not carry.
		warns = append(warns, warning{"cpu_hard_limit", "the node's total CPU is not known to the driver; cpu stays a relative weight (shares)"})
	}
	if tc.Isolation != "" && tc.Isolation != "default" {
		warns = append(warns, warning{"isolation", "Windows container isolation does not apply to a Linux engine"})
	}
	for _, w := range []struct {
		set   bool
		field string
	}{
		{tc.Load != "", "load"},
		{tc.MacAddress != "", "mac_address"},
		{tc.IPv4Address != "", "ipv4_address"},
		{tc.IPv6Address != "", "ipv6_address"},
		{len(tc.NetworkAliases) > 0, "network_aliases"},
		{tc.AdvertiseIPv6Address, "advertise_ipv6_address"},
		{tc.ImagePlatform != "", "image_platform"},
	} {
		if w.set {
			warns = append(warns, warning{w.field, "not supported by drover's docker driver; ignored"})
		}
	}
	return warns
}

// applyNomadFields sets what the engine API carries of the Nomad fields
// on the create request (unsupported lists the rest).
func applyNomadFields(tc *TaskConfig, cc *container.Config, hc *container.HostConfig) {
	hc.DNSSearch, hc.DNSOptions = tc.DNSSearchDomains, tc.DNSOptions
	if tc.Init {
		hc.Init = &tc.Init
	}
	cc.OpenStdin = tc.Interactive
	hc.SecurityOpt = tc.SecurityOpt
	hc.ShmSize = tc.ShmSize
	for _, u := range tc.Ulimit {
		names := make([]string, 0, len(u))
		for n := range u {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			soft, hard, _ := parseUlimit(u[n]) // checked
			hc.Ulimits = append(hc.Ulimits, &container.Ulimit{Name: n, Soft: soft, Hard: hard})
		}
	}
	for _, s := range tc.Sysctl {
		if hc.Sysctls == nil {
			hc.Sysctls = map[string]string{}
		}
		for k, v := range s {
			hc.Sysctls[k] = v
		}
	}
	hc.StorageOpt = tc.StorageOpt
	for _, dv := range tc.Devices {
		in := dv.ContainerPath
		if in == "" {
			in = dv.HostPath
		}
		perms := dv.CgroupPermissions
		if perms == "" {
			perms = "rwm"
		}
		hc.Devices = append(hc.Devices, container.DeviceMapping{PathOnHost: dv.HostPath, PathInContainer: in, CgroupPermissions: perms})
	}
	hc.CpusetCpus = tc.CPUSetCPUs
	if tc.CPUCFSPeriod > 0 {
		hc.CPUPeriod = tc.CPUCFSPeriod
	}
	if tc.MemoryHardLimit > 0 {
		// Nomad's: memory is the reservation, memory_hard_limit the limit.
		if mem := tc.MemoryHardLimit << 20; mem > hc.Memory {
			hc.MemoryReservation = hc.Memory
			hc.Memory = mem
			hc.MemorySwap = mem
		}
	}
	if tc.PidsLimit > 0 {
		hc.PidsLimit = &tc.PidsLimit
	}
	hc.OomScoreAdj = tc.OOMScoreAdj
	hc.ReadonlyRootfs = tc.ReadonlyRootfs
	hc.Runtime = tc.Runtime
	hc.UTSMode = container.UTSMode(tc.UTSMode)
	hc.UsernsMode = container.UsernsMode(tc.UsernsMode)
	hc.CgroupnsMode = container.CgroupnsMode(tc.CgroupnsMode)
	hc.VolumeDriver = tc.VolumeDriver
	hc.GroupAdd = tc.GroupAdd
	for _, h := range tc.Healthchecks {
		if h.Disable {
			cc.Healthcheck = &container.HealthConfig{Test: []string{"NONE"}}
		}
	}
}

// engineMounts turns the volume and tmpfs mounts into the engine's
// (bind mounts go through binds, which checks their sources).
func engineMounts(tc *TaskConfig, hc *container.HostConfig) {
	for _, m := range tc.allMounts() {
		switch m.Type {
		case "volume":
			em := mount.Mount{Type: mount.TypeVolume, Source: m.Source, Target: m.Target, ReadOnly: m.Readonly}
			for _, vo := range m.VolumeOptions {
				opts := &mount.VolumeOptions{NoCopy: vo.NoCopy}
				for _, l := range vo.Labels {
					if opts.Labels == nil {
						opts.Labels = map[string]string{}
					}
					for k, v := range l {
						opts.Labels[k] = v
					}
				}
				for _, dc := range vo.DriverConfig {
					opts.DriverConfig = &mount.Driver{Name: dc.Name}
					for _, o := range dc.Options {
						if opts.DriverConfig.Options == nil {
							opts.DriverConfig.Options = map[string]string{}
						}
						for k, v := range o {
							opts.DriverConfig.Options[k] = v
						}
					}
				}
				em.VolumeOptions = opts
			}
			hc.Mounts = append(hc.Mounts, em)
		case "tmpfs":
			em := mount.Mount{Type: mount.TypeTmpfs, Target: m.Target, ReadOnly: m.Readonly}
			for _, to := range m.TmpfsOptions {
				em.TmpfsOptions = &mount.TmpfsOptions{SizeBytes: to.Size}
				if to.Mode != 0 {
					em.TmpfsOptions.Mode = os.FileMode(to.Mode)
				}
			}
			hc.Mounts = append(hc.Mounts, em)
		}
	}
}

// NomadPluginFields are the docker plugin config keys Nomad documents
// beyond the ones PluginConfig names itself: every one is accepted; the
// ones drover cannot honour are named in a warning when the plugin starts
// (Unhonoured).
type NomadPluginFields struct {
	// AllowRuntimes are the runtimes a task's `runtime` may name
	// (Nomad's default: runc and nvidia).
	AllowRuntimes []string `json:"allow_runtimes"`
	// PidsLimit is the pids limit of a task that sets none.
	PidsLimit int64 `json:"pids_limit"`
	// Logging is the log driver of a task without a logging block.
	Logging *Logging `json:"logging"`

	Auth                               json.RawMessage `json:"auth"`
	TLS                                json.RawMessage `json:"tls"`
	PullActivityTimeout                string          `json:"pull_activity_timeout"`
	ExtraLabels                        []string        `json:"extra_labels"`
	InfraImage                         string          `json:"infra_image"`
	InfraImagePullTimeout              string          `json:"infra_image_pull_timeout"`
	DisableLogCollection               bool            `json:"disable_log_collection"`
	ContainerExistsAttempts            int             `json:"container_exists_attempts"`
	WindowsAllowInsecureContainerAdmin bool            `json:"windows_allow_insecure_container_admin"`
	NvidiaRuntime                      string          `json:"nvidia_runtime"`
}

// defaultRuntimes is Nomad's allow_runtimes default.
var defaultRuntimes = []string{"runc", "nvidia"}

func (cfg *PluginConfig) checkNomadPluginFields() error {
	if cfg.AllowRuntimes == nil {
		cfg.AllowRuntimes = slices.Clone(defaultRuntimes)
	}
	if cfg.PidsLimit < 0 {
		return fmt.Errorf("pids_limit must not be negative, got %d", cfg.PidsLimit)
	}
	for _, d := range []struct{ name, v string }{{"pull_activity_timeout", cfg.PullActivityTimeout}, {"infra_image_pull_timeout", cfg.InfraImagePullTimeout}} {
		if d.v == "" {
			continue
		}
		if v, err := time.ParseDuration(d.v); err != nil || v < 0 {
			return fmt.Errorf("%s %q must be a duration such as \"2m\"", d.name, d.v)
		}
	}
	return nil
}

// Unhonoured names the plugin config keys set that drover's docker driver
// accepts but does not act on, each with why.
func (cfg *PluginConfig) Unhonoured() []string {
	var out []string
	for _, k := range []struct {
		set      bool
		key, why string
	}{
		{len(cfg.Auth) > 0 && string(cfg.Auth) != "null", "auth", "registry credentials come from each task's auth block"},
		{len(cfg.TLS) > 0 && string(cfg.TLS) != "null", "tls", "the engine is reached at endpoint over unix:// or a trusted tcp:// address"},
		{cfg.PullActivityTimeout != "", "pull_activity_timeout", "a pull is bounded by the task's image_pull_timeout"},
		{len(cfg.ExtraLabels) > 0, "extra_labels", "containers carry drover's com.drover.* labels"},
		{cfg.InfraImagePullTimeout != "", "infra_image_pull_timeout", "the pause image is pulled within the default image_pull_timeout"},
		{cfg.DisableLogCollection, "disable_log_collection", "task logs are always collected"},
		{cfg.ContainerExistsAttempts != 0, "container_exists_attempts", "a task's leftover container is adopted or replaced at once"},
		{cfg.WindowsAllowInsecureContainerAdmin, "windows_allow_insecure_container_admin", "Windows only"},
		{cfg.NvidiaRuntime != "", "nvidia_runtime", "GPUs are not scheduled by drover"},
		{len(cfg.GC.DanglingContainers) > 0 && string(cfg.GC.DanglingContainers) != "null", "gc.dangling_containers", "a task's leftover container is adopted or replaced at its next start"},
		{cfg.Volumes.SELinuxLabel != "", "volumes.selinuxlabel", "bind mounts are not relabelled"},
	} {
		if k.set {
			out = append(out, k.key+": "+k.why)
		}
	}
	return out
}
