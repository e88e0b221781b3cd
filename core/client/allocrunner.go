package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/client/cni"
	"github.com/drover-org/drover/core/client/csi"
	"github.com/drover-org/drover/core/client/services"
	"github.com/drover-org/drover/core/client/taskfiles"
	"github.com/drover-org/drover/core/metrics"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/driver"
)

// Lifecycle hooks of a task (the jobspec's lifecycle { hook = ... }).
const (
	hookPrestart  = "prestart"
	hookPoststart = "poststart"
	hookPoststop  = "poststop"
)

// runnerConfig is what an alloc runner needs from the client. It is a
// struct of narrow dependencies, not the client itself, so that alloc
// runners are testable on their own.
type runnerConfig struct {
	Logger  hclog.Logger
	Metrics *metrics.Metrics
	Drivers DriverProvider
	// Node returns the node as last fingerprinted, for the task env.
	Node      func() *structs.Node
	Region    string
	Path      string
	AllocRoot string
	// Update receives each new client-side state of the alloc (a fresh
	// value the callee may keep).
	Update func(*structs.Allocation)
	// Persist, if set, stores the runner's state for a client restart.
	Persist func(*persistedAlloc)
	// CSI supervises the plugin tasks (nil: no csi-bridge).
	CSI *csi.Plugins
	// Volumes mounts the groups' CSI volumes (nil: no csi-bridge).
	Volumes *csi.Manager
	// Networks sets up allocs' own network namespaces (nil: this client
	// cannot, for the reason NetworksErr gives).
	Networks    *cni.Manager
	NetworksErr error
	// CrashAt, a test hook, is asked at each kill point of a task's exit
	// path; true simulates a client crash there (see killpoints.go).
	CrashAt func(allocID, task string, p killPoint) bool
	// Now is the clock of deployment health (nil: time.Now).
	Now func() time.Time
	// Services registers the allocs' native services with the servers
	// (nil: services are not registered and their checks do not run).
	Services *services.Registrar
	// LookupServices reads a service's registrations for templates'
	// nomadService (nil: templates cannot use it).
	LookupServices taskfiles.ServiceLookupFunc
	// LookupVariables reads variables for templates' nomadVar and
	// nomadVarList; the alloc and task are filled in per task (nil:
	// templates cannot use them).
	LookupVariables taskfiles.VariableLookupFunc
	// MaxKillTimeout caps the tasks' kill_timeout (0: no cap).
	MaxKillTimeout time.Duration
}

// allocRunner runs the tasks of one allocation in lifecycle order and
// derives the alloc's client status from them.
//
// Ordering (Nomad's lifecycle hooks): prestart tasks first, and main tasks
// once every non-sidecar prestart task has finished successfully; poststart
// tasks once every main task has started; when every main task is dead the
// sidecars are stopped; poststop tasks run last. A task that fails for good
// kills its siblings (poststop tasks still run), and so does the death of a
// leader task.
type allocRunner struct {
	id     string
	cfg    *runnerConfig
	logger hclog.Logger
	dir    *allocDir

	// ctx ends when the client shuts down: task runners then return
	// without touching their tasks.
	ctx    context.Context
	cancel context.CancelFunc

	tasks []*taskRunner // in the group's order; fixed after construction
	// persistFirst makes run persist the alloc before anything else: a
	// new alloc, not one restored from the state.
	persistFirst bool

	mu       sync.Mutex
	alloc    *structs.Allocation
	setupErr error
	stopReq  bool
	destroyR bool
	status   string
	crashed  bool // a simulated crash: no more reports or writes
	removed  bool // the alloc's state was deleted: no more writes

	// vols is how far the alloc's CSI volumes got (see csi.go).
	vols *csi.Volumes
	// hostVols is how far its host volume binds got (hostvolumes.go).
	hostVols hostVolumes

	// health is the alloc's deployment health tracking (health.go);
	// healthNext is when to evaluate it again without a task change.
	health     *allocHealth
	healthNext time.Time

	// svc is the alloc's native services (services_runner.go).
	svc allocServices

	// The alloc's network namespace (network_bridge.go): its pinned
	// path ("" in host mode or before setup), its reported status and
	// the group's hostname.
	netns     string
	netStatus *structs.AllocNetworkStatus
	hostname  string
	// resolvConf is the allocation's resolv.conf, written from the
	// group's dns block in an isolated network mode.
	resolvConf string

	changed chan struct{} // wakes run; capacity 1
	taskWG  sync.WaitGroup
	doneCh  chan struct{}
}

