// Package gc is drover's default garbage-collection plugin: the rules of
// Nomad's core GC jobs (eval, job, node, deployment, CSI claim, CSI plugin,
// one-time token and expired ACL token GC), written as pure functions of one
// page of candidates. It decides; the core re-checks and applies.
//
// Where drover differs from Nomad on purpose: the latest allocations of
// every job type that runs to completion (batch and sysbatch alike) are kept
// while the job is, and its evals age by batch_eval_gc_threshold; Nomad
// protects batch only, so a sysbatch allocation it reaps can run again on
// its node. And an allocation whose client status is not terminal is never
// collected, whatever its desired status (Nomad lets a stopped, still
// pending one go).
//
// Its config block (Settings) can only narrow or pace the rules:
// keep_failed_allocs keeps failed allocations (and so their evals and
// jobs), max_reaps_per_page bounds the candidates reaped on one page.
package gc

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-org/drover/sdk/base"
	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/basepb"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

// Name and Version are what Info reports.
const (
	Name    = "gc"
	Version = "0.1.0"
)

// Settings is the plugin's config block in the agent:
//
//	plugin "gc" {
//	  config {
//	    keep_failed_allocs = true
//	    max_reaps_per_page = 50
//	  }
//	}
//
// Both only narrow or pace what the rules reap, as a config must: the
// floor of sdk/gc (what may never be reaped) is the core's and holds
// whatever the config says.
type Settings struct {
	KeepFailedAllocs bool `hcl:"keep_failed_allocs,optional" doc:"Keep every failed allocation, whatever its age, and so its eval and its job, for post-mortems. Off: a failed allocation goes by Nomad's rules."`
	MaxReapsPerPage  int  `hcl:"max_reaps_per_page,optional" doc:"The most candidates reaped on one page (a job with its evals and allocations counts once); the rest are kept until a later pass. 0: no bound."`
}

// DefaultSettings are the settings of an empty config block: Nomad's
// rules, unpaced.
var DefaultSettings = Settings{}

// ValidateSettings refuses settings outside their ranges.
func ValidateSettings(s Settings) []*basepb.FieldError {
	if s.MaxReapsPerPage < 0 {
		return []*basepb.FieldError{base.FieldErrorf("max_reaps_per_page", "must not be negative (0: no bound), not %d", s.MaxReapsPerPage)}
	}
	return nil
}

// Collector is the default GC plugin. It holds no state but its settings.
type Collector struct {
	cfg *base.Config[Settings]
}

// New returns the default GC plugin with DefaultSettings.
func New() *Collector {
	return &Collector{cfg: base.MustConfig(DefaultSettings, ValidateSettings)}
}

var (
	_ sdkgc.Collector   = (*Collector)(nil)
	_ base.Configurable = (*Collector)(nil)
)

// PluginConfig is the config block the agent hands the plugin before its
// first page.
func (c *Collector) PluginConfig() base.Settable { return c.cfg }

// Settings returns the settings in force.
func (c *Collector) Settings() Settings { return c.cfg.Get() }

// Info reports every collection: the default plugin decides them all.
func (*Collector) Info(context.Context) (*gcpb.InfoResponse, error) {
	return &gcpb.InfoResponse{Name: Name, Version: Version, Collections: []gcpb.Collection{
		gcpb.Collection_COLLECTION_EVAL,
		gcpb.Collection_COLLECTION_JOB,
		gcpb.Collection_COLLECTION_NODE,
		gcpb.Collection_COLLECTION_DEPLOYMENT,
		gcpb.Collection_COLLECTION_CSI_VOLUME_CLAIM,
		gcpb.Collection_COLLECTION_CSI_PLUGIN,
		gcpb.Collection_COLLECTION_ONE_TIME_TOKEN,
		gcpb.Collection_COLLECTION_ACL_TOKEN,
	}}, nil
}

// Decide decides one page with the settings in force; see DecideWith.
func (c *Collector) Decide(_ context.Context, req *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
	return DecideWith(req, c.cfg.Get())
}

// Decide decides one page with DefaultSettings; see DecideWith.
func Decide(req *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
	return DecideWith(req, DefaultSettings)
}

