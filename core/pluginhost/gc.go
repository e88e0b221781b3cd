package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/drover-org/drover/core/structs"
	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/gcpb"
	"github.com/drover-org/drover/sdk/shared"
)

// GCKind is the gc plugin kind. Its Init is the Info call that proves a
// third-party plugin decides garbage collection; the declaration is that
// Info, whose collections the router routes by.
var GCKind = NewKind(KindSpec[sdkgc.Collector, *gcpb.InfoResponse]{
	Name:    shared.KindGC,
	Plugin:  &sdkgc.Plugin{},
	Version: (*gcpb.InfoResponse).GetVersion,
	Init: func(ctx context.Context, c sdkgc.Collector) (*gcpb.InfoResponse, error) {
		info, err := c.Info(ctx)
		if err != nil {
			return nil, err
		}
		if err := checkGCInfo(info); err != nil {
			return nil, err
		}
		return info, nil
	},
})

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

// GCRouter routes garbage-collection decisions to the host's gc plugins
// (it is the server's GC router). A collection is decided by the last gc
// plugin in config order (built-ins, then plugin_dir files, then plugin
// stanzas) whose Info lists it, so a third-party plugin takes a collection
// over from the built-in one, as a scheduler plugin takes over a job type.
// The route is looked up on every call, and the handle returned calls the
// plugin's current instance, so a reload (PUT
// /v1/agent/plugins/reload?name=gc) reaches later calls.
type GCRouter struct {
	clients Clients[sdkgc.Collector, *gcpb.InfoResponse]
}

// GC returns the gc routing of h.
func (h *Host) GC() GCRouter { return GCRouter{clients: Get(h, GCKind)} }

// Collector returns the plugin deciding collection, or an error wrapping
// structs.ErrUnavailable when no gc plugin decides it or the one that does
// is down (restarting).
func (r GCRouter) Collector(collection gcpb.Collection) (sdkgc.Collector, error) {
	names := r.clients.Names()
	for i := len(names) - 1; i >= 0; i-- {
		name := names[i]
		info, _ := r.clients.Declaration(name)
		if !slices.Contains(info.GetCollections(), collection) {
			continue
		}
		if !r.clients.h.Available(name) { // idle: the call starts it
			return nil, fmt.Errorf("%w: gc plugin %q, which decides %s, is restarting", ErrPluginUnavailable, name, collection)
		}
		return routedCollector{clients: r.clients, plugin: name}, nil
	}
	loaded := "none is loaded"
	if len(names) > 0 {
		loaded = "loaded: " + strings.Join(names, ", ")
	}
	return nil, structs.NewError(structs.ErrUnavailable, "no gc plugin decides collection %s (%s)", collection, loaded)
}

// routedCollector calls the current instance of one gc plugin.
type routedCollector struct {
	clients Clients[sdkgc.Collector, *gcpb.InfoResponse]
	plugin  string
}

func (c routedCollector) Info(ctx context.Context) (out *gcpb.InfoResponse, err error) {
	err = c.clients.Call(ctx, c.plugin, func(ctx context.Context, g sdkgc.Collector) (e error) {
		out, e = g.Info(ctx)
		return
	})
	return
}

func (c routedCollector) Decide(ctx context.Context, req *gcpb.DecideRequest) (out *gcpb.DecideResponse, err error) {
	err = c.clients.Call(ctx, c.plugin, func(ctx context.Context, g sdkgc.Collector) (e error) {
		out, e = g.Decide(ctx, req)
		return
	})
	return
}
