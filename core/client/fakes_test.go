package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// testTimeout bounds every wait in these tests; it only matters on failure.
const testTimeout = 20 * time.Second

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitForDiag(t, what, cond, nil)
}

// waitForDiag is waitFor that says what it saw (diag) when it times out.
func waitForDiag(t testing.TB, what string, cond func() bool, diag func() string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			if diag != nil {
				t.Fatalf("timed out waiting for %s: %s", what, diag())
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// fakeTaskConfig is the fake driver's schema for a task's config block.
type fakeTaskConfig struct {
	// ExitCode, when set, makes the task exit at once with it; otherwise
	// the task runs until stopped or finished by the test.
	ExitCode *int `json:"exit_code"`
	// FailFirst makes the first N starts exit 1 at once.
	FailFirst int `json:"fail_first"`
	// StartError fails StartTask; Invalid makes it ErrInvalidConfig.
	StartError string `json:"start_error"`
	Invalid    bool   `json:"invalid"`
	// Echo is recorded, to check interpolation.
	Echo string `json:"echo"`
}

// fakeWorld is the fake driver's "host": tasks live here, so that they
// survive a fake driver (plugin) or client restart like real processes.
type fakeWorld struct {
	mu     sync.Mutex
	tasks  map[string]*fakeTask
	starts []string // task names in start order
	byName map[string]int
	stops  []stopCall
}

type stopCall struct {
	ID      string
	Timeout time.Duration
	Signal  string
}

type fakeTask struct {
	cfg    *driverpb.TaskConfig
	fc     fakeTaskConfig
	exitCh chan struct{}
	result *driverpb.ExitResult
}

func newFakeWorld() *fakeWorld {
	return &fakeWorld{tasks: map[string]*fakeTask{}, byName: map[string]int{}}
}

// finish makes a running task exit with code.
func (w *fakeWorld) finish(id string, code int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.tasks[id]; ok && t.result == nil {
		t.result = &driverpb.ExitResult{ExitCode: code}
		close(t.exitCh)
	}
}

func (w *fakeWorld) startCount(task string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byName[task]
}

func (w *fakeWorld) startOrder() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.starts...)
}

func (w *fakeWorld) config(id string) *driverpb.TaskConfig {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.tasks[id]; ok {
		return t.cfg
	}
	return nil
}

func (w *fakeWorld) stopCalls() []stopCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]stopCall(nil), w.stops...)
}

func (w *fakeWorld) running(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.tasks[id]
	return ok && t.result == nil
}

// fakeDriver is one "plugin process" over a world: it tracks the tasks it
// started or recovered.
type fakeDriver struct {
	w       *fakeWorld
	mu      sync.Mutex
	tracked map[string]bool
}

var _ driver.Driver = (*fakeDriver)(nil)

func newFakeDriver(w *fakeWorld) *fakeDriver {
	return &fakeDriver{w: w, tracked: map[string]bool{}}
}

func (d *fakeDriver) Info(context.Context) (*driverpb.InfoResponse, error) {
	return &driverpb.InfoResponse{Name: "fake", Version: "1"}, nil
}

func (d *fakeDriver) Fingerprint(context.Context) (*driverpb.FingerprintResponse, error) {
	return &driverpb.FingerprintResponse{Detected: true, Healthy: true, HealthDescription: "Healthy",
		Attributes: map[string]string{"driver.fake": "1"}}, nil
}

func (d *fakeDriver) task(id string) (*fakeTask, error) {
	d.mu.Lock()
	tracked := d.tracked[id]
	d.mu.Unlock()
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	t, ok := d.w.tasks[id]
	if !tracked || !ok {
		return nil, fmt.Errorf("%w: %s", driver.ErrTaskNotFound, id)
	}
	return t, nil
}

