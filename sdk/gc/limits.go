package gc

import (
	"errors"
	"fmt"

	"github.com/drover-org/drover/sdk/proto/gcpb"
)

// Bounds on one page, checked by both sides of the connection: the host
// before it sends a request, the plugin's gRPC adapter before the
// implementation sees it, and the host again on every response.
const (
	// MaxCandidates bounds the candidates of one page (evals, jobs, nodes,
	// volumes, plugins or tokens, whichever the collection is).
	MaxCandidates = 1024
	// MaxObjects bounds the objects of one page, nested ones included
	// (an eval's allocations, a job's evals and allocations, a volume's
	// claims). A candidate with more nested objects than fit is sent with
	// some of them and its more/more_allocs flag set, and is kept that
	// round. It is also the bound on the decisions of a response.
	MaxObjects = 65536
	// MaxStringBytes bounds every ID and status string of a page.
	MaxStringBytes = 1024
	// MaxReasonBytes bounds a decision's reason.
	MaxReasonBytes = 1024
)

// ErrInvalidRequest wraps every refusal of a request by ValidateRequest;
// ErrInvalidResponse every refusal of a response by ValidateResponse.
var (
	ErrInvalidRequest  = errors.New("invalid gc request")
	ErrInvalidResponse = errors.New("invalid gc response")
)

// Key names one object of a page.
type Key struct {
	Kind      gcpb.ObjectKind
	Namespace string
	VolumeID  string
	ID        string
}

func (k Key) String() string {
	s := k.Kind.String() + " " + k.ID
	if k.Namespace != "" {
		s += " (namespace " + k.Namespace + ")"
	}
	if k.VolumeID != "" {
		s += " on volume " + k.VolumeID
	}
	return s
}

// object is what the checks know of one object of a page.
type object struct {
	modifyIndex uint64
	// floor reports why the object may not be reaped whatever a plugin
	// says, or "" when it may; it sees the response's other decisions.
	floor func(reaped func(Key) bool) string
	claim bool
}

// Page indexes the objects of a request.
type Page struct {
	objects map[Key]*object
	order   []Key
}

// Keys lists the objects of the page in page order.
func (p *Page) Keys() []Key { return p.order }

// ModifyIndex returns the modify index the page carries for k.
func (p *Page) ModifyIndex(k Key) (uint64, bool) {
	o, ok := p.objects[k]
	if !ok {
		return 0, false
	}
	return o.modifyIndex, true
}

// ValidateRequest checks a request against the protocol and the bounds and
// indexes its objects.
func ValidateRequest(req *gcpb.DecideRequest) (*Page, error) {
	// Sized up front (bounded: MaxObjects): the maps and slices of a
	// page of thousands of objects would otherwise grow a dozen times.
	n := min(pageObjects(req), MaxObjects+1)
	v := &validator{page: &Page{objects: make(map[Key]*object, n), order: make([]Key, 0, n)}}
	v.request(req)
	if v.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, v.err)
	}
	return v.page, nil
}

// pageObjects counts the objects of req, nested ones included.
func pageObjects(req *gcpb.DecideRequest) int {
	n := len(req.GetNodes()) + len(req.GetDeployments()) + len(req.GetCsiPlugins()) +
		len(req.GetOneTimeTokens()) + len(req.GetAclTokens())
	for _, c := range req.GetEvals() {
		n += 1 + len(c.GetAllocs())
	}
	for _, c := range req.GetJobs() {
		n += 1 + len(c.GetEvals()) + len(c.GetAllocs())
	}
	for _, vol := range req.GetCsiVolumes() {
		n += len(vol.GetClaims())
	}
	return n
}

type validator struct {
	page    *Page
	objects int
	now     int64
	auth    bool
	err     error
}

func (v *validator) fail(format string, args ...any) {
	if v.err == nil {
		v.err = fmt.Errorf(format, args...)
	}
}

func (v *validator) str(field, s string) {
	if len(s) > MaxStringBytes {
		v.fail("%s is %d bytes, over the limit of %d", field, len(s), MaxStringBytes)
	}
}