// DecideWith decides one page: a decision for every object it looks at,
// in page order. It refuses a request outside the protocol.
func DecideWith(req *gcpb.DecideRequest, s Settings) (*gcpb.DecideResponse, error) {
	if _, err := sdkgc.ValidateRequest(req); err != nil {
		return nil, err
	}
	d := &decider{now: req.GetNowUnixNano(), t: req.GetThresholds(), auth: req.GetAuthoritativeRegion(), s: s}
	switch req.GetCollection() {
	case gcpb.Collection_COLLECTION_EVAL:
		for _, c := range req.GetEvals() {
			d.candidate(func() { d.evalCandidate(c) })
		}
	case gcpb.Collection_COLLECTION_JOB:
		for _, c := range req.GetJobs() {
			d.candidate(func() { d.jobCandidate(c) })
		}
	case gcpb.Collection_COLLECTION_NODE:
		for _, n := range req.GetNodes() {
			d.candidate(func() { d.node(n) })
		}
	case gcpb.Collection_COLLECTION_DEPLOYMENT:
		for _, x := range req.GetDeployments() {
			d.candidate(func() { d.deployment(x) })
		}
	case gcpb.Collection_COLLECTION_CSI_VOLUME_CLAIM:
		for _, v := range req.GetCsiVolumes() {
			d.candidate(func() { d.volume(v) })
		}
	case gcpb.Collection_COLLECTION_CSI_PLUGIN:
		for _, p := range req.GetCsiPlugins() {
			d.candidate(func() { d.plugin(p) })
		}
	case gcpb.Collection_COLLECTION_ONE_TIME_TOKEN:
		for _, t := range req.GetOneTimeTokens() {
			d.candidate(func() { d.oneTimeToken(t) })
		}
	case gcpb.Collection_COLLECTION_ACL_TOKEN:
		for _, t := range req.GetAclTokens() {
			d.candidate(func() { d.aclToken(t) })
		}
	}
	return &gcpb.DecideResponse{Decisions: d.out}, nil
}

type decider struct {
	now  int64
	t    *gcpb.Thresholds
	auth bool
	s    Settings
	out  []*gcpb.Decision
	// reaped counts the candidates with a reap decision, for
	// max_reaps_per_page.
	reaped int
}

// candidate decides one candidate of the page with decide, then paces it:
// once max_reaps_per_page candidates have reaped something, every reap of
// the next ones is turned into a keep. A candidate is paced whole, so a
// job is never reaped without its evals and allocations.
func (d *decider) candidate(decide func()) {
	from := len(d.out)
	decide()
	reaps := false
	for _, x := range d.out[from:] {
		reaps = reaps || x.GetAction() == gcpb.Action_ACTION_REAP
	}
	if !reaps {
		return
	}
	if d.s.MaxReapsPerPage == 0 || d.reaped < d.s.MaxReapsPerPage {
		d.reaped++
		return
	}
	for _, x := range d.out[from:] {
		if x.GetAction() == gcpb.Action_ACTION_REAP {
			x.Action = gcpb.Action_ACTION_KEEP
			x.Reason = fmt.Sprintf("paced: max_reaps_per_page (%d) reached on this page; it goes on a later pass", d.s.MaxReapsPerPage)
		}
	}
}

func (d *decider) emit(kind gcpb.ObjectKind, ns, id string, index uint64, a gcpb.Action, format string, args ...any) {
	d.out = append(d.out, &gcpb.Decision{Kind: kind, Namespace: ns, Id: id, ModifyIndex: index, Action: a, Reason: fmt.Sprintf(format, args...)})
}

// cutoff is now - threshold; a time not after it is old.
type cutoff struct {
	at   int64
	name string // the agent key, for reasons
	ns   int64
}

func (d *decider) cutoff(name string, ns int64) cutoff {
	return cutoff{at: d.now - ns, name: name, ns: ns}
}

func (c cutoff) old(t int64) bool { return t <= c.at }

func (c cutoff) String() string { return fmt.Sprintf("%s (%s)", c.name, time.Duration(c.ns)) }

// allocVerdict is one allocation's eligibility, with the reason.
type allocVerdict struct {
	reap   bool
	reason string
}