func (d *fakeDriver) StartTask(_ context.Context, cfg *driverpb.TaskConfig) (*driverpb.TaskHandle, error) {
	var fc fakeTaskConfig
	if err := json.Unmarshal(cfg.GetConfigJson(), &fc); err != nil {
		return nil, fmt.Errorf("%w: %v", driver.ErrInvalidConfig, err)
	}
	if fc.Invalid {
		return nil, fmt.Errorf("%w: %s", driver.ErrInvalidConfig, fc.StartError)
	}
	if fc.StartError != "" {
		return nil, errors.New(fc.StartError)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tracked[cfg.GetId()] {
		return nil, fmt.Errorf("%w: %s", driver.ErrTaskExists, cfg.GetId())
	}
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	d.w.byName[cfg.GetTaskName()]++
	n := d.w.byName[cfg.GetTaskName()]
	d.w.starts = append(d.w.starts, cfg.GetTaskName())
	t := &fakeTask{cfg: cfg, fc: fc, exitCh: make(chan struct{})}
	switch {
	case n <= fc.FailFirst:
		t.result = &driverpb.ExitResult{ExitCode: 1}
		close(t.exitCh)
	case fc.ExitCode != nil:
		t.result = &driverpb.ExitResult{ExitCode: int32(*fc.ExitCode)}
		close(t.exitCh)
	}
	d.w.tasks[cfg.GetId()] = t
	d.tracked[cfg.GetId()] = true
	return &driverpb.TaskHandle{Id: cfg.GetId(), Pid: int64(1000 + n), State: []byte("fake:" + cfg.GetId())}, nil
}

func (d *fakeDriver) WaitTask(ctx context.Context, id string) (*driverpb.ExitResult, error) {
	t, err := d.task(id)
	if err != nil {
		return nil, err
	}
	select {
	case <-t.exitCh:
		d.w.mu.Lock()
		defer d.w.mu.Unlock()
		return t.result, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (d *fakeDriver) StopTask(_ context.Context, id string, timeout time.Duration, signal string) error {
	if _, err := d.task(id); err != nil {
		return err
	}
	d.w.mu.Lock()
	d.w.stops = append(d.w.stops, stopCall{ID: id, Timeout: timeout, Signal: signal})
	d.w.mu.Unlock()
	d.kill(id)
	return nil
}

func (d *fakeDriver) kill(id string) {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	if t := d.w.tasks[id]; t != nil && t.result == nil {
		t.result = &driverpb.ExitResult{ExitCode: 143, Signal: 15}
		close(t.exitCh)
	}
}

func (d *fakeDriver) DestroyTask(_ context.Context, id string, force bool) error {
	t, err := d.task(id)
	if err != nil {
		return err
	}
	d.w.mu.Lock()
	running := t.result == nil
	d.w.mu.Unlock()
	if running && !force {
		return fmt.Errorf("%w: %s", driver.ErrTaskRunning, id)
	}
	d.kill(id)
	d.mu.Lock()
	delete(d.tracked, id)
	d.mu.Unlock()
	d.w.mu.Lock()
	delete(d.w.tasks, id)
	d.w.mu.Unlock()
	return nil
}

func (d *fakeDriver) InspectTask(_ context.Context, id string) (*driverpb.TaskStatus, error) {
	t, err := d.task(id)
	if err != nil {
		return nil, err
	}
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	st := &driverpb.TaskStatus{Id: id, State: driverpb.TaskState_TASK_STATE_RUNNING}
	if t.result != nil {
		st.State, st.ExitResult = driverpb.TaskState_TASK_STATE_EXITED, t.result
	}
	return st, nil
}

func (d *fakeDriver) SignalTask(_ context.Context, id, _ string) error {
	_, err := d.task(id)
	return err
}

func (d *fakeDriver) RecoverTask(_ context.Context, h *driverpb.TaskHandle) error {
	d.w.mu.Lock()
	_, ok := d.w.tasks[h.GetId()]
	d.w.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s", driver.ErrTaskNotFound, h.GetId())
	}
	if string(h.GetState()) != "fake:"+h.GetId() {
		return fmt.Errorf("%w: foreign handle", driver.ErrInvalidConfig)
	}
	d.mu.Lock()
	d.tracked[h.GetId()] = true
	d.mu.Unlock()
	return nil
}

// fakeProvider serves named drivers.
type fakeProvider map[string]driver.Driver

func (p fakeProvider) Driver(name string) (driver.Driver, error) {
	d, ok := p[name]
	if !ok {
		return nil, fmt.Errorf("unknown driver %q", name)
	}
	return d, nil
}

func (p fakeProvider) Names() []string {
	out := make([]string, 0, len(p))
	for k := range p {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// fakeServer is an in-memory ServerConn with blocking alloc queries.
type fakeServer struct {
	mu        sync.Mutex
	ttl       time.Duration
	nodes     map[string]*structs.Node
	registers int
	beats     int
	// forget makes the next heartbeat answer "node not found".
	forget  bool
	allocs  map[string]*structs.Allocation
	index   uint64
	wake    chan struct{}
	batches [][]*structs.Allocation
	csi     fakeCSI
	// services: the client's service registration updates, in order.
	services fakeServices
}

func newFakeServer() *fakeServer {
	return &fakeServer{
		ttl: time.Second, nodes: map[string]*structs.Node{},
		allocs: map[string]*structs.Allocation{}, index: 1, wake: make(chan struct{}),
	}
}

func (s *fakeServer) RegisterNode(_ context.Context, n *structs.Node) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.registers++
	s.nodes[n.ID] = n.Copy()
	return s.ttl, nil
}

func (s *fakeServer) Heartbeat(_ context.Context, nodeID, secretID string) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[nodeID]
	if s.forget {
		s.forget, ok = false, false
		delete(s.nodes, nodeID)
	}
	if !ok {
		return 0, structs.NewError(structs.ErrNotFound, "node %q not found", nodeID)
	}
	if n.SecretID != secretID {
		return 0, structs.NewError(structs.ErrPermissionDenied, "bad secret")
	}
	s.beats++
	n.Status = structs.NodeStatusReady
	return s.ttl, nil
}

func (s *fakeServer) Allocs(ctx context.Context, nodeID, _ string, minIndex uint64, maxWait time.Duration) ([]*structs.Allocation, uint64, error) {
	timer := time.NewTimer(maxWait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if s.index > minIndex {
			var out []*structs.Allocation
			for _, a := range s.allocs {
				if a.NodeID == nodeID {
					out = append(out, a.Copy())
				}
			}
			idx := s.index
			s.mu.Unlock()
			return out, idx, nil
		}
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-timer.C:
			return nil, minIndex, nil
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
}

func (s *fakeServer) UpdateAllocs(_ context.Context, _, _ string, allocs []*structs.Allocation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, allocs)
	for _, u := range allocs {
		if a, ok := s.allocs[u.ID]; ok {
			a.ClientStatus, a.ClientDescription, a.TaskStates = u.ClientStatus, u.ClientDescription, u.TaskStates
			if u.DeploymentStatus != nil {
				a.DeploymentStatus = u.DeploymentStatus
			}
			if u.NetworkStatus != nil {
				a.NetworkStatus = u.NetworkStatus
			}
		}
	}
	return nil
}

// upsert adds or replaces an alloc as a server-side write (bumping the
// alloc's AllocModifyIndex) and wakes blocked queries.
func (s *fakeServer) upsert(a *structs.Allocation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index++
	a.AllocModifyIndex = s.index
	s.allocs[a.ID] = a
	close(s.wake)
	s.wake = make(chan struct{})
}

// setDesired changes an alloc's desired status.
func (s *fakeServer) setDesired(id, desired string) {
	s.mu.Lock()
	a := s.allocs[id].Copy()
	s.mu.Unlock()
	a.DesiredStatus = desired
	s.upsert(a)
}

func (s *fakeServer) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index++
	delete(s.allocs, id)
	close(s.wake)
	s.wake = make(chan struct{})
}

func (s *fakeServer) clientStatus(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.allocs[id]; ok {
		return a.ClientStatus
	}
	return ""
}

func (s *fakeServer) alloc(id string) *structs.Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.allocs[id].Copy()
}

