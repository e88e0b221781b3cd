package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/drover-org/drover/core/httpapi"
	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
	"github.com/drover-org/drover/sdk/shared"
)

// builtinPlugins are the plugins compiled into the drover binary, in launch
// order (it decides job-type ties), by name and kind. The agent runs each
// as `<drover> __plugin <name>` and speaks to it through its kind's
// protocol only: the drover binary links the plugins (plugins/builtin) to
// serve them, the agent does not.
var builtinPlugins = []struct{ name, kind string }{
	{"scheduler-system", shared.KindScheduler},
	{"scheduler-sysbatch", shared.KindScheduler},
	{"scheduler-batch", shared.KindScheduler},
	{"scheduler-service", shared.KindScheduler},
	{rawexecPlugin, shared.KindDriver},
	{dockerPlugin, shared.KindDriver},
	{execPlugin, shared.KindDriver},
	{mockPlugin, shared.KindDriver},
	{"csi-bridge", shared.KindCSIBridge},
	{"gc", shared.KindGC},
}

// Every built-in plugin starts when first needed (pluginhost.Builtin.Lazy),
// declared in process until then, so an agent starts no process for what
// it does not use:
//
//   - the schedulers at the first eval of their job types (never on a
//     client-only agent, which evaluates nothing), gc at its first
//     collection, csi-bridge when a CSI plugin registers or a CSI volume
//     operation needs it;
//   - raw_exec, exec and mock_driver at their first task: until then their
//     own fingerprint code runs
//     in the agent's process (inProcessFingerprint), so the node is ready
//     without a plugin process;
//   - docker likewise at its first task call: until then its fingerprint
//     (engine ping, version, info) runs in the agent's process at every
//     fingerprint, so an engine that appears or goes away changes the
//     node's docker health without a plugin process.
//
// The binary that links the plugins registers their declarations
// (pluginhost.RegisterDeclaration); a built-in without one launches at
// start, as does one whose stanza has a config block.

// inProcessFingerprint is the idle fingerprint of built-in driver name:
// its own code run in process with its environment. Without one, or when
// it fails, the fingerprint starts the plugin (nil).
func inProcessFingerprint(name string, env []string) func(context.Context) *driverpb.FingerprintResponse {
	fp := pluginhost.BuiltinInProcess(name).Fingerprint
	if fp == nil {
		return nil
	}
	return func(ctx context.Context) *driverpb.FingerprintResponse {
		resp, err := fp(ctx, env)
		if err != nil {
			return nil
		}
		return resp
	}
}

// ReloadPlugins is the whole-agent plugin reload (SIGHUP). See
// ReloadAllPlugins.
func (a *Agent) ReloadPlugins(ctx context.Context) error {
	_, err := a.ReloadAllPlugins(ctx)
	return err
}

