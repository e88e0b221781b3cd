// Package builtin lists the plugins compiled into the drover binary. They
// still run out of process: the agent re-executes its own binary as
// `drover __plugin <name>` (pluginhost.ServeCommand), which calls the
// plugin's Serve. Each also has a standalone main under its package's cmd/
// for installing a build of it in plugin_dir.
package builtin

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/core/structs"
	bridge "github.com/drover-org/drover/plugins/csi-bridge"
	docker "github.com/drover-org/drover/plugins/driver-docker"
	execdriver "github.com/drover-org/drover/plugins/driver-exec"
	mock "github.com/drover-org/drover/plugins/driver-mock"
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
	gc "github.com/drover-org/drover/plugins/gc"
	batch "github.com/drover-org/drover/plugins/scheduler-batch"
	service "github.com/drover-org/drover/plugins/scheduler-service"
	sysbatch "github.com/drover-org/drover/plugins/scheduler-sysbatch"
	system "github.com/drover-org/drover/plugins/scheduler-system"
	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/driverpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/shared"
)

// Plugin is one built-in plugin.
type Plugin struct {
	Name string
	Kind string
	// Serve runs the plugin's go-plugin server; it does not return.
	Serve func()
}

// Catalog is every built-in plugin, in launch order.
var Catalog = []Plugin{
	{Name: "scheduler-system", Kind: shared.KindScheduler, Serve: func() { scheduler.Serve(system.New()) }},
	{Name: "scheduler-sysbatch", Kind: shared.KindScheduler, Serve: func() { scheduler.Serve(sysbatch.New()) }},
	{Name: "scheduler-batch", Kind: shared.KindScheduler, Serve: func() { scheduler.Serve(batch.New()) }},
	{Name: "scheduler-service", Kind: shared.KindScheduler, Serve: func() { scheduler.Serve(service.New()) }},
	{Name: "driver-rawexec", Kind: shared.KindDriver, Serve: rawexec.Serve},
	{Name: "driver-docker", Kind: shared.KindDriver, Serve: docker.Serve},
	{Name: "driver-exec", Kind: shared.KindDriver, Serve: execdriver.Serve},
	{Name: "driver-mock", Kind: shared.KindDriver, Serve: mock.Serve},
	{Name: "csi-bridge", Kind: shared.KindCSIBridge, Serve: bridge.Serve},
	{Name: "gc", Kind: shared.KindGC, Serve: func() { sdkgc.Serve(gc.New()) }},
}

// inProcess is each built-in's in-process side, from the same code its
// process serves: its declaration, what the host's Init of its kind
// returns at a launch (a scheduler's or gc plugin's Info, a driver's
// Info; the csi-bridge declares nothing), and the drivers' fingerprints. The
// agent uses them to know, and fingerprint, a plugin it starts only when
// first needed (pluginhost.Builtin.Lazy).
var inProcess = map[string]pluginhost.InProcess{
	"scheduler-system":   {Declare: func(ctx context.Context) (any, error) { return system.New().Info(ctx) }},
	"scheduler-sysbatch": {Declare: func(ctx context.Context) (any, error) { return sysbatch.New().Info(ctx) }},
	"scheduler-batch":    {Declare: func(ctx context.Context) (any, error) { return batch.New().Info(ctx) }},
	"scheduler-service":  {Declare: func(ctx context.Context) (any, error) { return service.New().Info(ctx) }},
	"driver-rawexec": {
		Declare:     func(ctx context.Context) (any, error) { return new(rawexec.Driver).Info(ctx) },
		Fingerprint: rawexecFingerprint,
	},
	"driver-docker": {
		Declare:     func(ctx context.Context) (any, error) { return new(docker.Driver).Info(ctx) },
		Fingerprint: dockerFingerprint,
	},
	"driver-exec": {
		Declare:     func(ctx context.Context) (any, error) { return execdriver.New(nil, nil).Info(ctx) },
		Fingerprint: execFingerprint,
	},
	"driver-mock": {
		Declare:     func(ctx context.Context) (any, error) { return mock.New(nil, nil).Info(ctx) },
		Fingerprint: mockFingerprint,
	},
	"csi-bridge": {Declare: func(context.Context) (any, error) { return struct{}{}, nil }},
	"gc":         {Declare: func(ctx context.Context) (any, error) { return gc.New().Info(ctx) }},
}

func init() {
	for _, p := range Catalog {
		pluginhost.RegisterInProcess(p.Name, inProcess[p.Name])
	}
}