func newAllocRunner(parent context.Context, cfg *runnerConfig, alloc *structs.Allocation, prior *persistedAlloc) *allocRunner {
	ctx, cancel := context.WithCancel(parent)
	ar := &allocRunner{
		id:      alloc.ID,
		cfg:     cfg,
		logger:  cfg.Logger.With("alloc_id", alloc.ID),
		dir:     newAllocDir(cfg.AllocRoot, alloc.ID),
		ctx:     ctx,
		cancel:  cancel,
		alloc:   alloc,
		status:  structs.AllocClientStatusPending,
		changed: make(chan struct{}, 1),
		doneCh:  make(chan struct{}),
		svc:     noServices{},
	}
	var restored []*csi.MountState
	if prior != nil {
		restored = prior.CSI
		ar.hostVols.mounts = prior.HostVolumes
	}
	ar.vols = csi.NewVolumes(cfg.Volumes, alloc.ID, ar.dir.root, csiAlloc{ar}, restored, ar.logger)
	tg := ar.group()
	if tg == nil {
		ar.setupErr = fmt.Errorf("allocation has no task group %q in its job", alloc.TaskGroup)
		return ar
	}
	ar.svc = newAllocServices(ar, tg, prior)
	for _, t := range tg.Tasks {
		var pt *persistedTask
		if prior != nil {
			pt = prior.Tasks[t.Name]
		}
		ar.tasks = append(ar.tasks, newTaskRunner(ar, t, pt))
	}
	return ar
}

// group returns the alloc's task group, or nil when the job lacks it.
func (ar *allocRunner) group() *structs.TaskGroup {
	a := ar.allocSnapshot()
	if a.Job == nil {
		return nil
	}
	return a.Job.LookupTaskGroup(a.TaskGroup)
}

// typeBehavior is what the plugin serving the alloc's job type declared
// when the job was registered; nil when the job carries none, which reads
// as the zero behaviour (a job that keeps running).
func (ar *allocRunner) typeBehavior() *structs.JobTypeBehavior {
	if a := ar.allocSnapshot(); a.Job != nil {
		return a.Job.TypeBehavior
	}
	return nil
}

// allocSnapshot returns the alloc as the server last sent it. The value is
// shared and must not be modified.
func (ar *allocRunner) allocSnapshot() *structs.Allocation {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	return ar.alloc
}

func (ar *allocRunner) driver(name string) (driver.Driver, error) {
	if ar.cfg.Drivers == nil {
		return nil, fmt.Errorf("no task drivers configured")
	}
	return ar.cfg.Drivers.Driver(name)
}

func (ar *allocRunner) task(name string) *taskRunner {
	for _, tr := range ar.tasks {
		if tr.task.Name == name {
			return tr
		}
	}
	return nil
}

// done is closed once run has returned and every task goroutine with it.
func (ar *allocRunner) done() <-chan struct{} { return ar.doneCh }

// update takes a newer server version of the alloc; a desired stop or
// evict stops it.
func (ar *allocRunner) update(a *structs.Allocation) {
	ar.mu.Lock()
	moved := a.DeploymentID != "" && a.DeploymentID != ar.alloc.DeploymentID
	ar.alloc = a
	ar.mu.Unlock()
	if a.ServerTerminalStatus() {
		ar.stop()
	}
	if moved {
		// Joined a deployment in place: judge and report its health
		// (taskChanged persists too).
		ar.taskChanged()
		return
	}
	ar.persist()
	// The run loop follows the new version (its services).
	ar.notify()
}

// stop kills every task with its kill timeout; poststop tasks then run.
func (ar *allocRunner) stop() {
	ar.mu.Lock()
	ar.stopReq = true
	ar.mu.Unlock()
	ar.notify()
}

// destroy kills every task, poststop tasks included, for the alloc is
// going away. The caller waits on done before removing the alloc dir.
func (ar *allocRunner) destroy() {
	ar.mu.Lock()
	ar.stopReq, ar.destroyR = true, true
	ar.mu.Unlock()
	ar.notify()
}

