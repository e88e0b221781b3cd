package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"

	"github.com/drover-org/drover/sdk/driver"
)

// ConfigEnvVar carries the plugin config (the agent's `plugin "docker" {
// config { … } }` stanza, as JSON) to the plugin process at launch, once
// the agent has had the plugin check it (ValidateConfig). The built-in is
// launched by the agent, which sets it; a standalone build reads the same
// variable.
const ConfigEnvVar = "DROVER_DOCKER_PLUGIN_CONFIG"

// defaultCaps is what Nomad's allow_caps defaults to: Docker's default
// capability set without net_raw. A task may drop any capability but add
// only these unless the operator allows more.
var defaultCaps = []string{
	"audit_write", "chown", "dac_override", "fowner", "fsetid", "kill", "mknod",
	"net_bind_service", "setfcap", "setgid", "setpcap", "setuid", "sys_chroot",
}

// engineDefaultCaps is the set the engine grants a container unless told
// otherwise; what allow_caps leaves out of it is dropped.
var engineDefaultCaps = append(slices.Clone(defaultCaps), "net_raw")

// PluginConfig is the driver's configuration, Nomad's names.
type PluginConfig struct {
	// Endpoint is the engine's address; empty uses DOCKER_HOST or the
	// default unix socket.
	Endpoint        string    `json:"endpoint"`
	AllowPrivileged bool      `json:"allow_privileged"`
	AllowCaps       []string  `json:"allow_caps"`
	GC              GCConfig  `json:"gc"`
	Volumes         VolConfig `json:"volumes"`
	// EngineOutageTimeout bounds how long a running task's container is
	// still tracked while the engine does not answer (a drover extension;
	// default "10m"). Past it the task ends with an error, so its restart
	// policy and rescheduling can move the work; its container is removed
	// when the engine answers again.
	EngineOutageTimeout string `json:"engine_outage_timeout"`

	NomadPluginFields

	engineOutage time.Duration
}

// defaultEngineOutage is engine_outage_timeout's default: far longer than
// an engine restart or upgrade takes, short enough that a service on a
// node whose engine died moves elsewhere within minutes.
const defaultEngineOutage = 10 * time.Minute

// GCConfig says what DestroyTask removes.
type GCConfig struct {
	// Image removes an image once no task uses it for ImageDelay.
	Image      *bool  `json:"image"`
	ImageDelay string `json:"image_delay"`
	// Container removes a task's container when the task is destroyed.
	Container *bool `json:"container"`
	// DanglingContainers is Nomad's reaper of containers it lost track
	// of; accepted and warned about (drover's driver adopts or removes a
	// task's leftover container at its next start).
	DanglingContainers json.RawMessage `json:"dangling_containers"`

	imageDelay time.Duration
}

// VolConfig governs host volumes in task configs.
type VolConfig struct {
	// Enabled allows `volumes` and bind mounts whose source lies outside
	// the task's directory. Nomad defaults it to false.
	Enabled bool `json:"enabled"`
	// SELinuxLabel is Nomad's; accepted and warned about.
	SELinuxLabel string `json:"selinuxlabel"`
}

// gcImage and gcContainer default to true, as Nomad's.
func (g GCConfig) gcImage() bool     { return g.Image == nil || *g.Image }
func (g GCConfig) gcContainer() bool { return g.Container == nil || *g.Container }