func (v *validator) id(field, s string) {
	if s == "" {
		v.fail("%s is empty", field)
	}
	v.str(field, s)
}

func (v *validator) add(k Key, o *object) {
	if v.err != nil {
		return
	}
	v.objects++
	if v.objects > MaxObjects {
		v.fail("the page holds more than %d objects", MaxObjects)
		return
	}
	if _, dup := v.page.objects[k]; dup {
		v.fail("%s appears twice in the page", k)
		return
	}
	v.page.objects[k] = o
	v.page.order = append(v.page.order, k)
}

func (v *validator) request(req *gcpb.DecideRequest) {
	if req == nil {
		v.fail("nil request")
		return
	}
	if _, ok := gcpb.Collection_name[int32(req.GetCollection())]; !ok || req.GetCollection() == gcpb.Collection_COLLECTION_UNSPECIFIED {
		v.fail("unknown collection %d", req.GetCollection())
		return
	}
	if req.GetNowUnixNano() <= 0 {
		v.fail("now_unix_nano is not set")
	}
	v.now, v.auth = req.GetNowUnixNano(), req.GetAuthoritativeRegion()
	t := req.GetThresholds()
	for name, d := range map[string]int64{
		"eval_ns": t.GetEvalNs(), "batch_eval_ns": t.GetBatchEvalNs(), "job_ns": t.GetJobNs(),
		"node_ns": t.GetNodeNs(), "deployment_ns": t.GetDeploymentNs(),
		"csi_volume_claim_ns": t.GetCsiVolumeClaimNs(), "csi_plugin_ns": t.GetCsiPluginNs(),
		"acl_token_ns": t.GetAclTokenNs(),
	} {
		if d < 0 {
			v.fail("threshold %s is negative", name)
		}
	}
	lists := []struct {
		c gcpb.Collection
		n int
	}{
		{gcpb.Collection_COLLECTION_EVAL, len(req.GetEvals())},
		{gcpb.Collection_COLLECTION_JOB, len(req.GetJobs())},
		{gcpb.Collection_COLLECTION_NODE, len(req.GetNodes())},
		{gcpb.Collection_COLLECTION_DEPLOYMENT, len(req.GetDeployments())},
		{gcpb.Collection_COLLECTION_CSI_VOLUME_CLAIM, len(req.GetCsiVolumes())},
		{gcpb.Collection_COLLECTION_CSI_PLUGIN, len(req.GetCsiPlugins())},
		{gcpb.Collection_COLLECTION_ONE_TIME_TOKEN, len(req.GetOneTimeTokens())},
		{gcpb.Collection_COLLECTION_ACL_TOKEN, len(req.GetAclTokens())},
	}
	for _, l := range lists {
		if l.c != req.GetCollection() && l.n > 0 {
			v.fail("a %s page holds %d candidates of %s", req.GetCollection(), l.n, l.c)
		}
		if l.c == req.GetCollection() && l.n > MaxCandidates {
			v.fail("the page holds %d candidates, over the limit of %d", l.n, MaxCandidates)
		}
	}
	if v.err != nil {
		return
	}
	for _, c := range req.GetEvals() {
		v.evalCandidate(c)
	}
	for _, c := range req.GetJobs() {
		v.jobCandidate(c)
	}
	for _, n := range req.GetNodes() {
		v.node(n)
	}
	for _, d := range req.GetDeployments() {
		v.deployment(d)
	}
	for _, vol := range req.GetCsiVolumes() {
		v.volume(vol)
	}
	for _, p := range req.GetCsiPlugins() {
		v.plugin(p)
	}
	for _, t := range req.GetOneTimeTokens() {
		v.oneTimeToken(t)
	}
	for _, t := range req.GetAclTokens() {
		v.aclToken(t)
	}
}

func (v *validator) job(j *gcpb.Job) {
	v.id("job id", j.GetId())
	v.str("job namespace", j.GetNamespace())
	v.str("job status", j.GetStatus())
}

func evalKey(e *gcpb.Eval) Key {
	return Key{Kind: gcpb.ObjectKind_OBJECT_KIND_EVAL, Namespace: e.GetNamespace(), ID: e.GetId()}
}