// shutdown ends the runner without touching its tasks, for a client
// shutdown: the next client process recovers them.
func (ar *allocRunner) shutdown() { ar.cancel() }

func (ar *allocRunner) notify() {
	select {
	case ar.changed <- struct{}{}:
	default:
	}
}

// taskChanged reports the alloc's new client state and persists it. It
// runs under ar.mu so that reports leave in the order of the changes.
func (ar *allocRunner) taskChanged() {
	ar.mu.Lock()
	if ar.crashed {
		ar.mu.Unlock()
		return
	}
	states := make(map[string]*structs.TaskState, len(ar.tasks))
	snap := &persistedAlloc{Alloc: ar.alloc, Tasks: make(map[string]*persistedTask, len(ar.tasks)), CSI: ar.vols.Snapshot(), HostVolumes: ar.hostVols.snapshot(), Services: ar.svc.Persisted()}
	for _, tr := range ar.tasks {
		st, h := tr.snapshot()
		states[tr.task.Name] = st
		snap.Tasks[tr.task.Name] = newPersistedTask(st, h)
	}
	status, desc := clientStatus(states)
	if ar.setupErr != nil {
		status, desc = structs.AllocClientStatusFailed, ar.setupErr.Error()
	}
	ar.status = status
	a := ar.alloc
	ar.healthNext = ar.evalHealthLocked(states)
	upd := &structs.Allocation{
		ID: a.ID, Namespace: a.Namespace, NodeID: a.NodeID, JobID: a.JobID, TaskGroup: a.TaskGroup,
		ClientStatus: status, ClientDescription: desc, TaskStates: states, DeploymentStatus: ar.health.status(),
		NetworkStatus: reportedNetStatus(a, ar.netStatus),
	}
	if ar.cfg.Update != nil {
		ar.cfg.Update(upd)
	}
	if ar.cfg.Persist != nil && !ar.removed {
		ar.cfg.Persist(snap)
	}
	ar.mu.Unlock()
	ar.notify()
}

// persist stores the runner's state without reporting it.
func (ar *allocRunner) persist() {
	if ar.cfg.Persist == nil {
		return
	}
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if ar.crashed || ar.removed {
		return
	}
	snap := &persistedAlloc{Alloc: ar.alloc, Tasks: make(map[string]*persistedTask, len(ar.tasks)), CSI: ar.vols.Snapshot(), HostVolumes: ar.hostVols.snapshot(), Services: ar.svc.Persisted()}
	for _, tr := range ar.tasks {
		st, h := tr.snapshot()
		snap.Tasks[tr.task.Name] = newPersistedTask(st, h)
	}
	ar.cfg.Persist(snap)
}

// lifecycle tells a task's phase from its lifecycle block.
func lifecycle(t *structs.Task) (hook string, sidecar bool) {
	if t.Lifecycle == nil || t.Lifecycle.Hook == "" {
		return "", false
	}
	return t.Lifecycle.Hook, t.Lifecycle.Sidecar
}

// phases is the run loop's progress through the lifecycle.
type phases struct {
	prestart, main, poststart, poststop bool
	mainDeadHandled, stopHandled        bool
	destroyHandled                      bool
	failHandled, leaderHandled          bool
	// stopAt is when a stop kills the tasks: after the group's
	// shutdown_delay, which starts with the services' deregistration.
	stopAt time.Time
}

