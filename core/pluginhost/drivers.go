package pluginhost

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
	"github.com/drover-org/drover/sdk/shared"
)

// DriverKind is the task driver plugin kind. Its Init is the Info call that
// both proves an instance serves the driver kind (and discovers third-party
// driver binaries) and names the driver it serves: the declaration.
var DriverKind = NewKind(KindSpec[driver.Client, *driverpb.InfoResponse]{
	Name:    shared.KindDriver,
	Plugin:  &driver.Plugin{},
	Version: (*driverpb.InfoResponse).GetVersion,
	Init: func(ctx context.Context, d driver.Client) (*driverpb.InfoResponse, error) {
		return d.Info(ctx)
	},
})

// DriverSet maps driver names (e.g. "raw_exec") to the plugins serving
// them. Every call goes through the plugin host, so a driver plugin that
// restarts or is swapped keeps serving the same handle. The map is read
// from the plugin set in force at every use, so a driver plugin a reload
// adds is served once it is up, and one it removes is no longer.
type DriverSet struct {
	clients Clients[driver.Client, *driverpb.InfoResponse]
}

// Drivers maps the drivers the driver plugins declare to the plugins
// serving them.
func (h *Host) Drivers() *DriverSet {
	return &DriverSet{clients: Get(h, DriverKind)}
}

// plugins maps each driver served now to its plugin; on a driver two
// plugins declare, the later one in config order wins.
func (d *DriverSet) plugins() map[string]string {
	out := map[string]string{}
	for _, p := range d.clients.Loaded() {
		out[p.Declaration.GetName()] = p.Name
	}
	return out
}

// Names lists the drivers served, sorted.
func (d *DriverSet) Names() []string {
	plugins := d.plugins()
	out := make([]string, 0, len(plugins))
	for n := range plugins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Plugin names the plugin serving driver name, and false if none does.
func (d *DriverSet) Plugin(name string) (string, bool) {
	p, ok := d.plugins()[name]
	return p, ok
}

// Driver returns a handle on the named driver.
func (d *DriverSet) Driver(name string) (driver.Driver, error) {
	plugin, ok := d.Plugin(name)
	if !ok {
		return nil, fmt.Errorf("driver %q is not served by any driver plugin", name)
	}
	return &routedDriver{clients: d.clients, plugin: plugin}, nil
}

// ValidateConfig asks the plugin serving driver name to check configJSON
// as its plugin config (driver.ConfigValidator). A refusal wraps
// driver.ErrInvalidPluginConfig with the driver's own message.
func (d *DriverSet) ValidateConfig(ctx context.Context, name string, configJSON []byte) error {
	plugin, ok := d.Plugin(name)
	if !ok {
		return fmt.Errorf("driver %q is not served by any driver plugin", name)
	}
	return d.clients.Call(ctx, plugin, func(ctx context.Context, c driver.Client) error {
		return c.ValidateConfig(ctx, configJSON)
	})
}

// routedDriver implements driver.Driver by calling the plugin's current
// instance for every method.
type routedDriver struct {
	clients Clients[driver.Client, *driverpb.InfoResponse]
	plugin  string
}

func (r *routedDriver) call(ctx context.Context, fn func(context.Context, driver.Client) error) error {
	return r.clients.Call(ctx, r.plugin, fn)
}

func (r *routedDriver) Info(ctx context.Context) (out *driverpb.InfoResponse, err error) {
	err = r.call(ctx, func(ctx context.Context, d driver.Client) (e error) { out, e = d.Info(ctx); return })
	return
}

// Fingerprint of an idle driver plugin with an in-process fingerprint
// (Builtin.Fingerprint) is answered by it without starting the plugin,
// unless it answers nil: then the call starts the plugin.
func (r *routedDriver) Fingerprint(ctx context.Context) (out *driverpb.FingerprintResponse, err error) {
	if m, ok := r.clients.h.plugin(r.plugin); ok && m.idleFingerprint != nil && m.isIdle() {
		if fp := m.idleFingerprint(ctx); fp != nil {
			return fp, nil
		}
	}
	err = r.call(ctx, func(ctx context.Context, d driver.Client) (e error) { out, e = d.Fingerprint(ctx); return })
	return
}

func (r *routedDriver) StartTask(ctx context.Context, cfg *driverpb.TaskConfig) (out *driverpb.TaskHandle, err error) {
	err = r.call(ctx, func(ctx context.Context, d driver.Client) (e error) { out, e = d.StartTask(ctx, cfg); return })
	return
}

// WaitTask lasts as long as the task, so it must not count as a call in
// flight that a reload of the driver drains: that made every reload wait
// out the drain timeout (30 s) whenever a task ran. It is a Watch instead:
// a reload ends it with ErrPluginUnavailable, and the task runner
// recovers the task on the new driver process and waits again (tasks
// outlive their driver's process).
func (r *routedDriver) WaitTask(ctx context.Context, id string) (out *driverpb.ExitResult, err error) {
	err = r.clients.Watch(ctx, r.plugin, func(ctx context.Context, d driver.Client) (e error) {
		out, e = d.WaitTask(ctx, id)
		return
	})
	return
}

func (r *routedDriver) StopTask(ctx context.Context, id string, timeout time.Duration, signal string) error {
	return r.call(ctx, func(ctx context.Context, d driver.Client) error { return d.StopTask(ctx, id, timeout, signal) })
}

func (r *routedDriver) DestroyTask(ctx context.Context, id string, force bool) error {
	return r.call(ctx, func(ctx context.Context, d driver.Client) error { return d.DestroyTask(ctx, id, force) })
}

func (r *routedDriver) InspectTask(ctx context.Context, id string) (out *driverpb.TaskStatus, err error) {
	err = r.call(ctx, func(ctx context.Context, d driver.Client) (e error) { out, e = d.InspectTask(ctx, id); return })
	return
}

func (r *routedDriver) SignalTask(ctx context.Context, id string, signal string) error {
	return r.call(ctx, func(ctx context.Context, d driver.Client) error { return d.SignalTask(ctx, id, signal) })
}

func (r *routedDriver) RecoverTask(ctx context.Context, h *driverpb.TaskHandle) error {
	return r.call(ctx, func(ctx context.Context, d driver.Client) error { return d.RecoverTask(ctx, h) })
}

// ExecTask lasts as long as the exec'd command: like WaitTask it is a
// Watch, which a reload of the driver ends (with ErrPluginUnavailable)
// rather than wait for.
func (r *routedDriver) ExecTask(ctx context.Context, start *driverpb.ExecTaskStart, stdio driver.ExecIO) (out *driverpb.ExitResult, err error) {
	err = r.clients.Watch(ctx, r.plugin, func(ctx context.Context, d driver.Client) (e error) {
		out, e = d.ExecTask(ctx, start, stdio)
		return
	})
	return
}

var (
	_ driver.Driver = (*routedDriver)(nil)
	_ driver.Execer = (*routedDriver)(nil)
)
