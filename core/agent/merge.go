package agent

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// LoadConfig builds the agent config as Nomad does: the -dev defaults (or
// none), then every -config path in order, each a file or a directory of
// *.hcl and *.json files read in name order, later values overriding earlier ones.
// Defaults are filled in afterwards; the caller applies its flags and then
// calls Validate.
func LoadConfig(dev bool, paths ...string) (*Config, error) {
	cfg := &Config{}
	if dev {
		cfg = DevConfig()
	}
	for _, path := range paths {
		files, err := configFiles(path)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			frag, err := parseConfigFragment(f, src)
			if err != nil {
				return nil, err
			}
			cfg = cfg.Merge(frag)
		}
	}
	cfg.DevMode = dev
	cfg.applyDefaults()
	return cfg, nil
}

func configFiles(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".hcl") || strings.HasSuffix(e.Name(), ".json")) {
			out = append(out, filepath.Join(path, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("config directory %s holds no .hcl or .json file", path)
	}
	return out, nil
}

// Merge returns c overlaid with o: o's set values win, a boolean is on if
// either turns it on, maps merge by key, client.servers accumulate (as in
// Nomad) and a plugin stanza replaces the one of the same name. Neither
// input is changed.
func (c *Config) Merge(o *Config) *Config {
	r := *c
	str(&r.Region, o.Region)
	str(&r.Datacenter, o.Datacenter)
	str(&r.NodeName, o.NodeName)
	str(&r.DataDir, o.DataDir)
	str(&r.BindAddr, o.BindAddr)
	str(&r.LogLevel, o.LogLevel)
	str(&r.PluginDir, o.PluginDir)
	if o.HTTPMaxBodyBytes != 0 {
		r.HTTPMaxBodyBytes = o.HTTPMaxBodyBytes
	}
	r.LogJSON = r.LogJSON || o.LogJSON
	r.EnableDebug = r.EnableDebug || o.EnableDebug
	r.DevMode = r.DevMode || o.DevMode
	r.Ports = mergePorts(c.Ports, o.Ports)
	r.Advertise = mergeAdvertise(c.Advertise, o.Advertise)
	r.Server = mergeServer(c.Server, o.Server)
	r.Client = mergeClient(c.Client, o.Client)
	r.TLS = mergeTLS(c.TLS, o.TLS)
	r.ACL = mergeACL(c.ACL, o.ACL)
	r.Telemetry = mergeTelemetry(c.Telemetry, o.Telemetry)
	r.Autopilot = mergeAutopilot(c.Autopilot, o.Autopilot)
	r.Origins = maps.Clone(c.Origins)
	if len(o.Origins) > 0 && r.Origins == nil {
		r.Origins = map[string]string{}
	}
	maps.Copy(r.Origins, o.Origins)
	r.Warnings = append(slices.Clone(c.Warnings), o.Warnings...)
	r.Plugins = slices.Clone(c.Plugins)
	for _, p := range o.Plugins {
		if i := slices.IndexFunc(r.Plugins, func(q *PluginConfig) bool { return q.Name == p.Name }); i >= 0 {
			r.Plugins[i] = p
		} else {
			r.Plugins = append(r.Plugins, p)
		}
	}
	return &r
}

func str(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

func num(dst *int, v int) {
	if v != 0 {
		*dst = v
	}
}

func mergePorts(a, b *Ports) *Ports {
	if a == nil && b == nil {
		return nil
	}
	r := Ports{}
	if a != nil {
		r = *a
	}
	if b != nil {
		num(&r.HTTP, b.HTTP)
		num(&r.RPC, b.RPC)
	}
	return &r
}

func mergeAdvertise(a, b *Advertise) *Advertise {
	if a == nil && b == nil {
		return nil
	}
	r := Advertise{}
	if a != nil {
		r = *a
	}
	if b != nil {
		str(&r.HTTP, b.HTTP)
		str(&r.RPC, b.RPC)
	}
	return &r
}

func mergeServer(a, b *ServerConfig) *ServerConfig {
	if a == nil && b == nil {
		return nil
	}
	r := ServerConfig{}
	if a != nil {
		r = *a
	}
	if b == nil {
		return &r
	}
	r.Enabled = r.Enabled || b.Enabled
	num(&r.BootstrapExpect, b.BootstrapExpect)
	num(&r.NumSchedulers, b.NumSchedulers)
	str(&r.HeartbeatGrace, b.HeartbeatGrace)
	str(&r.MinHeartbeatTTL, b.MinHeartbeatTTL)
	if b.MaxHeartbeatsPerSecond != 0 {
		r.MaxHeartbeatsPerSecond = b.MaxHeartbeatsPerSecond
	}
	str(&r.FailoverHeartbeatTTL, b.FailoverHeartbeatTTL)
	num(&r.RaftSnapshotThreshold, b.RaftSnapshotThreshold)
	str(&r.RaftSnapshotInterval, b.RaftSnapshotInterval)
	num(&r.RaftTrailingLogs, b.RaftTrailingLogs)
	str(&r.SchedulerCallTimeout, b.SchedulerCallTimeout)
	num(&r.MaxAllocsPerJob, b.MaxAllocsPerJob)
	num(&r.MaxAllocsPerEval, b.MaxAllocsPerEval)
	str(&r.DefaultServiceProvider, b.DefaultServiceProvider)
	num(&r.RaftMultiplier, b.RaftMultiplier)
	for _, g := range gcSettings {
		str(g.value(&r), *g.value(b))
	}
	r.Snapshot = mergeSnapshot(r.Snapshot, b.Snapshot)
	if len(b.EnabledDrivers) > 0 {
		r.EnabledDrivers = slices.Clone(b.EnabledDrivers)
	}
	if b.ServerJoin != nil {
		j := ServerJoin{}
		if r.ServerJoin != nil {
			j = *r.ServerJoin
		}
		if len(b.ServerJoin.RetryJoin) > 0 {
			j.RetryJoin = slices.Clone(b.ServerJoin.RetryJoin)
		}
		str(&j.RetryInterval, b.ServerJoin.RetryInterval)
		num(&j.RetryMax, b.ServerJoin.RetryMax)
		str(&j.Token, b.ServerJoin.Token)
		r.ServerJoin = &j
	}
	return &r
}

func mergeClient(a, b *ClientConfig) *ClientConfig {
	if a == nil && b == nil {
		return nil
	}
	r := ClientConfig{}
	if a != nil {
		r = *a
	}
	if b == nil {
		return &r
	}
	r.Enabled = r.Enabled || b.Enabled
	r.Servers = append(slices.Clone(r.Servers), b.Servers...)
	str(&r.NodeClass, b.NodeClass)
	str(&r.NodePool, b.NodePool)
	str(&r.StateDir, b.StateDir)
	str(&r.AllocDir, b.AllocDir)
	str(&r.JoinToken, b.JoinToken)
	str(&r.FingerprintInterval, b.FingerprintInterval)
	str(&r.MaxKillTimeout, b.MaxKillTimeout)
	str(&r.NetworkInterface, b.NetworkInterface)
	str(&r.CNIPath, b.CNIPath)
	str(&r.CNIConfigDir, b.CNIConfigDir)
	str(&r.BridgeNetworkName, b.BridgeNetworkName)
	str(&r.BridgeNetworkSubnet, b.BridgeNetworkSubnet)
	if b.MinDynamicPort != 0 {
		r.MinDynamicPort = b.MinDynamicPort
	}
	if b.MaxDynamicPort != 0 {
		r.MaxDynamicPort = b.MaxDynamicPort
	}
	if b.Reserved != nil {
		rv := *b.Reserved
		r.Reserved = &rv
	}
	r.Meta = mergeMap(r.Meta, b.Meta)
	r.Options = mergeMap(r.Options, b.Options)
	r.HostVolumes = mergeHostVolumes(r.HostVolumes, b.HostVolumes)
	return &r
}

func mergeTLS(a, b *TLSConfig) *TLSConfig {
	if a == nil && b == nil {
		return nil
	}
	r := TLSConfig{}
	if a != nil {
		r = *a
	}
	if b == nil {
		return &r
	}
	r.HTTP = r.HTTP || b.HTTP
	r.RPC = r.RPC || b.RPC
	str(&r.CAFile, b.CAFile)
	str(&r.CertFile, b.CertFile)
	str(&r.KeyFile, b.KeyFile)
	r.VerifyServerHostname = r.VerifyServerHostname || b.VerifyServerHostname
	r.VerifyHTTPSClient = r.VerifyHTTPSClient || b.VerifyHTTPSClient
	if b.Auto != nil {
		v := *b.Auto
		r.Auto = &v
	}
	str(&r.CertTTL, b.CertTTL)
	return &r
}

func mergeACL(a, b *ACLConfig) *ACLConfig {
	if a == nil && b == nil {
		return nil
	}
	r := ACLConfig{}
	if a != nil {
		r = *a
	}
	if b == nil {
		return &r
	}
	r.Enabled = r.Enabled || b.Enabled
	str(&r.TokenTTL, b.TokenTTL)
	str(&r.PolicyTTL, b.PolicyTTL)
	return &r
}

func mergeMap(a, b map[string]string) map[string]string {
	if a == nil && b == nil {
		return nil
	}
	r := maps.Clone(a)
	if r == nil {
		r = map[string]string{}
	}
	maps.Copy(r, b)
	return r
}