// ParsePluginConfig decodes the plugin config strictly and applies
// Nomad's defaults. Empty input is the default config.
func ParsePluginConfig(raw []byte) (*PluginConfig, error) {
	var cfg PluginConfig
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := decodeStrict(raw, &cfg); err != nil {
			return nil, fmt.Errorf("docker plugin config: %w", err)
		}
	}
	if cfg.GC.ImageDelay == "" {
		cfg.GC.imageDelay = 3 * time.Minute
	} else {
		d, err := time.ParseDuration(cfg.GC.ImageDelay)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("docker plugin config: gc.image_delay %q must be a non-negative duration such as \"3m\"", cfg.GC.ImageDelay)
		}
		cfg.GC.imageDelay = d
	}
	cfg.engineOutage = defaultEngineOutage
	if cfg.EngineOutageTimeout != "" {
		d, err := time.ParseDuration(cfg.EngineOutageTimeout)
		if err != nil || d < time.Second {
			return nil, fmt.Errorf("docker plugin config: engine_outage_timeout %q must be a duration of at least 1s such as \"10m\"", cfg.EngineOutageTimeout)
		}
		cfg.engineOutage = d
	}
	if cfg.Endpoint != "" && !strings.HasPrefix(cfg.Endpoint, "unix://") &&
		!strings.HasPrefix(cfg.Endpoint, "tcp://") && !strings.HasPrefix(cfg.Endpoint, "http://") {
		return nil, fmt.Errorf("docker plugin config: endpoint %q must start with unix://, tcp:// or http://", cfg.Endpoint)
	}
	if cfg.AllowCaps == nil {
		cfg.AllowCaps = slices.Clone(defaultCaps)
	}
	if err := cfg.checkNomadPluginFields(); err != nil {
		return nil, fmt.Errorf("docker plugin config: %w", err)
	}
	for i, c := range cfg.AllowCaps {
		cfg.AllowCaps[i] = normCap(c)
		if cfg.AllowCaps[i] == "" {
			return nil, fmt.Errorf("docker plugin config: allow_caps[%d] is empty", i)
		}
	}
	return &cfg, nil
}

// normCap lower-cases a capability name and drops a "CAP_" prefix, so
// "CAP_NET_ADMIN", "NET_ADMIN" and "net_admin" compare equal.
func normCap(c string) string {
	c = strings.ToLower(strings.TrimSpace(c))
	return strings.TrimPrefix(c, "cap_")
}

// TaskConfig is the jobspec task `config` block of a docker task, with
// Nomad's names.
type TaskConfig struct {
	Image       string            `json:"image"`
	Command     string            `json:"command"`
	Args        []string          `json:"args"`
	Entrypoint  []string          `json:"entrypoint"`
	WorkDir     string            `json:"work_dir"`
	Volumes     []string          `json:"volumes"`
	Mounts      oneOrMany[Mount]  `json:"mount"`
	Labels      map[string]string `json:"labels"`
	Privileged  bool              `json:"privileged"`
	NetworkMode string            `json:"network_mode"`
	ForcePull   bool              `json:"force_pull"`
	// ImagePullTimeout bounds a pull ("5m", Nomad's default, when unset).
	ImagePullTimeout string             `json:"image_pull_timeout"`
	Auth             oneOrMany[Auth]    `json:"auth"`
	Logging          oneOrMany[Logging] `json:"logging"`
	Hostname         string             `json:"hostname"`
	ExtraHosts       []string           `json:"extra_hosts"`
	DNSServers       []string           `json:"dns_servers"`
	CapAdd           []string           `json:"cap_add"`
	CapDrop          []string           `json:"cap_drop"`
	IPCMode          string             `json:"ipc_mode"`
	PIDMode          string             `json:"pid_mode"`
	// Ports are labels of the group's network block whose host ports are
	// forwarded to the container (to the port's `to`, else the same port).
	Ports []string `json:"ports"`

	NomadFields
}

// Mount is a `mount { … }` block: a bind mount (the default), a named
// volume, or a tmpfs.
type Mount struct {
	Type     string `json:"type"`
	Source   string `json:"source"`
	Target   string `json:"target"`
	Readonly bool   `json:"readonly"`
	MountOptions
}

// Auth is the registry credential of an `auth { … }` block. It is never
// logged: String hides the password.
type Auth struct {
	Username string `json:"username"`
	Password string `json:"password"`
	// Email is accepted for Nomad's configs; registries no longer take it.
	Email         string `json:"email"`
	ServerAddress string `json:"server_address"`
}