func allocKey(a *gcpb.Alloc) Key {
	return Key{Kind: gcpb.ObjectKind_OBJECT_KIND_ALLOC, Namespace: a.GetNamespace(), ID: a.GetId()}
}

func (v *validator) alloc(a *gcpb.Alloc) {
	if a == nil {
		v.fail("nil alloc")
		return
	}
	v.id("alloc id", a.GetId())
	v.str("alloc namespace", a.GetNamespace())
	v.str("alloc eval_id", a.GetEvalId())
	v.str("alloc job_id", a.GetJobId())
	v.str("alloc node_id", a.GetNodeId())
	v.str("alloc desired_status", a.GetDesiredStatus())
	v.str("alloc client_status", a.GetClientStatus())
	v.str("alloc next_allocation", a.GetNextAllocation())
	status := a.GetClientStatus()
	v.add(allocKey(a), &object{modifyIndex: a.GetModifyIndex(), floor: func(func(Key) bool) string {
		if !ClientTerminal(status) {
			return fmt.Sprintf("its client status %q is not terminal", status)
		}
		return ""
	}})
}

// allocsByEval groups the keys of allocs by their eval ID, once per
// candidate (not once per eval: a job's evals times its allocs).
func allocsByEval(allocs []*gcpb.Alloc) map[string][]Key {
	out := make(map[string][]Key)
	for _, a := range allocs {
		if a != nil {
			out[a.GetEvalId()] = append(out[a.GetEvalId()], allocKey(a))
		}
	}
	return out
}

// eval checks e; mine are its allocations in the page, which its reap
// needs reaped too.
func (v *validator) eval(e *gcpb.Eval, mine []Key, more bool) {
	if e == nil {
		v.fail("nil eval")
		return
	}
	v.id("eval id", e.GetId())
	v.str("eval namespace", e.GetNamespace())
	v.str("eval job_id", e.GetJobId())
	v.str("eval status", e.GetStatus())
	status := e.GetStatus()
	v.add(evalKey(e), &object{modifyIndex: e.GetModifyIndex(), floor: func(reaped func(Key) bool) string {
		if !EvalTerminal(status) {
			return fmt.Sprintf("its status %q is not terminal", status)
		}
		if more {
			return "not all its allocations are in the page"
		}
		for _, k := range mine {
			if !reaped(k) {
				return fmt.Sprintf("its %s is not reaped with it", k)
			}
		}
		return ""
	}})
}

func (v *validator) evalCandidate(c *gcpb.EvalCandidate) {
	if c.GetEval() == nil {
		v.fail("eval candidate without an eval")
		return
	}
	if c.GetJob() != nil {
		v.job(c.GetJob())
	}
	var mine []Key
	for _, a := range c.GetAllocs() {
		v.alloc(a)
		if a != nil && a.GetEvalId() == c.GetEval().GetId() {
			mine = append(mine, allocKey(a))
		}
	}
	v.eval(c.GetEval(), mine, c.GetMoreAllocs())
}

func (v *validator) jobCandidate(c *gcpb.JobCandidate) {
	j := c.GetJob()
	if j == nil {
		v.fail("job candidate without a job")
		return
	}
	v.job(j)
	children := make([]Key, 0, len(c.GetAllocs())+len(c.GetEvals()))
	for _, a := range c.GetAllocs() {
		v.alloc(a)
		if a != nil {
			children = append(children, allocKey(a))
		}
	}
	byEval := allocsByEval(c.GetAllocs())
	for _, e := range c.GetEvals() {
		v.eval(e, byEval[e.GetId()], c.GetMore())
		if e != nil {
			children = append(children, evalKey(e))
		}
	}
	more, status, stop := c.GetMore(), j.GetStatus(), j.GetStop()
	v.add(Key{Kind: gcpb.ObjectKind_OBJECT_KIND_JOB, Namespace: j.GetNamespace(), ID: j.GetId()}, &object{
		modifyIndex: j.GetModifyIndex(),
		floor: func(reaped func(Key) bool) string {
			if status != JobDead && !stop {
				return fmt.Sprintf("it is %s and not stopped", status)
			}
			if more {
				return "not all its evals and allocations are in the page"
			}
			for _, k := range children {
				if !reaped(k) {
					return fmt.Sprintf("its %s is not reaped with it", k)
				}
			}
			return ""
		},
	})
}

