// Package cni gives allocations their own network namespace and sets it
// up with CNI plugins, invoked as the CNI specification says: the plugin
// binary run with CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME,
// CNI_ARGS and CNI_PATH in its environment and its network config on
// stdin, its result (or error) as JSON on stdout.
//
// Each namespace is pinned by a bind mount at <dir>/<alloc id>, and next to
// it <dir>/<alloc id>.json records what was asked of the plugins (written
// before the first ADD) and what they answered: a client that crashed at
// any point tears the namespace down (CNI DEL with the cached result, in
// reverse order, then the mount) or adopts it, from that record alone.
package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Defaults, as Nomad's.
const (
	DefaultBridgeName = "nomad"
	DefaultSubnet     = "172.26.64.0/20"
	DefaultCNIPath    = "/opt/cni/bin"
	// DebianCNIPath is where Debian's containernetworking-plugins puts
	// the plugins; searched after DefaultCNIPath when cni_path is unset.
	DebianCNIPath = "/usr/lib/cni"
	// DefaultConfigDir is Nomad's cni_config_dir.
	DefaultConfigDir = "/opt/cni/config"
	// IfName is the interface the allocation sees.
	IfName = "eth0"
	// AdminChain is the iptables chain the firewall plugin jumps to
	// first; the client accepts forwarding to the bridge's subnet there.
	AdminChain = "NOMAD-ADMIN"

	cniVersion = "1.0.0"
	// maxOutput bounds what a plugin may print.
	maxOutput = 1 << 20
	// maxConfigBytes bounds a config file read from cni_config_dir.
	maxConfigBytes = 1 << 20
	// pluginTimeout bounds one plugin run.
	pluginTimeout = 2 * time.Minute
)

// Modes (structs' network modes, repeated: this package imports no core
// package but its own).
const (
	ModeBridge    = "bridge"
	ModeNone      = "none"
	ModeCNIPrefix = "cni/"
)

// Config is the client's networking configuration.
type Config struct {
	// CNIPath is the plugin search path (colon-separated); empty
	// searches DefaultCNIPath then DebianCNIPath.
	CNIPath string
	// ConfigDir holds the network configs "cni/<name>" modes name.
	ConfigDir string
	// BridgeName and Subnet configure bridge mode.
	BridgeName string
	Subnet     string
	// Dir holds the pinned namespaces and their records.
	Dir    string
	Logger hclog.Logger
}

// PortMapping is a host port forwarded to a port inside the namespace.
type PortMapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// Request is what an allocation asks for.
type Request struct {
	AllocID string
	// Mode is "bridge", "none" or "cni/<name>".
	Mode  string
	Ports []PortMapping
	// Args are the network's cni block args, added to CNI_ARGS.
	Args map[string]string
}

// DNS is the resolver configuration a plugin returned.
type DNS struct {
	Servers  []string `json:",omitempty"`
	Searches []string `json:",omitempty"`
	Options  []string `json:",omitempty"`
}

// Status is the allocation's address in its namespace, as Nomad's
// AllocNetworkStatus reports it.
type Status struct {
	InterfaceName string
	Address       string
	DNS           *DNS `json:",omitempty"`
}

// Network is a set-up namespace.
type Network struct {
	// Path is the pinned namespace, for tasks to join.
	Path   string
	Status Status
}

// record is <alloc id>.json.
type record struct {
	AllocID string `json:"alloc_id"`
	Mode    string `json:"mode"`
	Netns   string `json:"netns"`
	// Lists are the networks in setup order, each a conflist with the
	// runtime config and args it got.
	Lists []*invocation `json:"lists"`
	// Done: every ADD succeeded.
	Done   bool   `json:"done"`
	Status Status `json:"status"`
}

type invocation struct {
	IfName  string          `json:"ifname"`
	List    json.RawMessage `json:"list"`
	Runtime map[string]any  `json:"runtime,omitempty"`
	Args    string          `json:"args"`
	// Result is the last plugin's ADD result (prevResult for DEL).
	Result json.RawMessage `json:"result,omitempty"`
	// Isolated are host-side bridge ports set isolated.
	Isolated []string `json:"isolated,omitempty"`
}