// allocEligible is Nomad's allocation GC rule, in its order, with drover's
// stricter first step: only a client-terminal allocation may go.
func (d *decider) allocEligible(a *gcpb.Alloc, job *gcpb.Job, c cutoff) allocVerdict {
	cs := a.GetClientStatus()
	if !sdkgc.ClientTerminal(cs) {
		if a.GetDesiredStatus() == sdkgc.DesiredStop || a.GetDesiredStatus() == sdkgc.DesiredEvict {
			return allocVerdict{false, fmt.Sprintf("desired %s but the client status is still %s: the client has not stopped it yet", a.GetDesiredStatus(), cs)}
		}
		return allocVerdict{false, fmt.Sprintf("client status %s is not terminal", cs)}
	}
	if cs == sdkgc.ClientFailed && d.s.KeepFailedAllocs {
		return allocVerdict{false, "failed, kept by keep_failed_allocs"}
	}
	if !c.old(a.GetModifyTimeUnixNano()) {
		return allocVerdict{false, "modified within " + c.String()}
	}
	switch {
	case job == nil:
		return allocVerdict{true, fmt.Sprintf("%s and its job is gone", cs)}
	case job.GetStop():
		return allocVerdict{true, fmt.Sprintf("%s and its job is stopped", cs)}
	case job.GetStatus() == sdkgc.JobDead:
		return allocVerdict{true, fmt.Sprintf("%s and its job is dead", cs)}
	}
	if a.GetDesiredStatus() == sdkgc.DesiredStop {
		return allocVerdict{true, fmt.Sprintf("%s and desired stop", cs)}
	}
	if cs != sdkgc.ClientFailed {
		return allocVerdict{true, fmt.Sprintf("%s, older than %s", cs, c)}
	}
	r := a.GetReschedule()
	switch {
	case !r.GetPolicySet():
		return allocVerdict{true, "failed and its group has no reschedule policy"}
	case !r.GetUnlimited() && r.GetAttempts() == 0:
		return allocVerdict{true, "failed and its reschedule policy allows no attempts"}
	case a.GetNextAllocation() != "":
		return allocVerdict{true, "failed and replaced by " + a.GetNextAllocation()}
	case r.GetUnlimited():
		return allocVerdict{false, "failed, not yet replaced, and its reschedule policy is unlimited"}
	case r.GetEvents() == 0:
		return allocVerdict{false, "failed, not yet replaced, and not rescheduled yet"}
	case d.now-r.GetLastEventUnixNano() > r.GetIntervalNs():
		return allocVerdict{true, fmt.Sprintf("failed and its last reschedule is older than the policy interval (%s)", time.Duration(r.GetIntervalNs()))}
	}
	return allocVerdict{false, fmt.Sprintf("failed and rescheduled within the policy interval (%s): it may be rescheduled again", time.Duration(r.GetIntervalNs()))}
}

// protectLatest reports whether the latest allocations of job are kept: the
// job exists, runs to completion, and is not (dead and going: stopped, or
// collected by job GC). Reaping them would let the job run them again.
func protectLatest(job *gcpb.Job, forJobGC bool) bool {
	if job == nil || !job.GetRunsToCompletion() {
		return false
	}
	dead := job.GetStatus() == sdkgc.JobDead
	return !(dead && (job.GetStop() || forJobGC))
}

// evalAllocs decides an eval's allocations; it reports whether all of them
// may go. Decisions are emitted when emit is set.
func (d *decider) evalAllocs(allocs []*gcpb.Alloc, job *gcpb.Job, c cutoff, forJobGC, emit bool) (all bool, blocker string) {
	all = true
	protect := protectLatest(job, forJobGC)
	for _, a := range allocs {
		v := d.allocEligible(a, job, c)
		if v.reap && protect && a.GetLatestJobVersion() {
			v = allocVerdict{false, "latest allocation of a job that runs to completion, kept while the job is so it does not run again"}
		}
		if !v.reap {
			if all {
				blocker = fmt.Sprintf("alloc %s: %s", a.GetId(), v.reason)
			}
			all = false
		}
		if emit {
			action := gcpb.Action_ACTION_KEEP
			if v.reap {
				action = gcpb.Action_ACTION_REAP
			}
			d.emit(gcpb.ObjectKind_OBJECT_KIND_ALLOC, a.GetNamespace(), a.GetId(), a.GetModifyIndex(), action, "%s", v.reason)
		}
	}
	return all, blocker
}