func (v *validator) node(n *gcpb.Node) {
	if n == nil {
		v.fail("nil node")
		return
	}
	v.id("node id", n.GetId())
	v.str("node status", n.GetStatus())
	status, live := n.GetStatus(), n.GetLiveAllocs()
	v.add(Key{Kind: gcpb.ObjectKind_OBJECT_KIND_NODE, ID: n.GetId()}, &object{modifyIndex: n.GetModifyIndex(), floor: func(func(Key) bool) string {
		if status != NodeDown {
			return fmt.Sprintf("its status %q is not down", status)
		}
		if live > 0 {
			return fmt.Sprintf("it has %d live allocations", live)
		}
		return ""
	}})
}

func (v *validator) deployment(d *gcpb.Deployment) {
	if d == nil {
		v.fail("nil deployment")
		return
	}
	v.id("deployment id", d.GetId())
	v.str("deployment namespace", d.GetNamespace())
	v.str("deployment job_id", d.GetJobId())
	active, live := d.GetActive(), d.GetLiveAllocs()
	v.add(Key{Kind: gcpb.ObjectKind_OBJECT_KIND_DEPLOYMENT, Namespace: d.GetNamespace(), ID: d.GetId()}, &object{modifyIndex: d.GetModifyIndex(), floor: func(func(Key) bool) string {
		if active {
			return "it is active"
		}
		if live > 0 {
			return fmt.Sprintf("it has %d live allocations", live)
		}
		return ""
	}})
}

func (v *validator) volume(vol *gcpb.CSIVolume) {
	if vol == nil {
		v.fail("nil volume")
		return
	}
	v.id("volume id", vol.GetId())
	v.str("volume namespace", vol.GetNamespace())
	v.str("volume plugin_id", vol.GetPluginId())
	for _, c := range vol.GetClaims() {
		if c == nil {
			v.fail("nil claim on volume %s", vol.GetId())
			return
		}
		v.id("claim alloc_id", c.GetAllocId())
		v.str("claim node_id", c.GetNodeId())
		v.str("claim mode", c.GetMode())
		v.str("claim state", c.GetState())
		v.str("claim alloc_client_status", c.GetAllocClientStatus())
		v.str("claim alloc_desired_status", c.GetAllocDesiredStatus())
		exists, status := c.GetAllocExists(), c.GetAllocClientStatus()
		v.add(Key{Kind: gcpb.ObjectKind_OBJECT_KIND_CSI_CLAIM, Namespace: vol.GetNamespace(), VolumeID: vol.GetId(), ID: c.GetAllocId()}, &object{
			modifyIndex: vol.GetModifyIndex(), claim: true,
			floor: func(func(Key) bool) string {
				if exists && !ClientTerminal(status) {
					return fmt.Sprintf("its allocation's client status %q is not terminal", status)
				}
				return ""
			},
		})
	}
}

func (v *validator) plugin(p *gcpb.CSIPlugin) {
	if p == nil {
		v.fail("nil plugin")
		return
	}
	v.id("plugin id", p.GetId())
	healthy := p.GetControllersHealthy() + p.GetNodesHealthy()
	jobs := p.GetJobs() + p.GetControllersExpected() + p.GetNodesExpected()
	v.add(Key{Kind: gcpb.ObjectKind_OBJECT_KIND_CSI_PLUGIN, ID: p.GetId()}, &object{modifyIndex: p.GetModifyIndex(), floor: func(func(Key) bool) string {
		if jobs > 0 {
			return "jobs still run it"
		}
		if healthy > 0 {
			return "it has healthy instances"
		}
		return ""
	}})
}

