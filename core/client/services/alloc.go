// Package services is the client's native service discovery (services
// with provider "nomad"): an alloc runner registers its group's services
// once a main task runs and each task's services once that task runs,
// runs their checks, re-registers a service when one of its checks
// changes status, and deregisters the alloc's services when it stops or
// its tasks end, and only then: a client restart keeps the registrations
// and resumes the checks with the statuses they had. The Registrar sends
// the node's registrations to the servers in shared, retried requests.
//
// The package does not import core/client: it reads the alloc runner
// through Runner and Task, and the runner holds an Alloc behind its own
// small interface.
package services

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/client/taskenv"
	"github.com/drover-org/drover/core/structs"
)

// Runner is what an alloc's services need of the alloc runner that owns
// them.
type Runner interface {
	// Alloc is the alloc as the server last sent it (shared: not to be
	// modified).
	Alloc() *structs.Allocation
	// Node is the node as last fingerprinted.
	Node() *structs.Node
	// Tasks are the alloc's tasks, in the group's order.
	Tasks() []Task
	// Persist stores the runner's state, Persisted included.
	Persist()
	// Changed reports the alloc (a check's new status may decide its
	// health) and wakes the run loop, which calls Sync.
	Changed()
	// Now is the clock of the checks' statuses.
	Now() time.Time
}

// Task is what the services read of one task of the alloc, and how a
// check acts on it.
type Task interface {
	Spec() *structs.Task
	// State is the task's current state (structs.TaskState*).
	State() string
	// LastStart is when the current run started (zero: not running).
	LastStart() time.Time
	// RestartForCheck stops the running task for a check_restart.
	RestartForCheck(ctx context.Context, check string)
	// ExecContext is the environment and directory a command run in the
	// task sees (nil env: not set up yet).
	ExecContext() (env map[string]string, dir string)
}

// Config is what New needs besides the runner.
type Config struct {
	// Registrar sends the registrations (nil: services are not
	// registered and their checks do not run).
	Registrar *Registrar
	// Region and Path are the agent's, for the task env the services'
	// fields are interpolated with.
	Region, Path string
	Logger       hclog.Logger
}

// Alloc is an alloc runner's services. Sync is called by the runner's run
// loop only; the check goroutines write results under mu.
type Alloc struct {
	ar     Runner
	cfg    Config
	ctx    context.Context
	logger hclog.Logger

	mu sync.Mutex
	// checks by check ID, running or restored.
	checks map[string]*checkState
	// stops cancels each running check's goroutine, by check ID.
	stops map[string]context.CancelFunc
	wg    sync.WaitGroup

	// Owned by the run loop:
	groupOn bool
	// taskOn: 1 the task's services are registered, 2 gone for good.
	taskOn map[string]int
	// sent is what was last queued per registration ID (its JSON), so
	// that only changes are sent again.
	sent         map[string]string
	deregistered bool
	// mayHave: the servers may hold registrations of the alloc (some were
	// sent, by this client process or an earlier one), so a stop deletes
	// them. Guarded by mu (persisted reads it).
	mayHave bool
	// healthChecks is how many checks decide the alloc's health: those
	// of the group's services and of its main tasks' and sidecars'.
	healthChecks int
}

// Persisted is what a client restart needs to resume the alloc's
// services: each check's last reported status.
type Persisted struct {
	Checks map[string]*structs.CheckStatus `json:",omitempty"`
	// Registered: registrations were sent.
	Registered bool `json:",omitempty"`
}

// Declared reports whether the group declares any service.
func Declared(tg *structs.TaskGroup) bool {
	if tg == nil {
		return false
	}
	if len(tg.Services) > 0 {
		return true
	}
	for _, t := range tg.Tasks {
		if len(t.Services) > 0 {
			return true
		}
	}
	return false
}