// rawexecFingerprint is raw_exec's Fingerprint with the config its
// process would read from env (rawexec.ConfigEnvVar).
func rawexecFingerprint(ctx context.Context, env []string) (*driverpb.FingerprintResponse, error) {
	cfg, err := rawexec.ParsePluginConfig([]byte(lastEnv(env, rawexec.ConfigEnvVar)))
	if err != nil {
		return nil, err
	}
	return rawexec.NewConfigured(nil, cfg).Fingerprint(ctx)
}

// execFingerprint is exec's Fingerprint with the config its process would
// read from env (execdriver.ConfigEnvVar).
func execFingerprint(ctx context.Context, env []string) (*driverpb.FingerprintResponse, error) {
	cfg, err := execdriver.ParsePluginConfig([]byte(lastEnv(env, execdriver.ConfigEnvVar)))
	if err != nil {
		return nil, err
	}
	return execdriver.New(nil, cfg).Fingerprint(ctx)
}

// mockDrivers keeps one in-process mock driver per config, so that its
// shutdown_periodic_after clock runs from the first fingerprint, as it
// runs from its process's start.
var mockDrivers sync.Map // config string -> *mock.Driver

// mockFingerprint is mock_driver's Fingerprint with the config its
// process would read from env (mock.ConfigEnvVar).
func mockFingerprint(ctx context.Context, env []string) (*driverpb.FingerprintResponse, error) {
	raw := []byte(lastEnv(env, mock.ConfigEnvVar))
	if d, ok := mockDrivers.Load(string(raw)); ok {
		return d.(*mock.Driver).Fingerprint(ctx)
	}
	cfg, err := mock.ParsePluginConfig(raw)
	if err != nil {
		return nil, err
	}
	d, _ := mockDrivers.LoadOrStore(string(raw), mock.New(nil, cfg))
	return d.(*mock.Driver).Fingerprint(ctx)
}

// dockerFingerprint is the docker driver's Fingerprint (engine ping,
// version and info, the attributes its process would set) with the config
// its process would read from env (docker.ConfigEnvVar). Its engine client
// is closed before it returns, so an idle docker driver keeps nothing open
// in the agent between fingerprints.
func dockerFingerprint(ctx context.Context, env []string) (*driverpb.FingerprintResponse, error) {
	cfg, err := docker.ParsePluginConfig([]byte(lastEnv(env, docker.ConfigEnvVar)))
	if err != nil {
		return nil, err
	}
	d, err := docker.New(nil, cfg)
	if err != nil {
		return nil, err
	}
	defer d.Shutdown()
	return d.Fingerprint(ctx)
}

// lastEnv is the value of key in env, the last one winning as in a
// process environment; "" when absent.
func lastEnv(env []string, key string) string {
	var v string
	for _, kv := range env {
		if val, ok := strings.CutPrefix(kv, key+"="); ok {
			v = val
		}
	}
	return v
}

// Lookup finds a built-in plugin by name.
func Lookup(name string) (Plugin, bool) {
	for _, p := range Catalog {
		if p.Name == name {
			return p, true
		}
	}
	return Plugin{}, false
}

// InProcess serves the built-in schedulers inside the calling process, with
// the method set of the server's scheduler router. Tests and the
// in-process benchmark use it to compare against the plugin path.
type InProcess struct{}

// Lookup returns the built-in scheduler serving jobType and its attempt
// limit, as its Info declares.
func (InProcess) Lookup(jobType string) (scheduler.Scheduler, int, error) {
	var s scheduler.Scheduler
	switch jobType {
	case "system":
		s = system.New()
	case "sysbatch":
		s = sysbatch.New()
	case "batch":
		s = batch.New()
	case "service":
		s = service.New()
	default:
		return nil, 0, fmt.Errorf("job type %q is not served by a built-in scheduler", jobType)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		return nil, 0, err
	}
	for _, t := range info.JobTypes {
		if t.Name == jobType {
			return s, int(t.MaxAttempts), nil
		}
	}
	return nil, 0, fmt.Errorf("built-in scheduler %s does not declare job type %q", info.Name, jobType)
}

// ServedTypes lists the job types of the built-in schedulers.
func (InProcess) ServedTypes() []string { return []string{"batch", "service", "sysbatch", "system"} }

// JobType returns what the built-in scheduler serving jobType declares.
func (p InProcess) JobType(jobType string) (structs.JobTypeBehavior, bool) {
	s, _, err := p.Lookup(jobType)
	if err != nil {
		return structs.JobTypeBehavior{}, false
	}
	info, err := s.Info(context.Background())
	if err != nil {
		return structs.JobTypeBehavior{}, false
	}
	for _, t := range info.JobTypes {
		if t.Name == jobType {
			return pluginhost.Behavior(t), true
		}
	}
	return structs.JobTypeBehavior{}, false
}