func (v *validator) oneTimeToken(t *gcpb.OneTimeToken) {
	if t == nil {
		v.fail("nil one-time token")
		return
	}
	v.id("one-time token accessor_id", t.GetAccessorId())
	exp, now := t.GetExpiresAtUnixNano(), v.now
	v.add(Key{Kind: gcpb.ObjectKind_OBJECT_KIND_ONE_TIME_TOKEN, ID: t.GetAccessorId()}, &object{modifyIndex: t.GetModifyIndex(), floor: func(func(Key) bool) string {
		if exp >= now {
			return "it has not expired"
		}
		return ""
	}})
}

func (v *validator) aclToken(t *gcpb.ACLToken) {
	if t == nil {
		v.fail("nil ACL token")
		return
	}
	v.id("ACL token accessor_id", t.GetAccessorId())
	exp, now, global, auth := t.GetExpirationTimeUnixNano(), v.now, t.GetGlobal(), v.auth
	v.add(Key{Kind: gcpb.ObjectKind_OBJECT_KIND_ACL_TOKEN, ID: t.GetAccessorId()}, &object{modifyIndex: t.GetModifyIndex(), floor: func(func(Key) bool) string {
		if exp == 0 || exp >= now {
			return "it has not expired"
		}
		if global && !auth {
			return "it is global and this is not the authoritative region"
		}
		return ""
	}})
}

// ValidateResponse checks a plugin's response to the request page p was
// built from: every decision names an object of the page once, echoes its
// modify index, has an action its kind allows and a bounded reason, and no
// reap or release breaks the safety floor (see Collector).
func ValidateResponse(p *Page, resp *gcpb.DecideResponse) error {
	if resp == nil {
		return fmt.Errorf("%w: nil response", ErrInvalidResponse)
	}
	if n := len(resp.GetDecisions()); n > MaxObjects {
		return fmt.Errorf("%w: %d decisions, over the limit of %d", ErrInvalidResponse, n, MaxObjects)
	}
	seen := make(map[Key]gcpb.Action, len(resp.GetDecisions()))
	for _, d := range resp.GetDecisions() {
		k := DecisionKey(d)
		o, ok := p.objects[k]
		if !ok {
			return fmt.Errorf("%w: a decision names %s, which is not in the page", ErrInvalidResponse, k)
		}
		if _, dup := seen[k]; dup {
			return fmt.Errorf("%w: two decisions for %s", ErrInvalidResponse, k)
		}
		if d.GetModifyIndex() != o.modifyIndex {
			return fmt.Errorf("%w: the decision for %s carries modify index %d, the page %d", ErrInvalidResponse, k, d.GetModifyIndex(), o.modifyIndex)
		}
		if len(d.GetReason()) > MaxReasonBytes {
			return fmt.Errorf("%w: the reason for %s is %d bytes, over the limit of %d", ErrInvalidResponse, k, len(d.GetReason()), MaxReasonBytes)
		}
		switch a := d.GetAction(); {
		case a == gcpb.Action_ACTION_KEEP:
		case a == gcpb.Action_ACTION_REAP && !o.claim, a == gcpb.Action_ACTION_RELEASE && o.claim:
		default:
			return fmt.Errorf("%w: action %s is not one for %s", ErrInvalidResponse, a, k)
		}
		seen[k] = d.GetAction()
	}
	reaped := func(k Key) bool {
		a := seen[k]
		return a == gcpb.Action_ACTION_REAP || a == gcpb.Action_ACTION_RELEASE
	}
	for _, d := range resp.GetDecisions() {
		k := DecisionKey(d)
		if !reaped(k) {
			continue
		}
		if why := p.objects[k].floor(reaped); why != "" {
			return fmt.Errorf("%w: %s may not be %s: %s", ErrInvalidResponse, k, actionVerb(d.GetAction()), why)
		}
	}
	return nil
}

func actionVerb(a gcpb.Action) string {
	if a == gcpb.Action_ACTION_RELEASE {
		return "released"
	}
	return "reaped"
}

// DecisionKey is the object a decision names.
func DecisionKey(d *gcpb.Decision) Key {
	return Key{Kind: d.GetKind(), Namespace: d.GetNamespace(), VolumeID: d.GetVolumeId(), ID: d.GetId()}
}