// ReloadAllPlugins is the whole-agent plugin reload (SIGHUP, PUT
// /v1/agent/plugins/reload without a name). It reads the -config files
// again and brings the plugins in line with them and with plugin_dir: a new
// stanza or plugin_dir file starts, a plugin whose stanza and file are gone
// is drained and stopped, and only the plugins whose binary on disk or whose
// stanza (config, args) changed are relaunched: a scheduler swap leaves the
// task driver and the other schedulers running. It returns what it did,
// also when part of it failed (the error says which part).
func (a *Agent) ReloadAllPlugins(ctx context.Context) (pluginhost.ReloadResult, error) {
	var stanzas []pluginhost.Stanza
	if len(a.configPaths) > 0 {
		cfg, err := LoadConfig(a.cfg.DevMode, a.configPaths...)
		if err != nil {
			return pluginhost.ReloadResult{}, structs.NewError(structs.ErrInvalid, "reload plugins: agent config: %v", err)
		}
		p := &problems{origins: cfg.Origins}
		cfg.checkPlugins(p)
		if err := p.err(); err != nil {
			return pluginhost.ReloadResult{}, structs.NewError(structs.ErrInvalid, "reload plugins: agent config: %v", err)
		}
		// The running driver plugins judge their stanzas' config, as at
		// start.
		checks, err := driverConfigChecks(cfg.Plugins)
		if err != nil {
			return pluginhost.ReloadResult{}, structs.NewError(structs.ErrInvalid, "reload plugins: agent config: %v", err)
		}
		if err := checkDriverConfigs(ctx, a.drivers, checks); errors.Is(err, driver.ErrInvalidPluginConfig) {
			return pluginhost.ReloadResult{}, structs.NewError(structs.ErrInvalid, "reload plugins: agent config: %v", err)
		} else if err != nil {
			return pluginhost.ReloadResult{}, fmt.Errorf("reload plugins: %w", err) // the plugin's failure keeps its kind
		}
		if stanzas, err = pluginStanzas(cfg); err != nil {
			return pluginhost.ReloadResult{}, structs.NewError(structs.ErrInvalid, "reload plugins: agent config: %v", err)
		}
		if stanzas == nil {
			stanzas = []pluginhost.Stanza{} // re-read: no stanza at all
		}
	}
	res, err := a.host.ReloadChanged(ctx, stanzas)
	a.logger.Info("plugins reloaded", "added", strings.Join(res.Added, ","), "removed", strings.Join(res.Removed, ","),
		"relaunched", strings.Join(res.Reloaded, ","), "failed", err != nil)
	if err != nil {
		// The answer to a failed reload is its error alone: say there what
		// was done all the same.
		done := ""
		for _, part := range []struct {
			what  string
			names []string
		}{{"added", res.Added}, {"removed", res.Removed}, {"relaunched", res.Reloaded}} {
			if len(part.names) > 0 {
				done += fmt.Sprintf("; %s: %s", part.what, strings.Join(part.names, ", "))
			}
		}
		return res, fmt.Errorf("reload plugins: %w%s", err, done)
	}
	return res, nil
}

// reloadForAPI is ReloadAllPlugins as the HTTP API reports it.
func (a *Agent) reloadForAPI(ctx context.Context) (httpapi.PluginsReload, error) {
	res, err := a.ReloadAllPlugins(ctx)
	return httpapi.PluginsReload{Added: res.Added, Removed: res.Removed, Relaunched: res.Reloaded}, err
}

// ReloadPlugin relaunches the one plugin name from its binary, draining
// only its own calls in flight. An unknown name is a not-found error.
func (a *Agent) ReloadPlugin(ctx context.Context, name string) error {
	return pluginError(a.host.ReloadPlugin(ctx, name))
}

// PluginsStatus describes every plugin of the agent, in config order.
func (a *Agent) PluginsStatus() []structs.AgentPlugin {
	sts := a.host.Status()
	out := make([]structs.AgentPlugin, 0, len(sts))
	for _, st := range sts {
		out = append(out, agentPlugin(st))
	}
	return out
}

// PluginStatus describes the plugin name; an unknown name is a not-found
// error.
func (a *Agent) PluginStatus(name string) (structs.AgentPlugin, error) {
	st, err := a.host.PluginStatus(name)
	if err != nil {
		return structs.AgentPlugin{}, pluginError(err)
	}
	return agentPlugin(st), nil
}

func agentPlugin(st pluginhost.PluginStatus) structs.AgentPlugin {
	p := structs.AgentPlugin{
		Name: st.Name, Kind: strings.Join(st.Kinds, ","), Builtin: st.Builtin, Version: st.Version,
		PID: st.Pid, StartTime: st.Started, Restarts: st.Restarts, LastError: st.LastError, Health: st.Health, HealthDescription: st.HealthDescription,
	}
	if !st.Builtin {
		p.Path = st.Path
	}
	for _, jt := range st.JobTypes {
		p.JobTypes = append(p.JobTypes, structs.AgentJobType{Name: jt.Type, Behavior: jt.Behavior})
	}
	return p
}

// pluginError gives an unknown plugin name the not-found kind (HTTP 404).
func pluginError(err error) error {
	if errors.Is(err, pluginhost.ErrUnknownPlugin) {
		return structs.NewError(structs.ErrNotFound, "%v", err)
	}
	return err
}

// agentPlugins is the agent's plugins as the HTTP API sees them.
type agentPlugins struct{ a *Agent }

func (p agentPlugins) List() []structs.AgentPlugin { return p.a.PluginsStatus() }

func (p agentPlugins) Get(name string) (structs.AgentPlugin, error) { return p.a.PluginStatus(name) }

func (p agentPlugins) Reload(ctx context.Context, name string) error {
	return p.a.ReloadPlugin(ctx, name)
}