// String implements fmt.Stringer without the password.
func (a Auth) String() string {
	return fmt.Sprintf("auth{username=%q server=%q}", a.Username, a.ServerAddress)
}

// GoString implements fmt.GoStringer, so %#v hides it too.
func (a Auth) GoString() string { return a.String() }

// Logging is the container's `logging { type, config }` block.
type Logging struct {
	Type string `json:"type"`
	// Driver is Nomad's older name for Type.
	Driver string                       `json:"driver"`
	Config oneOrMany[map[string]string] `json:"config"`
}

// driverType is the log driver: type, else the older driver.
func (l Logging) driverType() string {
	if l.Type != "" {
		return l.Type
	}
	return l.Driver
}

// options are the log driver's options, the config blocks merged.
func (l Logging) options() map[string]string {
	var out map[string]string
	for _, c := range l.Config {
		for k, v := range c {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// oneOrMany decodes a config block that appears once (an object) or
// repeatedly (a list of objects), as the jobspec encodes blocks.
type oneOrMany[T any] []T

func (o *oneOrMany[T]) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var list []json.RawMessage
		if err := json.Unmarshal(b, &list); err != nil {
			return err
		}
		out := make([]T, 0, len(list))
		for _, raw := range list {
			var v T
			if err := decodeStrict(raw, &v); err != nil {
				return err
			}
			out = append(out, v)
		}
		*o = out
		return nil
	}
	var v T
	if err := decodeStrict(b, &v); err != nil {
		return err
	}
	*o = []T{v}
	return nil
}

func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return prettyJSONErr(err)
	}
	return nil
}

// prettyJSONErr names the offending field the way a jobspec author wrote
// it, rather than Go's type names.
func prettyJSONErr(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%s: must be %s, got %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	if s := err.Error(); strings.HasPrefix(s, "json: unknown field ") {
		return fmt.Errorf("unknown field %s", strings.TrimPrefix(s, "json: unknown field "))
	}
	return err
}

func jsonKind(k string) string {
	switch k {
	case "slice":
		return "a list"
	case "map", "struct":
		return "an object"
	case "bool":
		return "a bool"
	case "string":
		return "a string"
	}
	return "a " + k
}