func (s *fakeServer) counts() (registers, beats int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registers, s.beats
}

func (s *fakeServer) node(id string) *structs.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes[id].Copy()
}

// Job type behaviours as the leader stamps them into registered jobs
// (Job.TypeBehavior), with the restart-relevant values the built-in
// sysbatch and system plugins declare. The client reads nothing else about
// a job's type.
var (
	runsToCompletionBehavior = &structs.JobTypeBehavior{
		RunsToCompletion: true,
		DefaultRestart:   &structs.RestartPolicy{Attempts: 3, Interval: 24 * time.Hour, Delay: 15 * time.Second, Mode: structs.RestartPolicyModeFail},
	}
	keepsRunningBehavior = &structs.JobTypeBehavior{
		RunningUntilStopped: true,
		DefaultRestart:      &structs.RestartPolicy{Attempts: 2, Interval: 30 * time.Minute, Delay: 15 * time.Second, Mode: structs.RestartPolicyModeFail},
	}
)

// testTypeBehavior returns the declaration a job of jobType carries in the
// tests: batch and sysbatch run to completion, every other type keeps
// running.
func testTypeBehavior(jobType string) *structs.JobTypeBehavior {
	switch jobType {
	case "batch", "sysbatch":
		return runsToCompletionBehavior.Copy()
	}
	return keepsRunningBehavior.Copy()
}

