package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/gcpb"
	"github.com/drover-org/drover/sdk/shared"
)

// gcKind is the gc plugin kind. Its Init is the Info call that proves a
// third-party plugin decides garbage collection and records which
// collections it decides; the router reads that record.
func gcKind() pluginhost.Kind {
	return pluginhost.Kind{
		Plugin: &sdkgc.Plugin{},
		Init: func(ctx context.Context, raw any, _ map[string]any) (any, error) {
			info, err := raw.(sdkgc.Collector).Info(ctx)
			if err != nil {
				return nil, err
			}
			if err := checkGCInfo(info); err != nil {
				return nil, err
			}
			return info, nil
		},
	}
}

// checkGCInfo refuses an Info the router could not route by.
func checkGCInfo(info *gcpb.InfoResponse) error {
	if info.GetName() == "" {
		return errors.New("gc Info: name must not be empty")
	}
	if len(info.GetCollections()) == 0 {
		return fmt.Errorf("gc Info of %q: collections must list at least one collection", info.GetName())
	}
	seen := map[gcpb.Collection]bool{}
	for i, c := range info.GetCollections() {
		if _, known := gcpb.Collection_name[int32(c)]; !known || c == gcpb.Collection_COLLECTION_UNSPECIFIED {
			return fmt.Errorf("gc Info of %q: collections[%d]: %d is not a known collection", info.GetName(), i, int32(c))
		}
		if seen[c] {
			return fmt.Errorf("gc Info of %q: collections[%d]: %s is listed twice", info.GetName(), i, c)
		}
		seen[c] = true
	}
	return nil
}

// gcRouter implements server.GCRouter over the agent's plugin host. A
// collection is decided by the last gc plugin in config order (built-ins,
// then plugin_dir files, then plugin stanzas) whose Info lists it, so a
// third-party plugin takes a collection over from the built-in one, as a
// scheduler plugin takes over a job type. The route is looked up on every
// call, and the handle returned calls the plugin's current instance, so a
// reload (PUT /v1/agent/plugins/reload?name=gc) reaches later calls.
type gcRouter struct{ host *pluginhost.Host }

var _ server.GCRouter = gcRouter{}

// GCRouter adapts the plugin host's gc plugins to the server's GC router.
func GCRouter(host *pluginhost.Host) server.GCRouter { return gcRouter{host: host} }

// Collector returns the plugin deciding collection, or an error wrapping
// structs.ErrUnavailable when no gc plugin decides it or the one that does
// is down (restarting).
func (r gcRouter) Collector(collection gcpb.Collection) (sdkgc.Collector, error) {
	names := r.host.Plugins(shared.KindGC)
	for i := len(names) - 1; i >= 0; i-- {
		name := names[i]
		raw, _ := r.host.Info(name, shared.KindGC)
		info, _ := raw.(*gcpb.InfoResponse)
		if !slices.Contains(info.GetCollections(), collection) {
			continue
		}
		if !r.host.Running(name) {
			return nil, fmt.Errorf("%w: gc plugin %q, which decides %s, is restarting", pluginhost.ErrPluginUnavailable, name, collection)
		}
		return routedCollector{host: r.host, plugin: name}, nil
	}
	loaded := "none is loaded"
	if len(names) > 0 {
		loaded = "loaded: " + strings.Join(names, ", ")
	}
	return nil, structs.NewError(structs.ErrUnavailable, "no gc plugin decides collection %s (%s)", collection, loaded)
}

// routedCollector calls the current instance of one gc plugin.
type routedCollector struct {
	host   *pluginhost.Host
	plugin string
}

func (c routedCollector) Info(ctx context.Context) (out *gcpb.InfoResponse, err error) {
	err = c.host.Call(ctx, c.plugin, shared.KindGC, func(ctx context.Context, raw any) (e error) {
		out, e = raw.(sdkgc.Collector).Info(ctx)
		return
	})
	return
}

func (c routedCollector) Decide(ctx context.Context, req *gcpb.DecideRequest) (out *gcpb.DecideResponse, err error) {
	err = c.host.Call(ctx, c.plugin, shared.KindGC, func(ctx context.Context, raw any) (e error) {
		out, e = raw.(sdkgc.Collector).Decide(ctx, req)
		return
	})
	return
}