// New is the services of the alloc ar runs (its group declares some);
// prior is what an earlier client process persisted (nil: none). The
// checks run until ctx ends or Close.
func New(ctx context.Context, ar Runner, cfg Config, prior *Persisted) *Alloc {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	s := &Alloc{ar: ar, cfg: cfg, ctx: ctx, logger: cfg.Logger, checks: map[string]*checkState{}, stops: map[string]context.CancelFunc{},
		taskOn: map[string]int{}, sent: map[string]string{}}
	if tg := group(ar.Alloc()); tg != nil {
		count := func(svcs []*structs.Service) {
			for _, svc := range svcs {
				if svc.Provider != "" && svc.Provider != structs.ServiceProviderNomad {
					continue
				}
				for _, ck := range svc.Checks {
					if checkMode(svc, ck) == structs.CheckModeHealthiness {
						s.healthChecks++
					}
				}
			}
		}
		count(tg.Services)
		for _, t := range tg.Tasks {
			if mainOrSidecar(t) {
				count(t.Services)
			}
		}
	}
	if prior != nil {
		s.mayHave = prior.Registered
		for id, st := range prior.Checks {
			if st != nil {
				s.checks[id] = &checkState{health: healthFromReported(st.Status), reported: st, latest: st}
			}
		}
	}
	return s
}

// Persisted is the state to store (the runner's lock may be held).
func (s *Alloc) Persisted() *Persisted {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &Persisted{Checks: map[string]*structs.CheckStatus{}, Registered: s.mayHave}
	for id, c := range s.checks {
		if c.reported != nil {
			p.Checks[id] = c.reported
		}
	}
	return p
}

// serviceSpec is one service of the alloc with where it comes from.
type serviceSpec struct {
	svc  *structs.Service
	task *structs.Task // nil for a group service
}

// Sync brings the registrations and checks in line with the tasks:
// called by the run loop after every change; stopping deregisters them
// for good.
func (s *Alloc) Sync(stopping bool) {
	reg := s.cfg.Registrar
	if s.deregistered || reg == nil {
		return
	}
	if stopping {
		s.deregistered = true
		s.stopChecks(nil)
		s.mu.Lock()
		mayHave := s.mayHave
		s.mu.Unlock()
		if !mayHave {
			return
		}
		reg.deregisterAlloc(s.ar.Alloc().ID)
		s.logger.Debug("deregistered the allocation's services")
		return
	}
	alloc := s.ar.Alloc()
	tg := group(alloc)
	tasks := s.ar.Tasks()
	var specs []serviceSpec
	mainRunning := false
	for _, tr := range tasks {
		task, state := tr.Spec(), tr.State()
		if state == structs.TaskStateRunning && mainOrSidecar(task) {
			mainRunning = true
		}
		switch {
		case state == structs.TaskStateDead:
			s.taskOn[task.Name] = 2
		case state == structs.TaskStateRunning && s.taskOn[task.Name] == 0:
			s.taskOn[task.Name] = 1
		}
		if s.taskOn[task.Name] == 1 {
			for _, svc := range task.Services {
				specs = append(specs, serviceSpec{svc: svc, task: task})
			}
		}
	}
	if mainRunning {
		s.groupOn = true
	}
	if s.groupOn {
		for _, svc := range tg.Services {
			specs = append(specs, serviceSpec{svc: svc})
		}
	}
	// Registrations and their checks as they should be.
	var regs []*structs.ServiceRegistration
	want := map[string]*checkSpec{}
	for _, sp := range specs {
		if sp.svc.Provider != "" && sp.svc.Provider != structs.ServiceProviderNomad {
			continue
		}
		r, checks := s.build(alloc, tg, tasks, sp)
		regs = append(regs, r)
		for _, c := range checks {
			want[c.id] = c
		}
	}
	s.startChecks(want)
	s.stopChecks(want)
	s.mu.Lock()
	for _, r := range regs {
		for _, c := range want {
			if c.regID == r.ID {
				if st := s.checks[c.id]; st != nil && st.reported != nil {
					r.Checks = append(r.Checks, st.reported)
				}
			}
		}
		slices.SortFunc(r.Checks, func(a, b *structs.CheckStatus) int { return compareStrings(a.ID, b.ID) })
	}
	s.mu.Unlock()

	// A registration sent before and not wanted now (its task died, or
	// an in-place update renamed or dropped its service) goes: the
	// alloc's registrations are replaced by the current ones.
	current := make(map[string]bool, len(regs))
	for _, r := range regs {
		current[r.ID] = true
	}
	removed := false
	for id := range s.sent {
		if !current[id] {
			removed = true
		}
	}
	if removed {
		clear(s.sent)
		for _, r := range regs {
			b, _ := json.Marshal(r)
			s.sent[r.ID] = string(b)
		}
		s.setMayHave()
		reg.replaceAlloc(alloc.ID, regs)
		return
	}
	var changed []*structs.ServiceRegistration
	for _, r := range regs {
		b, _ := json.Marshal(r)
		if s.sent[r.ID] != string(b) {
			s.sent[r.ID] = string(b)
			changed = append(changed, r)
		}
	}
	if len(changed) > 0 {
		s.setMayHave()
	}
	reg.upsert(changed...)
}