// testJob builds a canonicalized job with one group of the given tasks,
// carrying testTypeBehavior(jobType) as a registered job does.
func testJob(jobType string, tasks ...*structs.Task) *structs.Job {
	return testJobWith(jobType, testTypeBehavior(jobType), tasks...)
}

// testJobWith is testJob with the type's declaration given.
func testJobWith(jobType string, behavior *structs.JobTypeBehavior, tasks ...*structs.Task) *structs.Job {
	j := &structs.Job{ID: "example", Type: jobType, TypeBehavior: behavior, TaskGroups: []*structs.TaskGroup{{
		Name: "web", Count: 1, Tasks: tasks,
		RestartPolicy: &structs.RestartPolicy{Attempts: 0, Interval: time.Minute, Delay: time.Millisecond, Mode: structs.RestartPolicyModeFail},
	}}}
	j.Canonicalize()
	return j
}

// fakeTaskSpec builds a task for the fake driver with a JSON config.
func fakeTaskSpec(name, config string) *structs.Task {
	var cfg map[string]any
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		panic(err)
	}
	return &structs.Task{Name: name, Driver: "fake", Config: cfg, KillTimeout: 3 * time.Second}
}

func testAlloc(id, nodeID string, job *structs.Job) *structs.Allocation {
	return &structs.Allocation{
		ID: id, Namespace: job.Namespace, Name: structs.AllocName(job.ID, "web", 0), NodeID: nodeID,
		JobID: job.ID, Job: job, TaskGroup: "web", DesiredStatus: structs.AllocDesiredStatusRun,
		ClientStatus: structs.AllocClientStatusPending,
	}
}

// fakeCSI is the volume side of fakeServer: claims answer from vols
// (after the queued claimErrs), and every call is recorded in log.
type fakeCSI struct {
	mu          sync.Mutex
	log         *callLog
	vols        map[string]*structs.CSIVolume
	claimErrs   []error
	releaseErrs []error // answers of the next UnpublishVolume calls
	claims      []*structs.CSIVolumeClaimArgs
	unpublishes []*structs.CSIVolumeUnpublishArgs
	opsCh       chan []*structs.CSIControllerOp
	done        []*structs.CSIControllerDoneArgs
}

// callLog records calls in order, across fakes.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(format string, args ...any) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *callLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

func (s *fakeServer) ClaimVolume(_ context.Context, args *structs.CSIVolumeClaimArgs) (*structs.CSIVolumeClaimReply, error) {
	f := &s.csi
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims = append(f.claims, args)
	if len(f.claimErrs) > 0 {
		err := f.claimErrs[0]
		f.claimErrs = f.claimErrs[1:]
		f.log.add("claim-error %s", args.VolumeID)
		return nil, err
	}
	v, ok := f.vols[args.VolumeID]
	if !ok {
		return nil, structs.NewError(structs.ErrNotFound, "no such volume %q", args.VolumeID)
	}
	f.log.add("claim %s %s", args.VolumeID, args.Mode)
	return &structs.CSIVolumeClaimReply{Volume: v.Copy(), PublishContext: map[string]string{"dev": "x"},
		Claim: &structs.CSIVolumeClaim{AllocationID: args.AllocationID, NodeID: args.NodeID, Mode: args.Mode}}, nil
}

func (s *fakeServer) UnpublishVolume(_ context.Context, args *structs.CSIVolumeUnpublishArgs) (*structs.CSIVolumeUnpublishReply, error) {
	f := &s.csi
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unpublishes = append(f.unpublishes, args)
	if len(f.releaseErrs) > 0 {
		err := f.releaseErrs[0]
		f.releaseErrs = f.releaseErrs[1:]
		f.log.add("release-error %s %s %s", args.VolumeID, args.Claim.AllocationID, args.Claim.State)
		return nil, err
	}
	f.log.add("release %s %s %s", args.VolumeID, args.Claim.AllocationID, args.Claim.State)
	return &structs.CSIVolumeUnpublishReply{}, nil
}