func (d *decider) evalCutoff(e *gcpb.Eval) cutoff {
	if e.GetRunsToCompletion() {
		return d.cutoff("batch_eval_gc_threshold", d.t.GetBatchEvalNs())
	}
	return d.cutoff("eval_gc_threshold", d.t.GetEvalNs())
}

// evalCandidate is eval GC: a terminal, old eval goes with its allocations
// when all of them can; the ones that can go even when the eval stays.
func (d *decider) evalCandidate(c *gcpb.EvalCandidate) {
	e := c.GetEval()
	keep := func(format string, args ...any) {
		d.emit(gcpb.ObjectKind_OBJECT_KIND_EVAL, e.GetNamespace(), e.GetId(), e.GetModifyIndex(), gcpb.Action_ACTION_KEEP, format, args...)
	}
	if !sdkgc.EvalTerminal(e.GetStatus()) {
		keep("status %s is not terminal", e.GetStatus())
		return
	}
	cut := d.evalCutoff(e)
	if !cut.old(e.GetModifyTimeUnixNano()) {
		keep("modified within %s", cut)
		return
	}
	all, blocker := d.evalAllocs(c.GetAllocs(), c.GetJob(), cut, false, true)
	switch {
	case !all:
		keep("not all its allocations can go (%s)", blocker)
	case c.GetMoreAllocs():
		keep("it has more allocations than the page holds")
	default:
		d.emit(gcpb.ObjectKind_OBJECT_KIND_EVAL, e.GetNamespace(), e.GetId(), e.GetModifyIndex(), gcpb.Action_ACTION_REAP,
			"%s, older than %s, and all its allocations can go", e.GetStatus(), cut)
	}
}

// jobCandidate is job GC: a job goes, with all its evals and allocations,
// only when all of them can. A kept job gets one decision; its evals and
// allocations are left to eval GC.
func (d *decider) jobCandidate(c *gcpb.JobCandidate) {
	j := c.GetJob()
	keep := func(format string, args ...any) {
		d.emit(gcpb.ObjectKind_OBJECT_KIND_JOB, j.GetNamespace(), j.GetId(), j.GetModifyIndex(), gcpb.Action_ACTION_KEEP, format, args...)
	}
	switch {
	case j.GetTaggedVersion():
		keep("a version of the job is tagged")
		return
	case j.GetPeriodic() || j.GetParameterized():
		if !j.GetStop() {
			kind := "periodic"
			if !j.GetPeriodic() {
				kind = "parameterized"
			}
			keep("a %s parent is kept until it is stopped", kind)
			return
		}
	case j.GetStatus() != sdkgc.JobDead:
		keep("status %s is not dead", j.GetStatus())
		return
	case !j.GetStop() && !j.GetRunsToCompletion():
		keep("dead but neither stopped nor of a type that runs to completion")
		return
	}
	cut := d.cutoff("job_gc_threshold", d.t.GetJobNs())
	if !cut.old(j.GetSubmitTimeUnixNano()) {
		keep("submitted within %s", cut)
		return
	}
	if c.GetMore() {
		keep("it has more evals or allocations than the page holds")
		return
	}
	byEval := map[string][]*gcpb.Alloc{}
	for _, a := range c.GetAllocs() {
		byEval[a.GetEvalId()] = append(byEval[a.GetEvalId()], a)
	}
	for _, e := range c.GetEvals() {
		if !sdkgc.EvalTerminal(e.GetStatus()) {
			keep("eval %s: status %s is not terminal", e.GetId(), e.GetStatus())
			return
		}
		if !cut.old(e.GetModifyTimeUnixNano()) {
			keep("eval %s: modified within %s", e.GetId(), cut)
			return
		}
	}
	// Every allocation of the job, whichever eval placed it (or none
	// listed), must be able to go.
	if all, blocker := d.evalAllocs(c.GetAllocs(), j, cut, true, false); !all {
		keep("not all its allocations can go (%s)", blocker)
		return
	}
	d.emit(gcpb.ObjectKind_OBJECT_KIND_JOB, j.GetNamespace(), j.GetId(), j.GetModifyIndex(), gcpb.Action_ACTION_REAP,
		"%s, submitted before %s, and all its evals and allocations can go", jobState(j), cut)
	for _, e := range c.GetEvals() {
		d.emit(gcpb.ObjectKind_OBJECT_KIND_EVAL, e.GetNamespace(), e.GetId(), e.GetModifyIndex(), gcpb.Action_ACTION_REAP, "reaped with its job %s", j.GetId())
	}
	for _, a := range c.GetAllocs() {
		d.emit(gcpb.ObjectKind_OBJECT_KIND_ALLOC, a.GetNamespace(), a.GetId(), a.GetModifyIndex(), gcpb.Action_ACTION_REAP, "reaped with its job %s", j.GetId())
	}
}