// parseTaskConfig decodes config_json strictly and checks it against the
// plugin config. Every error wraps driver.ErrInvalidConfig and names the
// field and the rule it breaks.
func parseTaskConfig(raw []byte, pc *PluginConfig) (*TaskConfig, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: config: %s", driver.ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	var tc TaskConfig
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, bad("image is required")
	}
	if err := decodeStrict(raw, &tc); err != nil {
		return nil, bad("%v", err)
	}
	if strings.TrimSpace(tc.Image) == "" {
		return nil, bad("image is required")
	}
	if _, err := reference.ParseNormalizedNamed(tc.Image); err != nil {
		return nil, bad("image %q is not a valid image reference: %v", tc.Image, err)
	}
	if tc.ImagePullTimeout != "" {
		d, err := time.ParseDuration(tc.ImagePullTimeout)
		if err != nil || d <= 0 {
			return nil, bad("image_pull_timeout %q must be a positive duration such as \"5m\"", tc.ImagePullTimeout)
		}
	}
	if tc.Privileged && !pc.AllowPrivileged {
		return nil, bad("privileged is refused: the docker plugin config does not set allow_privileged = true")
	}
	if tc.WorkDir != "" && !filepath.IsAbs(tc.WorkDir) {
		return nil, bad("work_dir %q must be an absolute path inside the container", tc.WorkDir)
	}
	if len(tc.Auth) > 1 {
		return nil, bad("auth may be given once, got %d blocks", len(tc.Auth))
	}
	if len(tc.Logging) > 1 {
		return nil, bad("logging may be given once, got %d blocks", len(tc.Logging))
	}
	tc.Mounts = append(tc.Mounts, tc.LegacyMounts...)
	tc.LegacyMounts = nil
	for i, m := range tc.Mounts {
		switch m.Type {
		case "", "bind", "volume":
			if m.Source == "" {
				return nil, bad("mount[%d].source is required", i)
			}
		case "tmpfs":
		default:
			return nil, bad("mount[%d].type %q must be \"bind\", \"volume\" or \"tmpfs\"", i, m.Type)
		}
		if !filepath.IsAbs(m.Target) {
			return nil, bad("mount[%d].target %q must be an absolute path inside the container", i, m.Target)
		}
	}
	for i, v := range tc.Volumes {
		if _, err := parseVolume(v); err != nil {
			return nil, bad("volumes[%d]: %v", i, err)
		}
	}
	for i, h := range tc.ExtraHosts {
		if name, addr, ok := strings.Cut(h, ":"); !ok || name == "" || addr == "" {
			return nil, bad("extra_hosts[%d] %q must be \"hostname:IP\"", i, h)
		}
	}
	for i, c := range tc.CapAdd {
		n := normCap(c)
		if !slices.Contains(pc.AllowCaps, n) && !slices.Contains(pc.AllowCaps, "all") {
			return nil, bad("cap_add[%d] %q is not in the docker plugin's allow_caps (%s)", i, c, strings.Join(pc.AllowCaps, ", "))
		}
	}
	for i, c := range tc.CapDrop {
		if normCap(c) == "" {
			return nil, bad("cap_drop[%d] is empty", i)
		}
	}
	for _, m := range []struct{ field, v string }{{"ipc_mode", tc.IPCMode}, {"pid_mode", tc.PIDMode}} {
		if m.v != "" && m.v != "host" && !strings.HasPrefix(m.v, "container:") && m.v != "private" && m.v != "shareable" && m.v != "none" {
			return nil, bad("%s %q must be \"host\", \"private\", \"shareable\", \"none\" or \"container:<id>\"", m.field, m.v)
		}
	}
	if err := tc.checkNomadFields(); err != nil {
		return nil, err
	}
	if tc.Runtime != "" && !slices.Contains(pc.AllowRuntimes, tc.Runtime) {
		return nil, bad("runtime %q is not in the docker plugin's allow_runtimes (%s)", tc.Runtime, strings.Join(pc.AllowRuntimes, ", "))
	}
	if pc.PidsLimit > 0 && tc.PidsLimit > pc.PidsLimit {
		return nil, bad("pids_limit %d is above the docker plugin's pids_limit %d", tc.PidsLimit, pc.PidsLimit)
	}
	if (tc.IPCMode == "host" || tc.PIDMode == "host") && !pc.AllowPrivileged {
		return nil, bad("ipc_mode/pid_mode \"host\" is refused: the docker plugin config does not set allow_privileged = true")
	}
	return &tc, nil
}

// volume is one parsed "host:container[:ro]" entry.
type volume struct {
	host, container string
	readonly        bool
}

func parseVolume(s string) (volume, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return volume{}, fmt.Errorf("%q must be \"host_path:container_path\" or \"host_path:container_path:ro\"", s)
	}
	v := volume{host: parts[0], container: parts[1]}
	if v.host == "" {
		return volume{}, fmt.Errorf("%q has an empty host path", s)
	}
	if !filepath.IsAbs(v.container) {
		return volume{}, fmt.Errorf("%q: container path must be absolute", s)
	}
	if len(parts) == 3 {
		switch parts[2] {
		case "ro":
			v.readonly = true
		case "rw":
		default:
			return volume{}, fmt.Errorf("%q: mode %q must be \"ro\" or \"rw\"", s, parts[2])
		}
	}
	return v, nil
}

// ValidateConfig implements driver.ConfigValidator: raw is accepted when
// ParsePluginConfig takes it, as the plugin would at start.
func (d *Driver) ValidateConfig(_ context.Context, raw []byte) error {
	_, err := ParsePluginConfig(raw)
	return driver.InvalidPluginConfig(err)
}

var _ driver.ConfigValidator = (*Driver)(nil)