func (s *fakeServer) ControllerOps(ctx context.Context, args *structs.CSIControllerPollArgs) (*structs.CSIControllerPollReply, error) {
	s.csi.mu.Lock()
	ch := s.csi.opsCh
	s.csi.mu.Unlock()
	t := time.NewTimer(time.Duration(args.MaxWait))
	defer t.Stop()
	select {
	case ops := <-ch:
		return &structs.CSIControllerPollReply{Ops: ops}, nil
	case <-t.C:
		return &structs.CSIControllerPollReply{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *fakeServer) ControllerDone(_ context.Context, args *structs.CSIControllerDoneArgs) error {
	s.csi.mu.Lock()
	defer s.csi.mu.Unlock()
	s.csi.done = append(s.csi.done, args)
	return nil
}

// fakeServices is the fake server's service registrations.
type fakeServices struct {
	mu      sync.Mutex
	updates []*structs.ServiceRegistrationNodeArgs
	// fail makes the next UpdateServices calls fail.
	fail int
	// wake is closed (and replaced) by each accepted update, for
	// blocking lookups.
	wake chan struct{}
	// waiting counts the blocking lookups begun.
	waiting int
}

// blockingLookups is how many blocking service lookups have begun.
func (s *fakeServer) blockingLookups() int {
	s.services.mu.Lock()
	defer s.services.mu.Unlock()
	return s.services.waiting
}

// index is the lookups' index (mu held).
func (s *fakeServices) index() uint64 { return uint64(len(s.updates)) + 1 }

// UpdateServices records the client's service registration updates.
func (s *fakeServer) UpdateServices(_ context.Context, args *structs.ServiceRegistrationNodeArgs) error {
	s.services.mu.Lock()
	defer s.services.mu.Unlock()
	if s.services.fail > 0 {
		s.services.fail--
		return structs.NewError(structs.ErrUnavailable, "no leader")
	}
	s.services.updates = append(s.services.updates, args)
	if s.services.wake != nil {
		close(s.services.wake)
	}
	s.services.wake = make(chan struct{})
	return nil
}

// LookupServices answers from the registrations the client upserted
// and has not deleted; with MinIndex set it blocks until an update passes
// it (or MaxWait or ctx ends). Its index is 1 + the updates so far: as a
// real server's, never 0, so that a client blocking on max(index, 1)
// wakes at the first update.
func (s *fakeServer) LookupServices(ctx context.Context, args *structs.ServiceLookupArgs) (*structs.ServiceLookupReply, error) {
	s.services.mu.Lock()
	defer s.services.mu.Unlock()
	if args.MinIndex > 0 {
		s.services.waiting++
		var timeout <-chan time.Time
		if args.MaxWait > 0 {
			t := time.NewTimer(args.MaxWait)
			defer t.Stop()
			timeout = t.C
		}
		for s.services.index() <= args.MinIndex {
			if s.services.wake == nil {
				s.services.wake = make(chan struct{})
			}
			wake := s.services.wake
			s.services.mu.Unlock()
			select {
			case <-wake:
			case <-timeout:
			case <-ctx.Done():
			}
			s.services.mu.Lock()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			select {
			case <-timeout:
				timeout = nil
				args = &structs.ServiceLookupArgs{Namespace: args.Namespace, ServiceName: args.ServiceName}
			default:
			}
			if args.MinIndex == 0 {
				break
			}
		}
	}
	byID := map[string]*structs.ServiceRegistration{}
	for _, u := range s.services.updates {
		for _, r := range u.Upsert {
			byID[r.ID] = r
		}
		for _, id := range u.DeleteAllocIDs {
			for k, r := range byID {
				if r.AllocID == id {
					delete(byID, k)
				}
			}
		}
	}
	out := &structs.ServiceLookupReply{Index: s.services.index()}
	for _, r := range byID {
		if r.ServiceName == args.ServiceName && r.Namespace == args.Namespace {
			out.Services = append(out.Services, r)
		}
	}
	slices.SortFunc(out.Services, func(a, b *structs.ServiceRegistration) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