func jobState(j *gcpb.Job) string {
	switch {
	case j.GetStop() && (j.GetPeriodic() || j.GetParameterized()):
		return "stopped parent"
	case j.GetStop():
		return "dead and stopped"
	}
	return "dead"
}

// node is node GC: a node down since before the cutoff with no live
// allocations.
func (d *decider) node(n *gcpb.Node) {
	emit := func(a gcpb.Action, format string, args ...any) {
		d.emit(gcpb.ObjectKind_OBJECT_KIND_NODE, "", n.GetId(), n.GetModifyIndex(), a, format, args...)
	}
	cut := d.cutoff("node_gc_threshold", d.t.GetNodeNs())
	switch {
	case n.GetStatus() != sdkgc.NodeDown:
		emit(gcpb.Action_ACTION_KEEP, "status %s is not down", n.GetStatus())
	case !cut.old(n.GetStatusUpdatedAtUnixNano()):
		emit(gcpb.Action_ACTION_KEEP, "down for less than %s", cut)
	case n.GetLiveAllocs() > 0:
		emit(gcpb.Action_ACTION_KEEP, "%s on it not terminal", count(n.GetLiveAllocs(), "allocation"))
	default:
		emit(gcpb.Action_ACTION_REAP, "down for longer than %s with no live allocations", cut)
	}
}

// deployment is deployment GC: an inactive deployment older than the
// cutoff with no live allocations.
func (d *decider) deployment(x *gcpb.Deployment) {
	emit := func(a gcpb.Action, format string, args ...any) {
		d.emit(gcpb.ObjectKind_OBJECT_KIND_DEPLOYMENT, x.GetNamespace(), x.GetId(), x.GetModifyIndex(), a, format, args...)
	}
	cut := d.cutoff("deployment_gc_threshold", d.t.GetDeploymentNs())
	switch {
	case x.GetActive():
		emit(gcpb.Action_ACTION_KEEP, "still active")
	case !cut.old(x.GetModifyTimeUnixNano()):
		emit(gcpb.Action_ACTION_KEEP, "modified within %s", cut)
	case x.GetLiveAllocs() > 0:
		emit(gcpb.Action_ACTION_KEEP, "%s not terminal", count(x.GetLiveAllocs(), "allocation"))
	default:
		emit(gcpb.Action_ACTION_REAP, "inactive, older than %s, with no live allocations", cut)
	}
}

// volume is CSI claim GC: the claims of a volume not modified since the
// cutoff whose allocation is gone or client-terminal are marked for release
// by the volume watcher. GC never calls a driver.
func (d *decider) volume(v *gcpb.CSIVolume) {
	cut := d.cutoff("csi_volume_claim_gc_threshold", d.t.GetCsiVolumeClaimNs())
	recent := !cut.old(v.GetModifyTimeUnixNano())
	for _, c := range v.GetClaims() {
		dec := &gcpb.Decision{Kind: gcpb.ObjectKind_OBJECT_KIND_CSI_CLAIM, Namespace: v.GetNamespace(), VolumeId: v.GetId(),
			Id: c.GetAllocId(), ModifyIndex: v.GetModifyIndex(), Action: gcpb.Action_ACTION_KEEP}
		switch {
		case c.GetAllocExists() && !sdkgc.ClientTerminal(c.GetAllocClientStatus()):
			if ds := c.GetAllocDesiredStatus(); ds == sdkgc.DesiredStop || ds == sdkgc.DesiredEvict {
				dec.Reason = fmt.Sprintf("its allocation is desired %s but still %s on the client, which releases the claim when it stops", ds, c.GetAllocClientStatus())
			} else {
				dec.Reason = fmt.Sprintf("its allocation is %s", c.GetAllocClientStatus())
			}
		case recent:
			dec.Reason = fmt.Sprintf("the volume was modified within %s: the volume watcher is already on it", cut)
		case !c.GetAllocExists():
			dec.Action, dec.Reason = gcpb.Action_ACTION_RELEASE, "its allocation is gone: release through the volume watcher"
		default:
			dec.Action, dec.Reason = gcpb.Action_ACTION_RELEASE, fmt.Sprintf("its allocation is %s: release through the volume watcher", c.GetAllocClientStatus())
		}
		d.out = append(d.out, dec)
	}
}

