package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/shared"
)

// JobTypeInfo is what the host learned about one job type from the Info of
// the scheduler plugin that serves it.
type JobTypeInfo struct {
	Type   string
	Plugin string // name of the serving plugin
	// MaxAttempts is the number of scheduling attempts for one eval before
	// it fails with "maximum attempts reached"; at least 1.
	MaxAttempts int
	// PerNode: each group's count is placed on every candidate node.
	PerNode bool
	// Behavior is the plugin's whole declaration of the type.
	Behavior structs.JobTypeBehavior
}

// routeTable maps job types to the scheduler plugins serving them. It is
// rebuilt whenever a plugin instance comes up and replaced atomically.
type routeTable struct {
	byType map[string]JobTypeInfo
	served []string // sorted
}

// SchedulerSet routes job types to scheduler plugins. Routes come from the
// Info each scheduler plugin gave at its last launch; a plugin that is down
// keeps its routes, and calls to it fail with ErrPluginUnavailable until it
// is back. When two plugins serve one job type, the later one in config
// order (built-ins first, then plugin stanzas in file order) wins, so a
// third-party plugin can take over a built-in type.
type SchedulerSet struct{ h *Host }

// Schedulers returns the scheduler routing of h.
func (h *Host) Schedulers() *SchedulerSet { return &SchedulerSet{h: h} }

// Lookup returns the Scheduler serving jobType, or an *UnknownJobTypeError
// when no plugin serves it. While the serving plugin is down (between a
// crash and its restart, or a failed restart awaiting the next try or a
// reload) Lookup fails at once with an error wrapping ErrPluginUnavailable,
// and so structs.ErrUnavailable, together with the type's info: the caller
// should try later rather than wait on the plugin.
//
// The returned Scheduler is a handle, not a process: every call goes to the
// plugin's current instance (surviving restarts and reloads), and a call
// that fails because the plugin is down or died wraps ErrPluginUnavailable.
func (s *SchedulerSet) Lookup(jobType string) (scheduler.Scheduler, JobTypeInfo, error) {
	rt := s.h.routes.Load()
	info, ok := rt.byType[jobType]
	if !ok {
		return nil, JobTypeInfo{}, &UnknownJobTypeError{Type: jobType, Served: slices.Clone(rt.served)}
	}
	if m, ok := s.h.plugin(info.Plugin); ok && !m.available() {
		return nil, info, unavailable(info.Plugin, fmt.Errorf("job type %q: %w", jobType, downErr(m.lastError())))
	}
	return routed{h: s.h, plugin: info.Plugin}, info, nil
}

// removedErr turns the error of a call through a routed handle whose
// plugin a reload removed (or that no longer serves the scheduler kind)
// into ErrPluginUnavailable: the call never reached a plugin, so the caller
// looks the job type up again and finds its new plugin, or that none
// serves it, rather than taking the eval for a bad one.
func (r routed) removedErr(err error) error {
	if errors.Is(err, ErrUnknownPlugin) {
		return unavailable(r.plugin, fmt.Errorf("no longer routed to: %w", err))
	}
	return err
}

// JobType returns what the plugin serving jobType declared about it, down
// or not, and false when no plugin serves it.
func (s *SchedulerSet) JobType(jobType string) (JobTypeInfo, bool) {
	info, ok := s.h.routes.Load().byType[jobType]
	return info, ok
}

// ServedTypes returns every job type some scheduler plugin serves, sorted.
func (s *SchedulerSet) ServedTypes() []string {
	return slices.Clone(s.h.routes.Load().served)
}

// routed is the Scheduler that Lookup returns.
type routed struct {
	h      *Host
	plugin string
}

// PluginName names the plugin the handle routes to (metrics label it).
func (r routed) PluginName() string { return r.plugin }

func (r routed) Info(ctx context.Context) (resp *schedulerpb.InfoResponse, err error) {
	err = Get(r.h, SchedulerKind).Call(ctx, r.plugin, func(ctx context.Context, s scheduler.Scheduler) error {
		resp, err = s.Info(ctx)
		return err
	})
	return resp, r.removedErr(err)
}

func (r routed) Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (resp *schedulerpb.ScheduleResponse, err error) {
	if m, ok := r.h.plugin(r.plugin); ok {
		defer m.trackCall("Schedule")()
	}
	err = Get(r.h, SchedulerKind).Call(ctx, r.plugin, func(ctx context.Context, s scheduler.Scheduler) error {
		resp, err = s.Schedule(ctx, req)
		return err
	})
	return resp, r.removedErr(err)
}

// SchedulerKind is the scheduler plugin kind. Its Init is the Info call
// that both proves a third-party plugin is a scheduler and tells the host
// which job types to route to it: the declaration is that Info.
var SchedulerKind = NewKind(KindSpec[scheduler.Scheduler, *schedulerpb.InfoResponse]{
	Name:    shared.KindScheduler,
	Plugin:  &scheduler.Plugin{},
	Version: (*schedulerpb.InfoResponse).GetVersion,
	Init: func(ctx context.Context, s scheduler.Scheduler) (*schedulerpb.InfoResponse, error) {
		info, err := s.Info(ctx)
		if err != nil {
			return nil, err
		}
		if info.GetName() == "" || len(info.GetJobTypes()) == 0 {
			return nil, errors.New("scheduler Info must give a name and at least one job type")
		}
		for _, jt := range info.GetJobTypes() {
			if jt.GetName() == "" {
				return nil, errors.New("scheduler Info lists a job type without a name")
			}
		}
		return info, nil
	},
})

// rebuildRoutes recomputes the routing table from every scheduler plugin's
// last Info, logging job types claimed twice when the table changes.
func (h *Host) rebuildRoutes() {
	h.routesMu.Lock()
	defer h.routesMu.Unlock()

	type claim struct{ jobType, plugin, overrides string }
	byType := map[string]JobTypeInfo{}
	var conflicts []claim
	schedulers := Get(h, SchedulerKind)
	for _, m := range h.set.Load().list {
		info, _ := schedulers.Declaration(m.name)
		for _, jt := range info.GetJobTypes() {
			if prev, ok := byType[jt.GetName()]; ok && prev.Plugin != m.name {
				conflicts = append(conflicts, claim{jt.GetName(), m.name, prev.Plugin})
			}
			attempts := int(jt.GetMaxAttempts())
			if attempts < 1 {
				h.log.Warn("scheduler plugin gave max_attempts < 1; using 1",
					"plugin", m.name, "job_type", jt.GetName(), "max_attempts", attempts)
				attempts = 1
			}
			byType[jt.GetName()] = JobTypeInfo{Type: jt.GetName(), Plugin: m.name, MaxAttempts: attempts, PerNode: jt.GetPerNode(), Behavior: Behavior(jt)}
		}
	}
	old := h.routes.Load()
	if old != nil && maps.EqualFunc(old.byType, byType, func(a, b JobTypeInfo) bool { return reflect.DeepEqual(a, b) }) {
		return
	}
	for _, c := range conflicts {
		h.log.Warn("job type served by two scheduler plugins; the later one in config order wins",
			"job_type", c.jobType, "winner", c.plugin, "overridden", c.overrides)
	}
	h.routes.Store(&routeTable{byType: byType, served: slices.Sorted(maps.Keys(byType))})
	h.log.Info("scheduler routes", "job_types", fmt.Sprint(byType))
}