// setMayHave records that registrations were sent; the alloc's state is
// persisted with it before they leave, so that a restarted client knows
// to delete them.
func (s *Alloc) setMayHave() {
	s.mu.Lock()
	had := s.mayHave
	s.mayHave = true
	s.mu.Unlock()
	if !had {
		s.ar.Persist()
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// build makes the registration of one service and its checks.
func (s *Alloc) build(alloc *structs.Allocation, tg *structs.TaskGroup, tasks []Task, sp serviceSpec) (*structs.ServiceRegistration, []*checkSpec) {
	node := s.ar.Node()
	task := sp.task
	owner := "group-" + tg.Name
	envTask := &structs.Task{}
	if task != nil {
		owner, envTask = task.Name, task
	}
	env := taskenv.Build(taskenv.Input{Node: node, Alloc: alloc, Group: tg, Task: envTask, Region: s.cfg.Region, Path: s.cfg.Path})
	lookup := serviceLookup(env, alloc, tg, task)
	name := taskenv.Interpolate(sp.svc.Name, lookup)
	addr, port := serviceAddress(alloc, node, taskenv.Interpolate(sp.svc.PortLabel, lookup))
	if sp.svc.Address != "" {
		addr = taskenv.Interpolate(sp.svc.Address, lookup)
	}
	reg := &structs.ServiceRegistration{
		ID:          "_nomad-task-" + alloc.ID + "-" + owner + "-" + name + "-" + sp.svc.PortLabel,
		ServiceName: name,
		Namespace:   alloc.Namespace,
		JobID:       alloc.JobID,
		AllocID:     alloc.ID,
		Address:     addr,
		Port:        port,
	}
	if reg.Namespace == "" && alloc.Job != nil {
		reg.Namespace = alloc.Job.Namespace
	}
	if reg.Namespace == "" {
		reg.Namespace = "default"
	}
	if node != nil {
		reg.NodeID, reg.Datacenter = node.ID, node.Datacenter
	}
	for _, t := range sp.svc.Tags {
		reg.Tags = append(reg.Tags, taskenv.Interpolate(t, lookup))
	}
	var checks []*checkSpec
	for i, ck := range sp.svc.Checks {
		c := &checkSpec{
			regID: reg.ID, group: tg.Name, service: name, check: ck,
			mode: structs.CheckModeHealthiness,
		}
		if task != nil {
			c.task = task.Name
		}
		c.mode = checkMode(sp.svc, ck)
		c.ignoreWarnings = onUpdate(sp.svc, ck) == structs.OnUpdateIgnoreWarnings
		c.id = checkID(alloc.ID, tg.Name, c.task, name, i, ck.Name)
		switch ck.Type {
		case structs.ServiceCheckHTTP, structs.ServiceCheckTCP:
			caddr, cport := addr, port
			if ck.PortLabel != "" {
				caddr, cport = serviceAddress(alloc, node, taskenv.Interpolate(ck.PortLabel, lookup))
				if sp.svc.Address != "" {
					caddr = addr
				}
			}
			if caddr != "" && cport > 0 {
				c.addr = net.JoinHostPort(caddr, strconv.Itoa(cport))
			}
		}
		// check_restart restarts the check's task (a group service's
		// check names its task).
		if rt := ck.TaskName; rt != "" {
			c.restartTask = taskNamed(tasks, rt)
		} else if task != nil {
			c.restartTask = taskNamed(tasks, task.Name)
		}
		switch ck.Type {
		case structs.ServiceCheckScript:
			in := ck.TaskName
			if in == "" {
				in = sp.svc.TaskName
			}
			if in == "" && task != nil {
				in = task.Name
			}
			c.execIn = taskNamed(tasks, in)
		}
		checks = append(checks, c)
	}
	return reg, checks
}

// onUpdate is a check's on_update, its service's when unset.
func onUpdate(svc *structs.Service, ck *structs.ServiceCheck) string {
	if ck.OnUpdate != "" {
		return ck.OnUpdate
	}
	return svc.OnUpdate
}

// checkMode: a check with on_update "ignore" only reports readiness;
// every other decides the alloc's health.
func checkMode(svc *structs.Service, ck *structs.ServiceCheck) string {
	if onUpdate(svc, ck) == structs.OnUpdateIgnore {
		return structs.CheckModeReadiness
	}
	return structs.CheckModeHealthiness
}

// serviceLookup resolves `${…}` in a service's fields: the task env of
// the service's task (the group's for a group service) and Nomad's
// legacy JOB, TASKGROUP, TASK, ALLOC and BASE names.
func serviceLookup(env *taskenv.Env, alloc *structs.Allocation, tg *structs.TaskGroup, task *structs.Task) func(string) (string, bool) {
	legacy := map[string]string{"JOB": alloc.JobID, "TASKGROUP": tg.Name, "ALLOC": alloc.ID}
	if task != nil {
		legacy["TASK"] = task.Name
		legacy["BASE"] = alloc.JobID + "-" + tg.Name + "-" + task.Name
	} else {
		legacy["BASE"] = alloc.JobID + "-" + tg.Name
	}
	return func(ref string) (string, bool) {
		if v, ok := env.Lookup(ref); ok {
			return v, true
		}
		v, ok := legacy[ref]
		return v, ok
	}
}

// serviceAddress is the host address and port of a port label: the
// alloc's allocated port of that label (its host side), or a numeric
// label's number on the node's address. An empty or unknown label is
// port 0.
func serviceAddress(alloc *structs.Allocation, node *structs.Node, label string) (string, int) {
	nodeIP := ""
	if node != nil {
		nodeIP = node.Attributes["unique.network.ip-address"]
	}
	var ports []structs.AllocatedPortMapping
	if alloc.AllocatedResources != nil {
		ports = alloc.AllocatedResources.Shared.Ports
	}
	for _, p := range ports {
		if p.Label == label {
			return p.HostIP, p.Value
		}
	}
	if len(ports) > 0 && ports[0].HostIP != "" {
		nodeIP = ports[0].HostIP
	}
	if n, err := strconv.Atoi(label); err == nil && n > 0 {
		return nodeIP, n
	}
	return nodeIP, 0
}

// startChecks starts the goroutine of each wanted check not running.
func (s *Alloc) startChecks(want map[string]*checkSpec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, spec := range want {
		if _, running := s.stops[id]; running {
			continue
		}
		st := s.checks[id]
		if st == nil {
			h := initialHealth(spec.check.InitialStatus)
			st = &checkState{health: h, since: s.ar.Now()}
			st.spec = spec
			st.reported = st.status(h, 0, "", s.ar.Now())
			s.checks[id] = st
		} else {
			// Restored: resumes with the status it had.
			st.spec = spec
			st.since = s.ar.Now()
		}
		ctx, cancel := context.WithCancel(s.ctx)
		s.stops[id] = cancel
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.runCheckLoop(ctx, st)
		}()
	}
}

// stopChecks stops every running check not in keep (nil: all).
func (s *Alloc) stopChecks(keep map[string]*checkSpec) {
	s.mu.Lock()
	for id, cancel := range s.stops {
		if _, ok := keep[id]; !ok {
			cancel()
			delete(s.stops, id)
			delete(s.checks, id)
		}
	}
	s.mu.Unlock()
}

// Close stops every check and waits for their goroutines.
func (s *Alloc) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	for _, cancel := range s.stops {
		cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// runCheckLoop runs a check at its interval until ctx ends; a new status
// wakes the alloc runner, which re-registers the service.
func (s *Alloc) runCheckLoop(ctx context.Context, st *checkState) {
	interval := st.spec.check.Interval
	if interval <= 0 {
		interval = defaultCheckInterval
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		o := runCheck(ctx, st.spec)
		if ctx.Err() != nil {
			return
		}
		now := s.ar.Now()
		target := st.spec.restartTask
		var taskStart time.Time
		if target != nil {
			taskStart = target.LastStart()
		}
		s.mu.Lock()
		changed := st.observe(o, now)
		restart := target != nil && st.wantsRestart(o, taskStart, now)
		s.mu.Unlock()
		if restart {
			s.logger.Warn("restarting a task for its failing check", "task", target.Spec().Name, "service", st.spec.service, "check", st.spec.check.Name)
			target.RestartForCheck(ctx, st.spec.check.Name)
		}
		if changed {
			s.logger.Info("service check changed status", "service", st.spec.service, "check", st.spec.check.Name,
				"status", st.health.reported())
			// Reports the alloc (its health may follow the checks) and
			// wakes the run loop, which re-registers the service.
			s.ar.Changed()
		}
		timer.Reset(interval)
	}
}

// ChecksHealth tells whether the alloc's health waits for checks (some
// check of its group's services decides health) and, if so, since when
// every such check has passed (zero: one has not started or does not
// pass).
func (s *Alloc) ChecksHealth() (bool, time.Time) {
	var passingSince time.Time
	if s == nil {
		return false, time.Time{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.healthChecks == 0 {
		return false, time.Time{}
	}
	running := 0
	for id, st := range s.checks {
		if _, ok := s.stops[id]; !ok || st.spec == nil || st.spec.mode != structs.CheckModeHealthiness {
			continue
		}
		running++
		ok := st.health == checkPassing || st.health == checkWarning && st.spec.ignoreWarnings
		if !ok {
			return true, time.Time{}
		}
		if passingSince.IsZero() || st.since.After(passingSince) {
			passingSince = st.since
		}
	}
	if running < s.healthChecks {
		// Some checks have not started yet.
		return true, time.Time{}
	}
	return true, passingSince
}

// Results returns the latest result of every check (for tests and the
// alloc checks API).
func (s *Alloc) Results() map[string]*structs.CheckStatus {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]*structs.CheckStatus, len(s.checks))
	for id, st := range s.checks {
		if st.latest != nil {
			out[id] = st.latest
		} else if st.reported != nil {
			out[id] = st.reported
		}
	}
	return maps.Clone(out)
}

// group is the alloc's task group (nil: its job lacks it).
func group(a *structs.Allocation) *structs.TaskGroup {
	if a == nil || a.Job == nil {
		return nil
	}
	return a.Job.LookupTaskGroup(a.TaskGroup)
}

// mainOrSidecar reports whether a task is a main task or a sidecar: its
// checks decide the alloc's health, and its running opens the group's
// services. Prestart, poststart and poststop tasks that run to completion
// do not.
func mainOrSidecar(t *structs.Task) bool {
	return t.Lifecycle == nil || t.Lifecycle.Hook == "" || t.Lifecycle.Sidecar
}

// taskNamed is the task of that name (nil: none).
func taskNamed(tasks []Task, name string) Task {
	for _, t := range tasks {
		if t.Spec().Name == name {
			return t
		}
	}
	return nil
}