// Manager sets up and tears down allocations' namespaces.
type Manager struct {
	cfg    Config
	logger hclog.Logger
	paths  []string
	mu     sync.Mutex // serializes setups and teardowns
}

// New checks cfg and returns a Manager. It fails when this node cannot
// make network namespaces (not root, not Linux).
func New(cfg Config) (*Manager, error) {
	if cfg.BridgeName == "" {
		cfg.BridgeName = DefaultBridgeName
	}
	if cfg.Subnet == "" {
		cfg.Subnet = DefaultSubnet
	}
	if cfg.ConfigDir == "" {
		cfg.ConfigDir = DefaultConfigDir
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if err := ValidateBridge(cfg.BridgeName, cfg.Subnet); err != nil {
		return nil, err
	}
	if cfg.Dir == "" || !filepath.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("cni: the namespace directory must be an absolute path, got %q", cfg.Dir)
	}
	if err := supported(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("cni: %w", err)
	}
	m := &Manager{cfg: cfg, logger: cfg.Logger.Named("cni"), paths: SearchPath(cfg.CNIPath)}
	return m, nil
}

// SearchPath is the plugin directories cni_path names (DefaultCNIPath and
// DebianCNIPath when it is empty).
func SearchPath(cniPath string) []string {
	if cniPath == "" {
		return []string{DefaultCNIPath, DebianCNIPath}
	}
	var out []string
	for _, p := range filepath.SplitList(cniPath) {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ValidateBridge checks bridge_network_name and bridge_network_subnet.
func ValidateBridge(name, subnet string) error {
	if len(name) == 0 || len(name) > 15 {
		return fmt.Errorf("bridge_network_name %q must be 1 to 15 characters (a Linux interface name)", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("bridge_network_name %q may hold only letters, digits, '-', '_' and '.'", name)
		}
	}
	ip, n, err := net.ParseCIDR(subnet)
	if err != nil {
		return fmt.Errorf("bridge_network_subnet %q is not a CIDR: %v", subnet, err)
	}
	if ip.To4() == nil {
		return fmt.Errorf("bridge_network_subnet %q must be an IPv4 subnet", subnet)
	}
	if ones, _ := n.Mask.Size(); ones > 30 {
		return fmt.Errorf("bridge_network_subnet %q is too small: at most a /30", subnet)
	}
	return nil
}

// Available says why mode cannot be served here (plugins or the named
// config missing), or nil.
func (m *Manager) Available(mode string) error {
	switch {
	case mode == ModeNone:
		_, err := m.find("loopback")
		return err
	case mode == ModeBridge:
		for _, p := range []string{"loopback", "bridge", "host-local", "firewall", "portmap"} {
			if _, err := m.find(p); err != nil {
				return err
			}
		}
		return nil
	case strings.HasPrefix(mode, ModeCNIPrefix):
		if _, err := m.loadNamed(strings.TrimPrefix(mode, ModeCNIPrefix)); err != nil {
			return err
		}
		_, err := m.find("loopback")
		return err
	}
	return fmt.Errorf("network mode %q has no namespace", mode)
}

// Modes lists the isolated modes this node serves: bridge and none when
// their plugins are found, and cni/<name> for each config in ConfigDir.
func (m *Manager) Modes() []string {
	var out []string
	for _, mode := range []string{ModeBridge, ModeNone} {
		if m.Available(mode) == nil {
			out = append(out, mode)
		}
	}
	lists, _ := m.configs()
	for name := range lists {
		out = append(out, ModeCNIPrefix+name)
	}
	sort.Strings(out)
	return out
}

// NetnsPath is where alloc's namespace is pinned.
func (m *Manager) NetnsPath(allocID string) string {
	return filepath.Join(m.cfg.Dir, allocID)
}

func (m *Manager) recordPath(allocID string) string {
	return filepath.Join(m.cfg.Dir, allocID+".json")
}

func validAllocID(id string) error {
	if id == "" || len(id) > 64 || strings.ContainsAny(id, "/\\.\x00") {
		return fmt.Errorf("cni: invalid allocation id %q", id)
	}
	return nil
}

// Setup gives req.AllocID its namespace, or adopts the one a previous
// client process set up completely. A failure tears down what was made.
func (m *Manager) Setup(ctx context.Context, req Request) (*Network, error) {
	if err := validAllocID(req.AllocID); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec, err := m.readRecord(req.AllocID); err == nil && rec.Done && rec.Mode == req.Mode && isNetns(rec.Netns) {
		m.logger.Info("adopted the allocation's network namespace", "alloc_id", req.AllocID, "netns", rec.Netns, "address", rec.Status.Address)
		return &Network{Path: rec.Netns, Status: rec.Status}, nil
	} else if err == nil {
		// Half made, or for another mode: start over.
		if err := m.teardownLocked(ctx, rec); err != nil {
			return nil, err
		}
	}
	lists, err := m.plan(req)
	if err != nil {
		return nil, err
	}
	rec := &record{AllocID: req.AllocID, Mode: req.Mode, Netns: m.NetnsPath(req.AllocID), Lists: lists}
	// Recorded before anything is made: a crash from here on is undone
	// by a teardown from this record.
	if err := m.writeRecord(rec); err != nil {
		return nil, err
	}
	net, err := m.setupLocked(ctx, rec)
	if err != nil {
		if terr := m.teardownLocked(context.WithoutCancel(ctx), rec); terr != nil {
			m.logger.Error("tear down a failed network setup", "alloc_id", req.AllocID, "error", terr)
		}
		return nil, err
	}
	m.logger.Info("allocation network set up", "alloc_id", req.AllocID, "mode", req.Mode, "netns", net.Path, "address", net.Status.Address)
	return net, nil
}

func (m *Manager) setupLocked(ctx context.Context, rec *record) (*Network, error) {
	if err := createNetns(rec.Netns); err != nil {
		return nil, err
	}
	for _, inv := range rec.Lists {
		res, err := m.addList(ctx, rec, inv)
		if err != nil {
			return nil, err
		}
		inv.Result = res
		if err := m.writeRecord(rec); err != nil {
			return nil, err
		}
		if inv.IfName == IfName {
			st, hostIfs, err := statusOf(res)
			if err != nil && rec.Mode == ModeBridge {
				return nil, err
			}
			if err != nil {
				// A named config may give no address (a plugin
				// that only tunes the interface): no status then.
				m.logger.Warn("the CNI network gives the allocation no address", "alloc_id", rec.AllocID, "mode", rec.Mode, "error", err)
			}
			rec.Status = st
			if rec.Mode == ModeBridge && !bridgeNetfilter(m.cfg.BridgeName) {
				if err := m.isolate(hostIfs, inv); err != nil {
					return nil, err
				}
			}
		}
	}
	if rec.Mode == ModeBridge {
		if err := m.acceptForwarding(ctx); err != nil {
			return nil, err
		}
	}
	rec.Done = true
	if err := m.writeRecord(rec); err != nil {
		return nil, err
	}
	return &Network{Path: rec.Netns, Status: rec.Status}, nil
}

// Teardown undoes alloc's namespace: CNI DEL of every network in reverse
// order, the namespace unpinned, the record removed. Nothing recorded is
// not an error.
func (m *Manager) Teardown(ctx context.Context, allocID string) error {
	if err := validAllocID(allocID); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, err := m.readRecord(allocID)
	if errors.Is(err, os.ErrNotExist) {
		// A namespace pinned without a record cannot be: the record
		// is written first. Unpin whatever is there anyway.
		return removeNetns(m.NetnsPath(allocID))
	}
	if err != nil {
		// An unreadable record: unpin the namespace, which takes the
		// allocation's interfaces with it.
		m.logger.Error("unreadable network record: removing the namespace only", "alloc_id", allocID, "error", err)
		if err := removeNetns(m.NetnsPath(allocID)); err != nil {
			return err
		}
		return os.Remove(m.recordPath(allocID))
	}
	return m.teardownLocked(ctx, rec)
}

func (m *Manager) teardownLocked(ctx context.Context, rec *record) error {
	var errs []error
	for i := len(rec.Lists) - 1; i >= 0; i-- {
		if err := m.delList(ctx, rec, rec.Lists[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		// Keep the record: a later teardown retries.
		return errors.Join(errs...)
	}
	if err := removeNetns(rec.Netns); err != nil {
		return err
	}
	if err := os.Remove(m.recordPath(rec.AllocID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	m.logger.Info("allocation network torn down", "alloc_id", rec.AllocID, "netns", rec.Netns)
	return nil
}

// Recorded lists the allocations that have a namespace or a record here.
func (m *Manager) Recorded() ([]string, error) {
	ents, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, e := range ents {
		id := strings.TrimSuffix(e.Name(), ".json")
		if validAllocID(id) != nil || seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// Sweep tears down every recorded namespace whose allocation keep does
// not want: those a crashed client left behind.
func (m *Manager) Sweep(ctx context.Context, keep func(allocID string) bool) error {
	ids, err := m.Recorded()
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if keep(id) {
			continue
		}
		m.logger.Info("tearing down the network of an allocation this client no longer runs", "alloc_id", id)
		if err := m.Teardown(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("alloc %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) readRecord(allocID string) (*record, error) {
	b, err := os.ReadFile(m.recordPath(allocID))
	if err != nil {
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("network record of %s: %w", allocID, err)
	}
	if rec.AllocID != allocID || rec.Netns != m.NetnsPath(allocID) {
		return nil, fmt.Errorf("network record of %s names another allocation or namespace", allocID)
	}
	return &rec, nil
}

func (m *Manager) writeRecord(rec *record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := m.recordPath(rec.AllocID) + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write the network record: %w", err)
	}
	_, werr := f.Write(b)
	if err := f.Sync(); werr == nil {
		werr = err
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr == nil {
		werr = os.Rename(tmp, m.recordPath(rec.AllocID))
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write the network record: %w", werr)
	}
	return nil
}

// plan builds the networks req needs: loopback, then the bridge conflist
// (bridge mode) or the named config (cni/<name>).
func (m *Manager) plan(req Request) ([]*invocation, error) {
	args := cniArgs(req.Args)
	lo, _ := json.Marshal(map[string]any{
		"cniVersion": cniVersion, "name": "drover-loopback",
		"plugins": []any{map[string]any{"type": "loopback"}},
	})
	out := []*invocation{{IfName: "lo", List: lo, Args: args}}
	runtime := map[string]any{}
	if len(req.Ports) > 0 {
		runtime["portMappings"] = req.Ports
	}
	switch {
	case req.Mode == ModeNone:
	case req.Mode == ModeBridge:
		out = append(out, &invocation{IfName: IfName, List: m.bridgeList(), Runtime: runtime, Args: args})
	case strings.HasPrefix(req.Mode, ModeCNIPrefix):
		list, err := m.loadNamed(strings.TrimPrefix(req.Mode, ModeCNIPrefix))
		if err != nil {
			return nil, err
		}
		out = append(out, &invocation{IfName: IfName, List: list, Runtime: runtime, Args: args})
	default:
		return nil, fmt.Errorf("network mode %q has no namespace", req.Mode)
	}
	return out, nil
}

// cniArgs is CNI_ARGS: IgnoreUnknown (plugins skip args they do not know)
// and the cni block's args, sorted.
func cniArgs(args map[string]string) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		if k != "IgnoreUnknown" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := []string{"IgnoreUnknown=true"}
	for _, k := range keys {
		parts = append(parts, k+"="+args[k])
	}
	return strings.Join(parts, ";")
}

// bridgeList is the bridge network as Nomad configures it: the bridge
// plugin (gateway, masquerade, hairpin) with host-local addresses from
// the subnet, the firewall plugin (its admin chain NOMAD-ADMIN) and
// portmap for the mapped ports.
func (m *Manager) bridgeList() json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"cniVersion": cniVersion,
		"name":       m.cfg.BridgeName,
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": m.cfg.BridgeName,
				"ipMasq": true, "isGateway": true, "forceAddress": true, "hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": [][]map[string]string{{{"subnet": m.cfg.Subnet}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "firewall", "backend": "iptables", "iptablesAdminChainName": AdminChain},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}, "snat": true},
		},
	})
	return b
}

// configs reads ConfigDir: every *.conflist, *.conf and *.json by its
// network name (a single-plugin .conf becomes a one-plugin list).
func (m *Manager) configs() (map[string]json.RawMessage, error) {
	ents, err := os.ReadDir(m.cfg.ConfigDir)
	if err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	for _, e := range ents {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".conflist" && ext != ".conf" && ext != ".json") {
			continue
		}
		list, name, err := readConfig(filepath.Join(m.cfg.ConfigDir, e.Name()))
		if err != nil {
			m.logger.Warn("skipping a CNI config", "file", e.Name(), "error", err)
			continue
		}
		if _, dup := out[name]; !dup {
			out[name] = list
		}
	}
	return out, nil
}

func (m *Manager) loadNamed(name string) (json.RawMessage, error) {
	lists, err := m.configs()
	if err != nil {
		return nil, fmt.Errorf("network mode \"cni/%s\": read cni_config_dir: %w", name, err)
	}
	list, ok := lists[name]
	if !ok {
		return nil, fmt.Errorf("network mode \"cni/%s\": no CNI network config named %q in cni_config_dir %s", name, name, m.cfg.ConfigDir)
	}
	return list, nil
}

func readConfig(path string) (json.RawMessage, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, "", err
	}
	if len(b) > maxConfigBytes {
		return nil, "", fmt.Errorf("larger than %d bytes", maxConfigBytes)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, "", err
	}
	name, _ := doc["name"].(string)
	if name == "" {
		return nil, "", errors.New("no network name")
	}
	if _, ok := doc["plugins"]; !ok {
		// A single plugin's config: wrap it in a list.
		plugin := map[string]any{}
		for k, v := range doc {
			if k != "name" && k != "cniVersion" {
				plugin[k] = v
			}
		}
		doc = map[string]any{"cniVersion": doc["cniVersion"], "name": name, "plugins": []any{plugin}}
	}
	plugins, ok := doc["plugins"].([]any)
	if !ok || len(plugins) == 0 {
		return nil, "", errors.New("plugins must be a non-empty list")
	}
	for i, p := range plugins {
		pm, ok := p.(map[string]any)
		if !ok {
			return nil, "", fmt.Errorf("plugins[%d] is not an object", i)
		}
		if t, _ := pm["type"].(string); t == "" || strings.ContainsAny(t, "/\\") {
			return nil, "", fmt.Errorf("plugins[%d] has no valid type", i)
		}
	}
	out, err := json.Marshal(doc)
	return out, name, err
}

// find locates a plugin binary on the search path.
func (m *Manager) find(plugin string) (string, error) {
	if plugin == "" || strings.ContainsAny(plugin, "/\\") {
		return "", fmt.Errorf("invalid CNI plugin type %q", plugin)
	}
	for _, dir := range m.paths {
		p := filepath.Join(dir, plugin)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: CNI plugin %q not found in cni_path %s", errPluginMissing, plugin, strings.Join(m.paths, ":"))
}

// errPluginMissing: no binary for a plugin type on the search path.
var errPluginMissing = errors.New("plugin missing")

// pluginConfs turns a conflist into each plugin's own network config.
func pluginConfs(list json.RawMessage) (name, version string, plugins []map[string]any, err error) {
	var doc struct {
		CNIVersion string           `json:"cniVersion"`
		Name       string           `json:"name"`
		Plugins    []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(list, &doc); err != nil {
		return "", "", nil, err
	}
	if doc.CNIVersion == "" {
		doc.CNIVersion = cniVersion
	}
	return doc.Name, doc.CNIVersion, doc.Plugins, nil
}

// conf is one plugin's stdin: its config with the list's name and
// version, the runtime config for the capabilities it declares, and the
// previous result.
func conf(name, version string, p map[string]any, runtime map[string]any, prev json.RawMessage) ([]byte, error) {
	c := make(map[string]any, len(p)+4)
	for k, v := range p {
		c[k] = v
	}
	c["name"], c["cniVersion"] = name, version
	if caps, ok := p["capabilities"].(map[string]any); ok {
		rc := map[string]any{}
		for k, on := range caps {
			if b, _ := on.(bool); b {
				if v, ok := runtime[k]; ok {
					rc[k] = v
				}
			}
		}
		if len(rc) > 0 {
			c["runtimeConfig"] = rc
		}
	}
	if len(prev) > 0 {
		c["prevResult"] = prev
	}
	return json.Marshal(c)
}

func (m *Manager) addList(ctx context.Context, rec *record, inv *invocation) (json.RawMessage, error) {
	name, version, plugins, err := pluginConfs(inv.List)
	if err != nil {
		return nil, fmt.Errorf("network %s: %w", name, err)
	}
	var prev json.RawMessage
	for _, p := range plugins {
		typ, _ := p["type"].(string)
		stdin, err := conf(name, version, p, inv.Runtime, prev)
		if err != nil {
			return nil, err
		}
		out, err := m.exec(ctx, "ADD", typ, rec, inv, stdin)
		if err != nil {
			return nil, fmt.Errorf("network %q: plugin %s: ADD: %w", name, typ, err)
		}
		prev = out
		if len(plugins) > 1 {
			// The result so far is what a teardown of a list cut
			// short hands the plugins' DEL (their addresses, rules).
			inv.Result = out
			if err := m.writeRecord(rec); err != nil {
				return nil, err
			}
		}
	}
	return prev, nil
}

func (m *Manager) delList(ctx context.Context, rec *record, inv *invocation) error {
	name, version, plugins, err := pluginConfs(inv.List)
	if err != nil {
		return fmt.Errorf("network %s: %w", name, err)
	}
	var errs []error
	for i := len(plugins) - 1; i >= 0; i-- {
		typ, _ := plugins[i]["type"].(string)
		stdin, err := conf(name, version, plugins[i], inv.Runtime, inv.Result)
		if err != nil {
			return err
		}
		if _, err := m.exec(ctx, "DEL", typ, rec, inv, stdin); errors.Is(err, errPluginMissing) {
			// Nothing can undo what it made (if it ran at all): the
			// teardown goes on rather than retry forever.
			m.logger.Warn("CNI plugin missing at teardown; skipped", "alloc_id", rec.AllocID, "plugin", typ)
		} else if err != nil {
			errs = append(errs, fmt.Errorf("network %q: plugin %s: DEL: %w", name, typ, err))
		}
	}
	return errors.Join(errs...)
}

// pluginError is the CNI error a plugin prints.
type pluginError struct {
	Code    int    `json:"code"`
	Msg     string `json:"msg"`
	Details string `json:"details"`
}

// exec runs one plugin command.
func (m *Manager) exec(ctx context.Context, command, typ string, rec *record, inv *invocation, stdin []byte) (json.RawMessage, error) {
	bin, err := m.find(typ)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, pluginTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = []string{
		"CNI_COMMAND=" + command,
		"CNI_CONTAINERID=" + rec.AllocID,
		"CNI_NETNS=" + rec.Netns,
		"CNI_IFNAME=" + inv.IfName,
		"CNI_ARGS=" + inv.Args,
		"CNI_PATH=" + strings.Join(m.paths, string(os.PathListSeparator)),
		// The firewall and portmap plugins run iptables.
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	}
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = maxOutput, 64<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if runErr != nil {
		var pe pluginError
		if json.Unmarshal(stdout.Bytes(), &pe) == nil && pe.Msg != "" {
			msg := pe.Msg
			if pe.Details != "" {
				msg += ": " + pe.Details
			}
			return nil, fmt.Errorf("%s (code %d)", msg, pe.Code)
		}
		return nil, fmt.Errorf("%v: %s", runErr, strings.TrimSpace(stderr.String()))
	}
	if command != "ADD" {
		return nil, nil
	}
	out := bytes.TrimSpace(stdout.Bytes())
	if stdout.over || !json.Valid(out) {
		return nil, errors.New("the plugin printed no valid result")
	}
	return json.RawMessage(out), nil
}

type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.over = true
		b.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// result is the part of a CNI result read here.
type result struct {
	Interfaces []struct {
		Name    string `json:"name"`
		Sandbox string `json:"sandbox"`
	} `json:"interfaces"`
	IPs []struct {
		Address   string `json:"address"`
		Interface *int   `json:"interface"`
	} `json:"ips"`
	DNS struct {
		Nameservers []string `json:"nameservers"`
		Domain      string   `json:"domain"`
		Search      []string `json:"search"`
		Options     []string `json:"options"`
	} `json:"dns"`
}

// statusOf reads the allocation's address (the first address on an
// interface in the namespace) and the host-side interfaces from a result.
func statusOf(raw json.RawMessage) (Status, []string, error) {
	var r result
	if err := json.Unmarshal(raw, &r); err != nil {
		return Status{}, nil, fmt.Errorf("read the CNI result: %w", err)
	}
	var st Status
	for _, ip := range r.IPs {
		if ip.Interface == nil || *ip.Interface < 0 || *ip.Interface >= len(r.Interfaces) || r.Interfaces[*ip.Interface].Sandbox == "" {
			continue
		}
		addr, _, err := net.ParseCIDR(ip.Address)
		if err != nil {
			continue
		}
		st.InterfaceName, st.Address = r.Interfaces[*ip.Interface].Name, addr.String()
		break
	}
	if st.Address == "" {
		return Status{}, nil, errors.New("the CNI result gives the allocation no address")
	}
	if len(r.DNS.Nameservers) > 0 {
		st.DNS = &DNS{Servers: r.DNS.Nameservers, Searches: r.DNS.Search, Options: r.DNS.Options}
		if r.DNS.Domain != "" && len(st.DNS.Searches) == 0 {
			st.DNS.Searches = []string{r.DNS.Domain}
		}
	}
	var host []string
	for _, i := range r.Interfaces {
		if i.Sandbox == "" {
			host = append(host, i.Name)
		}
	}
	return st, host, nil
}

// Allocations on the bridge reach each other only through mapped ports,
// never directly. Where bridged traffic passes iptables (br_netfilter),
// the admin chain drops what goes from the bridge to the bridge unless
// it was DNATed by a port mapping (isolating the ports would drop those
// too: br_netfilter bridges a DNATed packet to its new destination).
// Elsewhere the allocation's bridge port is isolated: isolated ports do
// not forward to one another, and a mapped port's traffic comes from the
// host, which is no port.

// bridgeNetfilter reports whether bridged traffic of the bridge passes
// iptables, asking br_netfilter for it on this bridge where the module
// is loaded.
func bridgeNetfilter(bridge string) bool {
	if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err != nil {
		return false
	}
	p := filepath.Join("/sys/class/net", bridge, "bridge", "nf_call_iptables")
	if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == "1" {
		return true
	}
	if err := os.WriteFile(p, []byte("1"), 0); err == nil {
		return true
	}
	b, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// isolate marks the allocation's ports of the bridge isolated.
func (m *Manager) isolate(hostIfs []string, inv *invocation) error {
	for _, name := range hostIfs {
		if name == m.cfg.BridgeName || strings.ContainsAny(name, "/\\") || name == "" || name == "." || name == ".." {
			continue
		}
		p := filepath.Join("/sys/class/net", name, "brport", "isolated")
		if _, err := os.Stat(p); err != nil {
			continue // not a port of a bridge
		}
		if err := os.WriteFile(p, []byte("1"), 0); err != nil {
			return fmt.Errorf("isolate the allocation's bridge port %s: %w", name, err)
		}
		inv.Isolated = append(inv.Isolated, name)
	}
	return nil
}

// acceptForwarding lets connections to the bridge's subnet through the
// firewall plugin's admin chain (as Nomad does), so that mapped ports are
// reachable from other hosts even where FORWARD's policy drops (Docker
// sets it so); before it, where br_netfilter applies, the rule that keeps
// allocations from reaching each other but through mapped ports. The
// rules belong to the node, not to one allocation: they stay, like the
// bridge.
func (m *Manager) acceptForwarding(ctx context.Context) error {
	br := m.cfg.BridgeName
	isolation := []string{AdminChain, "-i", br, "-o", br, "-m", "conntrack", "!", "--ctstate", "DNAT", "-j", "DROP"}
	rule := []string{AdminChain, "-o", br, "-d", m.cfg.Subnet, "-j", "ACCEPT"}
	ipt := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "iptables", append([]string{"-w", "-t", "filter"}, args...)...)
		cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	if bridgeNetfilter(br) && ipt(append([]string{"-C"}, isolation...)...) != nil {
		if err := ipt(append([]string{"-I", AdminChain, "1"}, isolation[1:]...)...); err != nil {
			return err
		}
	}
	if ipt(append([]string{"-C"}, rule...)...) == nil {
		return nil
	}
	return ipt(append([]string{"-A"}, rule...)...)
}