// plugin is CSI plugin GC: a plugin no job runs or expects, with no
// instance left, no volume naming it, older than the cutoff, is deleted.
func (d *decider) plugin(p *gcpb.CSIPlugin) {
	emit := func(a gcpb.Action, format string, args ...any) {
		d.emit(gcpb.ObjectKind_OBJECT_KIND_CSI_PLUGIN, "", p.GetId(), p.GetModifyIndex(), a, format, args...)
	}
	cut := d.cutoff("csi_plugin_gc_threshold", d.t.GetCsiPluginNs())
	healthy := p.GetControllersHealthy() + p.GetNodesHealthy()
	instances := p.GetControllers() + p.GetNodes()
	switch {
	case p.GetJobs() > 0 || p.GetControllersExpected()+p.GetNodesExpected() > 0:
		emit(gcpb.Action_ACTION_KEEP, "run by %s (%d controllers, %d nodes expected)", count(p.GetJobs(), "job"), p.GetControllersExpected(), p.GetNodesExpected())
	case healthy > 0:
		emit(gcpb.Action_ACTION_KEEP, "%s", count(healthy, "healthy instance"))
	case instances > 0:
		emit(gcpb.Action_ACTION_KEEP, "%s still fingerprinted: it goes once the nodes drop them", count(instances, "unhealthy instance"))
	case p.GetVolumes() > 0:
		emit(gcpb.Action_ACTION_KEEP, "%s registered against it", count(p.GetVolumes(), "volume"))
	case !cut.old(p.GetModifyTimeUnixNano()):
		emit(gcpb.Action_ACTION_KEEP, "modified within %s", cut)
	default:
		emit(gcpb.Action_ACTION_REAP, "no jobs, no instances, no volumes, and older than %s", cut)
	}
}

// oneTimeToken is one-time token GC: every token past its expiry goes.
func (d *decider) oneTimeToken(t *gcpb.OneTimeToken) {
	if t.GetExpiresAtUnixNano() < d.now {
		d.emit(gcpb.ObjectKind_OBJECT_KIND_ONE_TIME_TOKEN, "", t.GetAccessorId(), t.GetModifyIndex(), gcpb.Action_ACTION_REAP, "expired")
		return
	}
	d.emit(gcpb.ObjectKind_OBJECT_KIND_ONE_TIME_TOKEN, "", t.GetAccessorId(), t.GetModifyIndex(), gcpb.Action_ACTION_KEEP, "not expired")
}

// aclToken is expired ACL token GC: a token past its expiration time and
// created before the cutoff goes; a global one only in the authoritative
// region.
func (d *decider) aclToken(t *gcpb.ACLToken) {
	emit := func(a gcpb.Action, format string, args ...any) {
		d.emit(gcpb.ObjectKind_OBJECT_KIND_ACL_TOKEN, "", t.GetAccessorId(), t.GetModifyIndex(), a, format, args...)
	}
	cut := d.cutoff("acl_token_gc_threshold", d.t.GetAclTokenNs())
	switch {
	case t.GetExpirationTimeUnixNano() == 0:
		emit(gcpb.Action_ACTION_KEEP, "never expires")
	case t.GetExpirationTimeUnixNano() >= d.now:
		emit(gcpb.Action_ACTION_KEEP, "not expired")
	case t.GetGlobal() && !d.auth:
		emit(gcpb.Action_ACTION_KEEP, "global: collected in the authoritative region only")
	case !cut.old(t.GetCreateTimeUnixNano()):
		emit(gcpb.Action_ACTION_KEEP, "expired but created within %s", cut)
	default:
		emit(gcpb.Action_ACTION_REAP, "expired, created before %s", cut)
	}
}

// count renders n things: "1 job", "2 jobs".
func count(n int32, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