// run drives the alloc until every task is dead, or until the client
// shuts down.
func (ar *allocRunner) run() {
	defer close(ar.doneCh)
	defer ar.taskWG.Wait()
	defer ar.svc.Close()
	if ar.persistFirst {
		// A restart must know the alloc before any of its tasks
		// can start.
		ar.persist()
	}

	if ar.setupErr != nil {
		ar.logger.Error("cannot run allocation", "error", ar.setupErr)
		ar.taskChanged()
		return
	}
	if err := ar.dir.buildShared(); err != nil {
		ar.logger.Error("failed to build alloc dir", "error", err)
		for _, tr := range ar.tasks {
			tr.failBeforeStart(evSetupFailure(err))
		}
		return
	}
	ar.taskChanged()
	// The group's CSI volumes are mounted before any task starts (a
	// restored alloc keeps those it had); a failure fails the tasks.
	if !ar.allDone() {
		if err := ar.setupHostVolumes(); err != nil {
			ar.logger.Error("host volume setup failed", "error", err)
			for _, tr := range ar.tasks {
				tr.failBeforeStart(evSetupFailure(err))
			}
		} else {
			ar.runVolumeSetup()
		}
		if ar.ctx.Err() != nil {
			return
		}
	}
	// So is its network namespace (a restored alloc adopts its own).
	if !ar.allDone() {
		ar.runNetworkSetup()
		if ar.ctx.Err() != nil {
			return
		}
	}
	// Restored tasks that were running (or, holding the handle of their
	// last run, pending a restart) are resumed now, whatever their phase:
	// their phase came in the earlier client process.
	for _, tr := range ar.tasks {
		if tr.hasHandle() {
			ar.launch(tr)
		}
	}
	// A task that finished in the earlier process may still hold the
	// handle of its exited driver task: clean that up, never rerun it.
	for _, tr := range ar.tasks {
		if tr.dead() && tr.leftover() {
			ar.taskWG.Add(1)
			go func() {
				defer ar.taskWG.Done()
				tr.dropLeftover(ar.ctx)
			}()
		}
	}

	var ps phases
	for {
		ar.supervise(&ps)
		ar.advance(&ps)
		ar.syncServices(&ps)
		if ar.allDone() {
			ar.releaseVolumes()
			ar.releaseNetwork()
			return
		}
		var healthTimer, stopTimer <-chan time.Time
		var timer, stopT *time.Timer
		if next := ar.nextHealthCheck(); !next.IsZero() {
			timer = time.NewTimer(max(next.Sub(ar.now()), time.Millisecond))
			healthTimer = timer.C
		}
		if !ps.stopAt.IsZero() && !ps.stopHandled {
			stopT = time.NewTimer(max(ps.stopAt.Sub(ar.now()), time.Millisecond))
			stopTimer = stopT.C
		}
		select {
		case <-ar.changed:
		case <-healthTimer:
			ar.taskChanged() // evaluates health again and reports it
		case <-stopTimer:
		case <-ar.ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		if stopT != nil {
			stopT.Stop()
		}
		if ar.ctx.Err() != nil {
			return
		}
	}
}

// stopRequested reports whether the alloc is stopping (not destroyed).
func (ar *allocRunner) stopRequested() bool {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	return ar.stopReq && !ar.destroyR
}

// shutdownDelay is d unless the alloc's stop asked for none
// (no_shutdown_delay) or the alloc is being destroyed.
func (ar *allocRunner) shutdownDelay(d *time.Duration) time.Duration {
	if d == nil || *d <= 0 {
		return 0
	}
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if ar.destroyR {
		return 0
	}
	if nd := ar.alloc.DesiredTransition.NoShutdownDelay; nd != nil && *nd {
		return 0
	}
	return *d
}

// syncServices registers, updates or deregisters the alloc's services
// after a change: they go when the alloc stops or its main tasks end.
func (ar *allocRunner) syncServices(ps *phases) {
	if ar.ctx.Err() != nil {
		return
	}
	ar.mu.Lock()
	stopping := ar.stopReq || ar.destroyR || ar.alloc.ServerTerminalStatus()
	ar.mu.Unlock()
	stopping = stopping || ps.mainDeadHandled || ps.failHandled || ps.leaderHandled || ar.allDone()
	ar.svc.Sync(stopping)
}

// nextHealthCheck is when health must be evaluated again (zero: never
// without a task change).
func (ar *allocRunner) nextHealthCheck() time.Time {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	return ar.healthNext
}

// releaseVolumes undoes the alloc's CSI volumes once its tasks are dead.
func (ar *allocRunner) releaseVolumes() {
	ar.releaseHostVolumes()
	ar.vols.Release(ar.ctx)
}

func (ar *allocRunner) allDone() bool {
	for _, tr := range ar.tasks {
		select {
		case <-tr.doneCh:
		default:
			return false
		}
	}
	return true
}

// launch starts a task runner and wakes run when it finishes, since a
// finished task may open the next phase.
func (ar *allocRunner) launch(tr *taskRunner) {
	tr.launch(&ar.taskWG)
	ar.taskWG.Add(1)
	go func() {
		defer ar.taskWG.Done()
		select {
		case <-tr.doneCh:
			ar.notify()
		case <-ar.ctx.Done():
		}
	}()
}

// killWhere kills every task that match selects, with ev (which may be nil)
// as the reason; ev is copied per task.
func (ar *allocRunner) killWhere(ev func() *structs.TaskEvent, match func(tr *taskRunner) bool) {
	for _, tr := range ar.tasks {
		if match(tr) {
			var e *structs.TaskEvent
			if ev != nil {
				e = ev()
			}
			tr.kill(e)
		}
	}
}

func notPoststop(tr *taskRunner) bool {
	hook, _ := lifecycle(tr.task)
	return hook != hookPoststop
}

// supervise reacts to stops, failures and a dead leader by killing tasks.
func (ar *allocRunner) supervise(ps *phases) {
	ar.mu.Lock()
	stopReq, destroyReq := ar.stopReq, ar.destroyR
	ar.mu.Unlock()

	if stopReq && !ps.stopHandled && !destroyReq {
		if d := ar.shutdownDelay(ar.group().ShutdownDelay); d > 0 {
			if ps.stopAt.IsZero() {
				ps.stopAt = ar.now().Add(d)
				ar.logger.Info("waiting for the group's shutdown_delay before killing the tasks", "delay", d)
				ar.syncServices(ps) // deregisters them first
			}
		}
	}
	if stopReq && !ps.stopHandled && (destroyReq || ps.stopAt.IsZero() || !ar.now().Before(ps.stopAt)) {
		ps.stopHandled = true
		ar.logger.Info("stopping allocation")
		ar.killWhere(nil, notPoststop)
	}
	if destroyReq && !ps.destroyHandled {
		ps.destroyHandled = true
		ar.killWhere(nil, func(*taskRunner) bool { return true })
	}
	if !ps.failHandled {
		for _, tr := range ar.tasks {
			st, _ := tr.snapshot()
			if st.State == structs.TaskStateDead && st.Failed {
				ps.failHandled = true
				ar.logger.Warn("task failed; killing its siblings", "task", tr.task.Name)
				failed := tr.task.Name
				ar.killWhere(func() *structs.TaskEvent { return evSiblingFailed(failed) },
					func(o *taskRunner) bool { return o != tr && notPoststop(o) })
				break
			}
		}
	}
	if !ps.leaderHandled {
		for _, tr := range ar.tasks {
			if tr.task.Leader && tr.dead() {
				ps.leaderHandled = true
				ar.killWhere(evLeaderDead, func(o *taskRunner) bool { return o != tr && notPoststop(o) })
				break
			}
		}
	}
}

// advance launches the tasks whose phase has come.
func (ar *allocRunner) advance(ps *phases) {
	var pre, main, post, stop []*taskRunner
	for _, tr := range ar.tasks {
		switch hook, _ := lifecycle(tr.task); hook {
		case hookPrestart:
			pre = append(pre, tr)
		case hookPoststart:
			post = append(post, tr)
		case hookPoststop:
			stop = append(stop, tr)
		default:
			main = append(main, tr)
		}
	}
	if !ps.prestart {
		ps.prestart = true
		for _, tr := range pre {
			ar.launch(tr)
		}
	}
	if !ps.main {
		for _, tr := range pre {
			if _, sidecar := lifecycle(tr.task); sidecar {
				continue
			}
			if st, _ := tr.snapshot(); st.State != structs.TaskStateDead || st.Failed {
				return
			}
		}
		ps.main = true
		for _, tr := range main {
			ar.launch(tr)
		}
	}
	if !ps.poststart && all(main, func(st *structs.TaskState) bool { return st.State != structs.TaskStatePending }) {
		ps.poststart = true
		for _, tr := range post {
			ar.launch(tr)
		}
	}
	if !ps.mainDeadHandled && all(main, isDead) {
		ps.mainDeadHandled = true
		ar.killWhere(evMainDead, notPoststop)
	}
	if !ps.poststop && all(pre, isDead) && all(main, isDead) && all(post, isDead) {
		ps.poststop = true
		for _, tr := range stop {
			ar.launch(tr)
		}
	}
}

func isDead(st *structs.TaskState) bool { return st.State == structs.TaskStateDead }

func all(trs []*taskRunner, pred func(*structs.TaskState) bool) bool {
	for _, tr := range trs {
		if st, _ := tr.snapshot(); !pred(st) {
			return false
		}
	}
	return true
}
