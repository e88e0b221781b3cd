package execdriver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/drover-org/drover/sdk/driver"
)

// ConfigEnvVar carries the plugin config (the agent's `plugin "exec" {
// config { … } }` stanza, as JSON) to the plugin at launch.
const ConfigEnvVar = "DROVER_EXEC_PLUGIN_CONFIG"

// Namespace modes of pid_mode and ipc_mode.
const (
	modePrivate = "private"
	modeHost    = "host"
)

// defaultCaps is Nomad's exec allow_caps default: Docker's default set
// without net_raw. A task runs with these (root's bounding set) unless its
// cap_add / cap_drop say otherwise.
var defaultCaps = []string{
	"audit_write", "chown", "dac_override", "fowner", "fsetid", "kill", "mknod",
	"net_bind_service", "setfcap", "setgid", "setpcap", "setuid", "sys_chroot",
}

// PluginConfig is the driver's configuration, Nomad's exec keys.
type PluginConfig struct {
	// DefaultPIDMode and DefaultIPCMode are the modes of tasks that set
	// none: "private" (Nomad's default) or "host".
	DefaultPIDMode string `json:"default_pid_mode"`
	DefaultIPCMode string `json:"default_ipc_mode"`
	// NoPivotRoot enters the task's root with chroot instead of
	// pivot_root (Nomad's key, for hosts whose root is on a ramdisk).
	NoPivotRoot bool `json:"no_pivot_root"`
	// AllowCaps are the capabilities a task may have (cap_add may only
	// add these).
	AllowCaps []string `json:"allow_caps"`
}

// ParsePluginConfig decodes the plugin config strictly and applies
// Nomad's defaults.
func ParsePluginConfig(raw []byte) (*PluginConfig, error) {
	var cfg PluginConfig
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := decodeStrict(raw, &cfg); err != nil {
			return nil, fmt.Errorf("exec plugin config: %w", err)
		}
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"default_pid_mode", &cfg.DefaultPIDMode}, {"default_ipc_mode", &cfg.DefaultIPCMode}} {
		switch *f.v {
		case "":
			*f.v = modePrivate
		case modePrivate, modeHost:
		default:
			return nil, fmt.Errorf("exec plugin config: %s %q must be %q or %q", f.name, *f.v, modePrivate, modeHost)
		}
	}
	if cfg.AllowCaps == nil {
		cfg.AllowCaps = slices.Clone(defaultCaps)
	}
	for i, c := range cfg.AllowCaps {
		n := normCap(c)
		if n != "all" && capNumber(n) < 0 {
			return nil, fmt.Errorf("exec plugin config: allow_caps[%d] %q is not a capability", i, c)
		}
		cfg.AllowCaps[i] = n
	}
	return &cfg, nil
}

// TaskConfig is the jobspec task `config` block of an exec task, Nomad's
// keys.
type TaskConfig struct {
	// Command runs inside the task's root: an absolute path there, a path
	// relative to the task directory, or a name looked up in PATH.
	Command string   `json:"command"`
	Args    []string `json:"args"`
	// PIDMode and IPCMode: "private" (own namespace) or "host".
	PIDMode string   `json:"pid_mode"`
	IPCMode string   `json:"ipc_mode"`
	CapAdd  []string `json:"cap_add"`
	CapDrop []string `json:"cap_drop"`
	// WorkDir is the working directory inside the task's root ("/" when
	// unset: the task directory).
	WorkDir string `json:"work_dir"`
}

// parseTaskConfig decodes config_json strictly: a misspelt key is an
// error the user sees, not a setting silently ignored.
func parseTaskConfig(raw []byte, pc *PluginConfig) (*TaskConfig, error) {
	var tc TaskConfig
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, fmt.Errorf("%w: config: command is required", driver.ErrInvalidConfig)
	}
	if err := decodeStrict(raw, &tc); err != nil {
		return nil, fmt.Errorf("%w: config: %v", driver.ErrInvalidConfig, err)
	}
	if tc.Command == "" {
		return nil, fmt.Errorf("%w: config: command is required", driver.ErrInvalidConfig)
	}
	for _, f := range []struct {
		name, def string
		v         *string
	}{{"pid_mode", pc.DefaultPIDMode, &tc.PIDMode}, {"ipc_mode", pc.DefaultIPCMode, &tc.IPCMode}} {
		switch *f.v {
		case "":
			*f.v = f.def
		case modePrivate, modeHost:
		default:
			return nil, fmt.Errorf("%w: config: %s %q must be %q or %q", driver.ErrInvalidConfig, f.name, *f.v, modePrivate, modeHost)
		}
	}
	if tc.WorkDir != "" && !strings.HasPrefix(tc.WorkDir, "/") {
		return nil, fmt.Errorf("%w: config: work_dir %q must be an absolute path inside the task's root", driver.ErrInvalidConfig, tc.WorkDir)
	}
	return &tc, nil
}

// taskCaps is the task's capability set: the defaults, plus cap_add,
// minus cap_drop; cap_add may name only what allow_caps allows ("all"
// where it allows all).
func taskCaps(tc *TaskConfig, pc *PluginConfig) ([]string, error) {
	allowAll := slices.Contains(pc.AllowCaps, "all")
	set := map[string]bool{}
	for _, c := range defaultCaps {
		if allowAll || slices.Contains(pc.AllowCaps, c) {
			set[c] = true
		}
	}
	for i, c := range tc.CapAdd {
		n := normCap(c)
		switch {
		case n == "all" && allowAll:
			for _, name := range capNames {
				set[name] = true
			}
			continue
		case n != "all" && capNumber(n) < 0:
			return nil, fmt.Errorf("%w: config: cap_add[%d] %q is not a capability", driver.ErrInvalidConfig, i, c)
		case !allowAll && !slices.Contains(pc.AllowCaps, n):
			return nil, fmt.Errorf("%w: config: cap_add[%d] %q is not allowed by the exec plugin config allow_caps %v", driver.ErrInvalidConfig, i, c, pc.AllowCaps)
		}
		set[n] = true
	}
	for i, c := range tc.CapDrop {
		n := normCap(c)
		if n == "all" {
			clear(set)
			continue
		}
		if capNumber(n) < 0 {
			return nil, fmt.Errorf("%w: config: cap_drop[%d] %q is not a capability", driver.ErrInvalidConfig, i, c)
		}
		delete(set, n)
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	slices.Sort(out)
	return out, nil
}

// normCap lower-cases a capability name and drops a "CAP_" prefix.
func normCap(c string) string {
	return strings.TrimPrefix(strings.ToLower(strings.TrimSpace(c)), "cap_")
}

// capNames are Linux's capabilities by number.
var capNames = []string{
	"chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid", "setuid",
	"setpcap", "linux_immutable", "net_bind_service", "net_broadcast", "net_admin", "net_raw",
	"ipc_lock", "ipc_owner", "sys_module", "sys_rawio", "sys_chroot", "sys_ptrace", "sys_pacct",
	"sys_admin", "sys_boot", "sys_nice", "sys_resource", "sys_time", "sys_tty_config", "mknod",
	"lease", "audit_write", "audit_control", "setfcap", "mac_override", "mac_admin", "syslog",
	"wake_alarm", "block_suspend", "audit_read", "perfmon", "bpf", "checkpoint_restore",
}

// capNumber is the number of the capability named n (normCap'd), or -1.
func capNumber(n string) int { return slices.Index(capNames, n) }

func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the config object")
	}
	return nil
}
