package gc_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

const (
	keep    = gcpb.Action_ACTION_KEEP
	reap    = gcpb.Action_ACTION_REAP
	release = gcpb.Action_ACTION_RELEASE

	kEval  = gcpb.ObjectKind_OBJECT_KIND_EVAL
	kAlloc = gcpb.ObjectKind_OBJECT_KIND_ALLOC
	kJob   = gcpb.ObjectKind_OBJECT_KIND_JOB
	kClaim = gcpb.ObjectKind_OBJECT_KIND_CSI_CLAIM
)

func dec(kind gcpb.ObjectKind, id string, a gcpb.Action) *gcpb.Decision {
	return &gcpb.Decision{Kind: kind, Namespace: "default", Id: id, Action: a}
}

func evalPage(evalStatus, allocStatus string, more bool) *gcpb.DecideRequest {
	return &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_EVAL, NowUnixNano: now, Evals: []*gcpb.EvalCandidate{{
		Eval:       &gcpb.Eval{Id: "e1", Namespace: "default", Status: evalStatus},
		Allocs:     []*gcpb.Alloc{{Id: "a1", Namespace: "default", EvalId: "e1", ClientStatus: allocStatus}},
		MoreAllocs: more,
	}}}
}

func TestValidateResponse(t *testing.T) {
	jobPage := &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_JOB, NowUnixNano: now, Jobs: []*gcpb.JobCandidate{{
		Job:    &gcpb.Job{Id: "j1", Namespace: "default", Status: gc.JobDead},
		Evals:  []*gcpb.Eval{{Id: "e1", Namespace: "default", Status: gc.EvalComplete}},
		Allocs: []*gcpb.Alloc{{Id: "a1", Namespace: "default", EvalId: "e1", ClientStatus: gc.ClientComplete}},
	}}}
	claimPage := func(exists bool, status string) *gcpb.DecideRequest {
		return &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_CSI_VOLUME_CLAIM, NowUnixNano: now,
			CsiVolumes: []*gcpb.CSIVolume{{Id: "v1", Namespace: "default", Claims: []*gcpb.CSIClaim{{AllocId: "a1", AllocExists: exists, AllocClientStatus: status}}}}}
	}
	claim := func(a gcpb.Action) *gcpb.Decision {
		d := dec(kClaim, "a1", a)
		d.VolumeId = "v1"
		return d
	}
	for _, tc := range []struct {
		name    string
		req     *gcpb.DecideRequest
		ds      []*gcpb.Decision
		wantErr string
	}{
		{"eval and its alloc reaped", evalPage(gc.EvalComplete, gc.ClientComplete, false),
			[]*gcpb.Decision{dec(kEval, "e1", reap), dec(kAlloc, "a1", reap)}, ""},
		{"no decisions keeps everything", evalPage(gc.EvalComplete, gc.ClientComplete, false), nil, ""},
		{"running alloc never reaped, desired stop or not", evalPage(gc.EvalComplete, gc.ClientRunning, false),
			[]*gcpb.Decision{dec(kAlloc, "a1", reap)}, `client status "running" is not terminal`},
		{"eval reaped without its alloc", evalPage(gc.EvalComplete, gc.ClientComplete, false),
			[]*gcpb.Decision{dec(kEval, "e1", reap), dec(kAlloc, "a1", keep)}, "is not reaped with it"},
		{"eval with more allocs than listed", evalPage(gc.EvalComplete, gc.ClientComplete, true),
			[]*gcpb.Decision{dec(kEval, "e1", reap), dec(kAlloc, "a1", reap)}, "not all its allocations"},
		{"pending eval", evalPage(gc.EvalPending, gc.ClientComplete, false),
			[]*gcpb.Decision{dec(kEval, "e1", reap), dec(kAlloc, "a1", reap)}, `status "pending" is not terminal`},
		{"two decisions for one object", evalPage(gc.EvalComplete, gc.ClientComplete, false),
			[]*gcpb.Decision{dec(kAlloc, "a1", reap), dec(kAlloc, "a1", keep)}, "two decisions"},
		{"release is for claims only", evalPage(gc.EvalComplete, gc.ClientComplete, false),
			[]*gcpb.Decision{dec(kAlloc, "a1", release)}, "is not one for"},
		{"wrong modify index", evalPage(gc.EvalComplete, gc.ClientComplete, false),
			[]*gcpb.Decision{{Kind: kAlloc, Namespace: "default", Id: "a1", Action: keep, ModifyIndex: 9}}, "modify index"},
		{"long reason", evalPage(gc.EvalComplete, gc.ClientComplete, false),
			[]*gcpb.Decision{{Kind: kAlloc, Namespace: "default", Id: "a1", Action: keep, Reason: strings.Repeat("x", gc.MaxReasonBytes+1)}}, "reason"},
		{"job with all its evals and allocs", jobPage,
			[]*gcpb.Decision{dec(kJob, "j1", reap), dec(kEval, "e1", reap), dec(kAlloc, "a1", reap)}, ""},
		{"job without its eval", jobPage,
			[]*gcpb.Decision{dec(kJob, "j1", reap), dec(kAlloc, "a1", reap)}, "is not reaped with it"},
		{"claim of a gone alloc released", claimPage(false, ""), []*gcpb.Decision{claim(release)}, ""},
		{"claim of a terminal alloc released", claimPage(true, gc.ClientFailed), []*gcpb.Decision{claim(release)}, ""},
		{"claim of a running alloc", claimPage(true, gc.ClientRunning), []*gcpb.Decision{claim(release)}, "not terminal"},
		{"claims are released, not reaped", claimPage(false, ""), []*gcpb.Decision{claim(reap)}, "is not one for"},
		{"unexpired one-time token", &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_ONE_TIME_TOKEN, NowUnixNano: now,
			OneTimeTokens: []*gcpb.OneTimeToken{{AccessorId: "t", ExpiresAtUnixNano: now}}},
			[]*gcpb.Decision{{Kind: gcpb.ObjectKind_OBJECT_KIND_ONE_TIME_TOKEN, Id: "t", Action: reap}}, "has not expired"},
		{"global ACL token outside the authoritative region", &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_ACL_TOKEN, NowUnixNano: now,
			AclTokens: []*gcpb.ACLToken{{AccessorId: "t", Global: true, ExpirationTimeUnixNano: 1}}},
			[]*gcpb.Decision{{Kind: gcpb.ObjectKind_OBJECT_KIND_ACL_TOKEN, Id: "t", Action: reap}}, "authoritative"},
		{"CSI plugin with a healthy instance", &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_CSI_PLUGIN, NowUnixNano: now,
			CsiPlugins: []*gcpb.CSIPlugin{{Id: "p", Nodes: 1, NodesHealthy: 1}}},
			[]*gcpb.Decision{{Kind: gcpb.ObjectKind_OBJECT_KIND_CSI_PLUGIN, Id: "p", Action: reap}}, "healthy instances"},
		{"active deployment", &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_DEPLOYMENT, NowUnixNano: now,
			Deployments: []*gcpb.Deployment{{Id: "d", Active: true}}},
			[]*gcpb.Decision{{Kind: gcpb.ObjectKind_OBJECT_KIND_DEPLOYMENT, Id: "d", Action: reap}}, "active"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := gc.ValidateRequest(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			err = gc.ValidateResponse(page, &gcpb.DecideResponse{Decisions: tc.ds})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateResponse: %v", err)
				}
				return
			}
			if !errors.Is(err, gc.ErrInvalidResponse) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ValidateResponse: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestValidateRequest(t *testing.T) {
	big := strings.Repeat("x", gc.MaxStringBytes+1)
	for _, tc := range []struct {
		name    string
		req     *gcpb.DecideRequest
		wantErr string
	}{
		{"nil", nil, "nil request"},
		{"unknown collection", &gcpb.DecideRequest{Collection: 99, NowUnixNano: now}, "unknown collection"},
		{"no clock", &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_NODE}, "now_unix_nano"},
		{"duplicate object", &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_NODE, NowUnixNano: now,
			Nodes: []*gcpb.Node{{Id: "n"}, {Id: "n"}}}, "twice"},
		{"empty id", &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_NODE, NowUnixNano: now,
			Nodes: []*gcpb.Node{{}}}, "node id is empty"},
		{"long id", &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_NODE, NowUnixNano: now,
			Nodes: []*gcpb.Node{{Id: big}}}, "over the limit"},
		{"eval candidate without eval", &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_EVAL, NowUnixNano: now,
			Evals: []*gcpb.EvalCandidate{{}}}, "without an eval"},
		{"too many candidates", nodePage(gc.MaxCandidates + 1), "candidates, over the limit"},
		{"full page", nodePage(gc.MaxCandidates), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gc.ValidateRequest(tc.req)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, gc.ErrInvalidRequest) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ValidateRequest: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// MaxObjects bounds nested objects too: one eval with too many allocs.
func TestValidateRequestObjectBound(t *testing.T) {
	c := &gcpb.EvalCandidate{Eval: &gcpb.Eval{Id: "e"}}
	for i := range gc.MaxObjects {
		c.Allocs = append(c.Allocs, &gcpb.Alloc{Id: "a" + strconv.Itoa(i)})
	}
	_, err := gc.ValidateRequest(&gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_EVAL, NowUnixNano: now, Evals: []*gcpb.EvalCandidate{c}})
	if err == nil || !strings.Contains(err.Error(), "objects") {
		t.Fatalf("ValidateRequest of %d allocs + 1 eval: %v", len(c.Allocs), err)
	}
}
