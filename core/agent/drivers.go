package agent

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
	"github.com/drover-org/drover/sdk/shared"
)

// driverSet maps driver names (e.g. "raw_exec") to the plugins serving
// them. Every call goes through the plugin host, so a driver plugin that
// restarts or is swapped keeps serving the same handle.
type driverSet struct {
	host *pluginhost.Host

	mu      sync.RWMutex
	plugins map[string]string // driver name → plugin name
}

func newDriverSet(ctx context.Context, host *pluginhost.Host) (*driverSet, error) {
	ds := &driverSet{host: host, plugins: map[string]string{}}
	for _, name := range host.Plugins(shared.KindDriver) {
		var info *driverpb.InfoResponse
		err := host.Call(ctx, name, shared.KindDriver, func(ctx context.Context, raw any) error {
			var err error
			info, err = raw.(driver.Driver).Info(ctx)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("driver plugin %s: %w", name, err)
		}
		ds.plugins[info.Name] = name
	}
	return ds, nil
}

// Names lists the drivers served, sorted.
func (d *driverSet) Names() []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]string, 0, len(d.plugins))
	for n := range d.plugins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Driver returns a handle on the named driver.
func (d *driverSet) Driver(name string) (driver.Driver, error) {
	d.mu.RLock()
	plugin, ok := d.plugins[name]
	d.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("driver %q is not served by any driver plugin", name)
	}
	return &routedDriver{host: d.host, plugin: plugin}, nil
}

// routedDriver implements driver.Driver by calling the plugin's current
// instance for every method.
type routedDriver struct {
	host   *pluginhost.Host
	plugin string
}

func (r *routedDriver) call(ctx context.Context, fn func(context.Context, driver.Driver) error) error {
	return r.host.Call(ctx, r.plugin, shared.KindDriver, func(ctx context.Context, raw any) error {
		return fn(ctx, raw.(driver.Driver))
	})
}

func (r *routedDriver) Info(ctx context.Context) (out *driverpb.InfoResponse, err error) {
	err = r.call(ctx, func(ctx context.Context, d driver.Driver) (e error) { out, e = d.Info(ctx); return })
	return
}

func (r *routedDriver) Fingerprint(ctx context.Context) (out *driverpb.FingerprintResponse, err error) {
	err = r.call(ctx, func(ctx context.Context, d driver.Driver) (e error) { out, e = d.Fingerprint(ctx); return })
	return
}

func (r *routedDriver) StartTask(ctx context.Context, cfg *driverpb.TaskConfig) (out *driverpb.TaskHandle, err error) {
	err = r.call(ctx, func(ctx context.Context, d driver.Driver) (e error) { out, e = d.StartTask(ctx, cfg); return })
	return
}

// WaitTask lasts as long as the task, so it must not count as a call in
// flight that a reload of the driver drains: that made every reload wait
// out the drain timeout (30 s) whenever a task ran. It is a Watch instead:
// a reload ends it with ErrPluginUnavailable, and the task runner
// recovers the task on the new driver process and waits again (tasks
// outlive their driver's process).
func (r *routedDriver) WaitTask(ctx context.Context, id string) (out *driverpb.ExitResult, err error) {
	err = r.host.Watch(ctx, r.plugin, shared.KindDriver, func(ctx context.Context, raw any) (e error) {
		out, e = raw.(driver.Driver).WaitTask(ctx, id)
		return
	})
	return
}

func (r *routedDriver) StopTask(ctx context.Context, id string, timeout time.Duration, signal string) error {
	return r.call(ctx, func(ctx context.Context, d driver.Driver) error { return d.StopTask(ctx, id, timeout, signal) })
}

func (r *routedDriver) DestroyTask(ctx context.Context, id string, force bool) error {
	return r.call(ctx, func(ctx context.Context, d driver.Driver) error { return d.DestroyTask(ctx, id, force) })
}

func (r *routedDriver) InspectTask(ctx context.Context, id string) (out *driverpb.TaskStatus, err error) {
	err = r.call(ctx, func(ctx context.Context, d driver.Driver) (e error) { out, e = d.InspectTask(ctx, id); return })
	return
}

func (r *routedDriver) SignalTask(ctx context.Context, id string, signal string) error {
	return r.call(ctx, func(ctx context.Context, d driver.Driver) error { return d.SignalTask(ctx, id, signal) })
}

func (r *routedDriver) RecoverTask(ctx context.Context, h *driverpb.TaskHandle) error {
	return r.call(ctx, func(ctx context.Context, d driver.Driver) error { return d.RecoverTask(ctx, h) })
}

var _ driver.Driver = (*routedDriver)(nil)
