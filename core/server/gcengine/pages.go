package gcengine

import (
	"fmt"
	"sort"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

// Page builders: the candidates of one collection, read from one state
// snapshot, with the facts sdk/proto/gc.proto defines, cut into pages
// within sdk/gc's bounds (MaxCandidates candidates, MaxObjects objects
// counting nested ones). A candidate whose nested objects do not fit an
// empty page is sent in part with its more flag set.
//
// The core leaves out candidates the safety floor forbids reaping in any
// case (non-terminal evals, jobs neither dead nor stopped, nodes not down,
// volumes without claims, tokens that never expire): sending them would
// cost a page and change no decision.

// pager accumulates candidates into pages. With emit set, each page is
// handed to emit as soon as it is full (and not kept), so that a run holds
// one page at a time however large the backlog; the first error emit
// returns is kept in *failed and no later page is emitted.
type pager struct {
	maxCandidates, maxObjects int
	// fill is how many objects a page is filled to before the next
	// candidate starts a new one: a candidate alone may take up to
	// maxObjects.
	fill       int
	emit       func(*gcpb.DecideRequest) error
	failed     *error
	pages      []*gcpb.DecideRequest
	cur        *gcpb.DecideRequest
	n, objects int
	newReq     func() *gcpb.DecideRequest
}

func newPager(limits Limits, newReq func() *gcpb.DecideRequest) *pager {
	fill := limits.Fill
	if fill <= 0 || fill > limits.Objects {
		fill = limits.Objects
	}
	return &pager{maxCandidates: limits.Candidates, maxObjects: limits.Objects, fill: fill, newReq: newReq}
}

// room makes room for a candidate of objects objects (one page at least)
// and returns how many nested objects it may carry.
func (p *pager) room(objects int) int {
	if p.cur == nil || p.n >= p.maxCandidates || p.objects+objects > p.fill {
		if p.cur == nil || p.n > 0 {
			p.flush()
			p.cur = p.newReq()
		}
	}
	return p.maxObjects - p.objects
}

func (p *pager) added(objects int) {
	p.n++
	p.objects += objects
}

func (p *pager) flush() {
	if p.cur != nil && p.n > 0 {
		switch {
		case p.emit == nil:
			p.pages = append(p.pages, p.cur)
		case *p.failed == nil:
			*p.failed = p.emit(p.cur)
		}
	}
	p.cur, p.n, p.objects = nil, 0, 0
}

func (p *pager) done() []*gcpb.DecideRequest {
	p.flush()
	return p.pages
}

// newPager is a pager emitting through f.emit (when set).
func (f *gcFacts) newPager(limits Limits, newReq func() *gcpb.DecideRequest) *pager {
	p := newPager(limits, newReq)
	if f.emit != nil {
		p.emit, p.failed = f.emit, &f.err
	}
	return p
}

// finish flushes the last page and returns the pages kept (none when
// emitting) with the first emit error.
func (f *gcFacts) finish(p *pager) ([]*gcpb.DecideRequest, error) {
	pages := p.done()
	return pages, f.err
}

// Limits are the page bounds (sdk/gc's; tests shrink them), and Fill,
// the objects a page is filled to (0: Objects).
type Limits struct{ Candidates, Objects, Fill int }

// gcFacts reads facts from one snapshot.
type gcFacts struct {
	snap *state.StateSnapshot
	// jobType is the declaration of a job type's plugin (Config.JobType);
	// nil knows none.
	jobType func(string) (structs.JobTypeBehavior, bool)
	// emit, when set, takes each page as it is built (see pager); err is
	// the first error it returned.
	emit func(*gcpb.DecideRequest) error
	err  error
	// jobs caches the jobs looked up for evals.
	jobs map[structs.NamespacedID]*structs.Job
}

func (f *gcFacts) job(ns, id string) (*structs.Job, error) {
	k := structs.NamespacedID{Namespace: ns, ID: id}
	if j, ok := f.jobs[k]; ok {
		return j, nil
	}
	j, err := f.snap.JobByID(nil, ns, id)
	if err != nil {
		return nil, err
	}
	f.jobs[k] = j
	return j, nil
}

func runsToCompletion(b *structs.JobTypeBehavior) bool { return b != nil && b.RunsToCompletion }

func jobFacts(j *structs.Job) *gcpb.Job {
	if j == nil {
		return nil
	}
	return &gcpb.Job{
		Id: j.ID, Namespace: j.Namespace, Status: j.Status, Stop: j.Stop,
		RunsToCompletion: runsToCompletion(j.TypeBehavior),
		Periodic:         j.IsPeriodic(), Parameterized: j.IsParameterized(),
		// Drover's jobs carry no version tags yet.
		TaggedVersion:      false,
		SubmitTimeUnixNano: j.SubmitTime,
		CreateIndex:        j.CreateIndex, ModifyIndex: j.ModifyIndex, JobModifyIndex: j.JobModifyIndex,
	}
}

// evalFacts: an eval runs to completion when its job's type does: the
// job's declaration when the job exists, else what the plugin serving the
// eval's type declares now.
func (f *gcFacts) evalFacts(e *structs.Evaluation, job *structs.Job) *gcpb.Eval {
	rtc := false
	if job != nil {
		rtc = runsToCompletion(job.TypeBehavior)
	} else if f.jobType != nil {
		if b, ok := f.jobType(e.Type); ok {
			rtc = b.RunsToCompletion
		}
	}
	return &gcpb.Eval{
		Id: e.ID, Namespace: e.Namespace, JobId: e.JobID, Status: e.Status, RunsToCompletion: rtc,
		CreateIndex: e.CreateIndex, ModifyIndex: e.ModifyIndex, ModifyTimeUnixNano: e.ModifyTime,
	}
}

// allocFacts: latest_job_version compares with the job as it is now (nil:
// gone); the reschedule policy is the group's, else its type's default.
func allocFacts(a *structs.Allocation, job *structs.Job) *gcpb.Alloc {
	out := &gcpb.Alloc{
		Id: a.ID, Namespace: a.Namespace, EvalId: a.EvalID, JobId: a.JobID, NodeId: a.NodeID,
		DesiredStatus: a.DesiredStatus, ClientStatus: a.ClientStatus,
		CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex, ModifyTimeUnixNano: a.ModifyTime,
		LatestJobVersion: job != nil && a.CreateIndex >= job.JobModifyIndex,
		NextAllocation:   a.NextAllocation,
	}
	spec := a.Job
	if spec == nil {
		spec = job
	}
	var policy *structs.ReschedulePolicy
	if spec != nil {
		if tg := spec.LookupTaskGroup(a.TaskGroup); tg != nil && tg.ReschedulePolicy != nil {
			policy = tg.ReschedulePolicy
		} else if spec.TypeBehavior != nil {
			policy = spec.TypeBehavior.DefaultReschedule
		}
	}
	r := &gcpb.Reschedule{}
	if policy != nil {
		r.PolicySet, r.Attempts, r.IntervalNs, r.Unlimited = true, int32(policy.Attempts), int64(policy.Interval), policy.Unlimited
	}
	if t := a.RescheduleTracker; t != nil && len(t.Events) > 0 {
		r.Events = int32(len(t.Events))
		if last := t.Events[len(t.Events)-1]; last != nil {
			r.LastEventUnixNano = last.RescheduleTime
		}
	}
	out.Reschedule = r
	return out
}

// evalPages: terminal evals, each with its allocations and its job.
func (f *gcFacts) evalPages(limits Limits, newReq func() *gcpb.DecideRequest) ([]*gcpb.DecideRequest, error) {
	evals, err := f.snap.Evals(nil)
	if err != nil {
		return nil, err
	}
	p := f.newPager(limits, newReq)
	for _, e := range evals {
		if f.err != nil {
			break // a page failed: the run stops
		}
		if !e.TerminalStatus() {
			continue
		}
		job, err := f.job(e.Namespace, e.JobID)
		if err != nil {
			return nil, err
		}
		allocs, err := f.snap.AllocsByEval(nil, e.ID)
		if err != nil {
			return nil, err
		}
		room := p.room(1 + len(allocs))
		c := &gcpb.EvalCandidate{Eval: f.evalFacts(e, job), Job: jobFacts(job)}
		if n := room - 1; len(allocs) > n {
			allocs, c.MoreAllocs = allocs[:n], true
		}
		for _, a := range allocs {
			c.Allocs = append(c.Allocs, allocFacts(a, job))
		}
		p.cur.Evals = append(p.cur.Evals, c)
		p.added(1 + len(allocs))
	}
	return f.finish(p)
}

// jobPages: jobs dead or stopped, each with every eval and allocation of
// the job's ID (earlier instances' ones too: they go with it).
func (f *gcFacts) jobPages(limits Limits, newReq func() *gcpb.DecideRequest) ([]*gcpb.DecideRequest, error) {
	jobs, err := f.snap.Jobs(nil)
	if err != nil {
		return nil, err
	}
	p := f.newPager(limits, newReq)
	for _, j := range jobs {
		if f.err != nil {
			break // a page failed: the run stops
		}
		if j.Status != structs.JobStatusDead && !j.Stop {
			continue
		}
		evals, err := f.snap.EvalsByJob(nil, j.Namespace, j.ID)
		if err != nil {
			return nil, err
		}
		allocs, err := f.snap.AllocsByJob(nil, j.Namespace, j.ID, true)
		if err != nil {
			return nil, err
		}
		room := p.room(1 + len(evals) + len(allocs))
		c := &gcpb.JobCandidate{Job: jobFacts(j)}
		n := room - 1
		if len(allocs) > n {
			allocs, c.More = allocs[:n], true
		}
		n -= len(allocs)
		if len(evals) > n {
			evals, c.More = evals[:n], true
		}
		for _, a := range allocs {
			c.Allocs = append(c.Allocs, allocFacts(a, j))
		}
		for _, e := range evals {
			c.Evals = append(c.Evals, f.evalFacts(e, j))
		}
		p.cur.Jobs = append(p.cur.Jobs, c)
		p.added(1 + len(evals) + len(allocs))
	}
	return f.finish(p)
}

// nodePages: down nodes with their count of live allocations.
func (f *gcFacts) nodePages(limits Limits, newReq func() *gcpb.DecideRequest) ([]*gcpb.DecideRequest, error) {
	nodes, err := f.snap.Nodes(nil)
	if err != nil {
		return nil, err
	}
	p := f.newPager(limits, newReq)
	for _, n := range nodes {
		if f.err != nil {
			break // a page failed: the run stops
		}
		if n.Status != structs.NodeStatusDown {
			continue
		}
		allocs, err := f.snap.AllocsByNode(nil, n.ID)
		if err != nil {
			return nil, err
		}
		var live int32
		for _, a := range allocs {
			if !a.ClientTerminalStatus() {
				live++
			}
		}
		p.room(1)
		p.cur.Nodes = append(p.cur.Nodes, &gcpb.Node{
			Id: n.ID, Status: n.Status, StatusUpdatedAtUnixNano: n.StatusUpdatedAt * 1e9,
			LiveAllocs: live, ModifyIndex: n.ModifyIndex,
		})
		p.added(1)
	}
	return f.finish(p)
}

// volumePages: volumes with claims, current and past, each with what its
// allocation is now.
func (f *gcFacts) volumePages(limits Limits, newReq func() *gcpb.DecideRequest) ([]*gcpb.DecideRequest, error) {
	vols, err := f.snap.CSIVolumesRaw(nil)
	if err != nil {
		return nil, err
	}
	p := f.newPager(limits, newReq)
	for _, v := range vols {
		if f.err != nil {
			break // a page failed: the run stops
		}
		claims := map[string]*structs.CSIVolumeClaim{}
		for _, m := range []map[string]*structs.CSIVolumeClaim{v.PastClaims, v.ReadClaims, v.WriteClaims} {
			for id, c := range m {
				if c != nil {
					claims[id] = c // a current claim wins over a past one
				}
			}
		}
		if len(claims) == 0 {
			continue
		}
		ids := sortedKeysOf(claims)
		room := p.room(len(ids))
		if len(ids) > room {
			// The rest waits for a later run: claims are bounded per
			// volume far below a page.
			ids = ids[:room]
		}
		out := &gcpb.CSIVolume{Id: v.ID, Namespace: v.Namespace, PluginId: v.PluginID,
			ModifyTimeUnixNano: v.ModifyTime, ModifyIndex: v.ModifyIndex}
		for _, id := range ids {
			c := claims[id]
			cf := &gcpb.CSIClaim{AllocId: id, NodeId: c.NodeID, Mode: c.Mode.String(), State: c.State.String()}
			a, err := f.snap.AllocByID(nil, id)
			if err != nil {
				return nil, err
			}
			if a != nil {
				cf.AllocExists, cf.AllocClientStatus, cf.AllocDesiredStatus = true, a.ClientStatus, a.DesiredStatus
			}
			out.Claims = append(out.Claims, cf)
		}
		p.cur.CsiVolumes = append(p.cur.CsiVolumes, out)
		p.added(len(ids))
	}
	return f.finish(p)
}

// pluginPages: every CSI plugin with its instances, jobs and volumes.
func (f *gcFacts) pluginPages(limits Limits, newReq func() *gcpb.DecideRequest) ([]*gcpb.DecideRequest, error) {
	plugins, err := f.snap.CSIPlugins(nil, "")
	if err != nil {
		return nil, err
	}
	p := f.newPager(limits, newReq)
	for _, pl := range plugins {
		if f.err != nil {
			break // a page failed: the run stops
		}
		vols, err := f.snap.CSIVolumes(nil, "", "", pl.ID)
		if err != nil {
			return nil, err
		}
		jobs := 0
		seen := map[structs.NamespacedID]bool{}
		for _, m := range []map[string]map[string]*structs.CSIPluginJob{pl.ControllerJobs, pl.NodeJobs} {
			for ns, byID := range m {
				for id := range byID {
					if k := (structs.NamespacedID{Namespace: ns, ID: id}); !seen[k] {
						seen[k] = true
						jobs++
					}
				}
			}
		}
		p.room(1)
		p.cur.CsiPlugins = append(p.cur.CsiPlugins, &gcpb.CSIPlugin{
			Id: pl.ID, ModifyTimeUnixNano: pl.ModifyTime, ModifyIndex: pl.ModifyIndex,
			Controllers: int32(len(pl.Controllers)), ControllersHealthy: int32(pl.ControllersHealthy),
			Nodes: int32(len(pl.Nodes)), NodesHealthy: int32(pl.NodesHealthy),
			Jobs: int32(jobs), ControllersExpected: int32(pl.ControllersExpected), NodesExpected: int32(pl.NodesExpected),
			Volumes: int32(len(vols)),
		})
		p.added(1)
	}
	return f.finish(p)
}

// oneTimeTokenPages: every one-time token.
func (f *gcFacts) oneTimeTokenPages(limits Limits, newReq func() *gcpb.DecideRequest) ([]*gcpb.DecideRequest, error) {
	otts, err := f.snap.OneTimeTokens(nil)
	if err != nil {
		return nil, err
	}
	p := f.newPager(limits, newReq)
	for _, o := range otts {
		if f.err != nil {
			break // a page failed: the run stops
		}
		p.room(1)
		p.cur.OneTimeTokens = append(p.cur.OneTimeTokens, &gcpb.OneTimeToken{
			AccessorId: o.AccessorID, ExpiresAtUnixNano: o.ExpiresAt.UnixNano(), ModifyIndex: o.ModifyIndex,
		})
		p.added(1)
	}
	return f.finish(p)
}

// aclTokenPages: ACL tokens that expire.
func (f *gcFacts) aclTokenPages(limits Limits, newReq func() *gcpb.DecideRequest) ([]*gcpb.DecideRequest, error) {
	toks, err := f.snap.ACLTokens(nil, "")
	if err != nil {
		return nil, err
	}
	p := f.newPager(limits, newReq)
	for _, t := range toks {
		if f.err != nil {
			break // a page failed: the run stops
		}
		if t.ExpirationTime == nil || t.ExpirationTime.IsZero() {
			continue
		}
		p.room(1)
		p.cur.AclTokens = append(p.cur.AclTokens, &gcpb.ACLToken{
			AccessorId: t.AccessorID, Global: t.Global, CreateTimeUnixNano: t.CreateTime.UnixNano(),
			ExpirationTimeUnixNano: t.ExpirationTime.UnixNano(), ModifyIndex: t.ModifyIndex,
		})
		p.added(1)
	}
	return f.finish(p)
}

func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// DefaultLimits are sdk/gc's page bounds, pages filled to pageObjects.
func DefaultLimits() Limits {
	return Limits{Candidates: sdkgc.MaxCandidates, Objects: sdkgc.MaxObjects, Fill: pageObjects}
}

// deploymentPages: every deployment, with whether it is active and how
// many of its allocations are still live on their clients.
func (f *gcFacts) deploymentPages(limits Limits, newReq func() *gcpb.DecideRequest) ([]*gcpb.DecideRequest, error) {
	ds, err := f.snap.DeploymentsByIDPrefix(nil, state.AllNamespaces, "")
	if err != nil {
		return nil, err
	}
	p := f.newPager(limits, newReq)
	for _, d := range ds {
		if f.err != nil {
			break // a page failed: the run stops
		}
		var live int32
		if !d.Active() {
			allocs, err := f.snap.AllocsByDeployment(nil, d)
			if err != nil {
				return nil, err
			}
			for _, a := range allocs {
				if !a.ClientTerminalStatus() {
					live++
				}
			}
		}
		p.room(1)
		p.cur.Deployments = append(p.cur.Deployments, &gcpb.Deployment{
			Id: d.ID, Namespace: d.Namespace, JobId: d.JobID, Active: d.Active(),
			ModifyTimeUnixNano: d.ModifyTime, LiveAllocs: live, ModifyIndex: d.ModifyIndex,
		})
		p.added(1)
	}
	return f.finish(p)
}

// pages builds (or, with f.emit, emits) the pages of collection c.
func (f *gcFacts) pages(c gcpb.Collection, lim Limits, newReq func() *gcpb.DecideRequest) ([]*gcpb.DecideRequest, error) {
	switch c {
	case gcpb.Collection_COLLECTION_EVAL:
		return f.evalPages(lim, newReq)
	case gcpb.Collection_COLLECTION_JOB:
		return f.jobPages(lim, newReq)
	case gcpb.Collection_COLLECTION_NODE:
		return f.nodePages(lim, newReq)
	case gcpb.Collection_COLLECTION_CSI_VOLUME_CLAIM:
		return f.volumePages(lim, newReq)
	case gcpb.Collection_COLLECTION_CSI_PLUGIN:
		return f.pluginPages(lim, newReq)
	case gcpb.Collection_COLLECTION_ONE_TIME_TOKEN:
		return f.oneTimeTokenPages(lim, newReq)
	case gcpb.Collection_COLLECTION_ACL_TOKEN:
		return f.aclTokenPages(lim, newReq)
	case gcpb.Collection_COLLECTION_DEPLOYMENT:
		return f.deploymentPages(lim, newReq)
	}
	return nil, fmt.Errorf("gc: no pages for collection %s", c)
}

// Candidates returns the pages of collection c's candidates in snap within
// lim, each made by newReq (which carries the time and thresholds): what a
// run offers the plugin, one page at a time. It only reads snap. jobType
// (nil: none known) declares the job types of evals whose job is gone.
func Candidates(snap *state.StateSnapshot, c gcpb.Collection, lim Limits,
	jobType func(string) (structs.JobTypeBehavior, bool), newReq func() *gcpb.DecideRequest) ([]*gcpb.DecideRequest, error) {
	f := &gcFacts{snap: snap, jobType: jobType, jobs: map[structs.NamespacedID]*structs.Job{}}
	return f.pages(c, lim, newReq)
}
