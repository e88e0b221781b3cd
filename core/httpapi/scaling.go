package httpapi

import (
	"net/http"
	"sort"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// scalingHandlers serves /v1/scaling/policies and /v1/scaling/policy/{id}.
// Its handlers reach the server through the embedded pointer.
type scalingHandlers struct{ *HTTPServer }

// The scaling policy endpoints, as Nomad's: the scaling blocks of the
// registered jobs' groups, read where they are stored (in the job), so a
// policy is never out of step with its job. A policy's ID is a digest of
// its target (structs.ScalingPolicyID), its CreateIndex its job's and its
// ModifyIndex the job's last change; the policy of a stopped job is shown
// disabled, as Nomad disables it. The children of periodic and
// parameterized jobs carry their parent's policy and are not listed.

// scalingPolicyStub is Nomad's ScalingPolicyListStub.
type scalingPolicyStub struct {
	ID          string
	Enabled     bool
	Type        string
	Target      map[string]string
	CreateIndex uint64
	ModifyIndex uint64
}

// jobPolicies returns the scaling policies of a job's groups as the
// endpoints show them (copies the caller may change).
func jobPolicies(j *structs.Job) []*structs.ScalingPolicy {
	if j == nil || j.ParentID != "" {
		return nil
	}
	var out []*structs.ScalingPolicy
	for _, tg := range j.TaskGroups {
		if tg == nil || tg.Scaling == nil {
			continue
		}
		p := *tg.Scaling
		p.ID = structs.ScalingPolicyID(j.Namespace, j.ID, tg.Name)
		p.Namespace = j.Namespace
		if p.Type == "" {
			p.Type = structs.ScalingPolicyTypeHorizontal
		}
		p.Target = map[string]string{
			structs.ScalingTargetNamespace: j.Namespace,
			structs.ScalingTargetJob:       j.ID,
			structs.ScalingTargetGroup:     tg.Name,
		}
		p.Enabled = p.Enabled && !j.Stop
		p.CreateIndex, p.ModifyIndex = j.CreateIndex, j.JobModifyIndex
		out = append(out, &p)
	}
	return out
}

func (s scalingHandlers) scalingPolicyList(w http.ResponseWriter, r *http.Request) {
	allow := nsFilter(r, acl.NamespaceCapabilityListScalingPolicies)
	jobID, typ := r.URL.Query().Get("job"), r.URL.Query().Get("type")
	readList(s.HTTPServer, w, r, state.TableJobs, func(ps []*structs.ScalingPolicy) []*scalingPolicyStub {
		out := make([]*scalingPolicyStub, 0, len(ps))
		for _, p := range ps {
			out = append(out, &scalingPolicyStub{ID: p.ID, Enabled: p.Enabled, Type: p.Type, Target: p.Target,
				CreateIndex: p.CreateIndex, ModifyIndex: p.ModifyIndex})
		}
		return out
	}, func(ws memdb.WatchSet, st reader, q queryOptions) ([]*structs.ScalingPolicy, error) {
		var jobs []*structs.Job
		if jobID != "" && q.Namespace != state.AllNamespaces {
			j, err := st.JobByID(ws, q.Namespace, jobID)
			if err != nil {
				return nil, err
			}
			if j != nil {
				jobs = []*structs.Job{j}
			}
		} else {
			var err error
			if jobs, err = st.JobList(ws, q.Namespace, ""); err != nil {
				return nil, err
			}
		}
		var out []*structs.ScalingPolicy
		for _, j := range jobs {
			if !allow(j.Namespace) || jobID != "" && j.ID != jobID {
				continue
			}
			for _, p := range jobPolicies(j) {
				if strings.HasPrefix(p.Type, typ) {
					out = append(out, p)
				}
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		return out, nil
	})
}

// scalingPolicyGet answers one policy of the request's namespace; 404 for
// an ID no group of its jobs has.
func (s scalingHandlers) scalingPolicyGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			if q.Namespace == state.AllNamespaces {
				return 0, nil, badRequest("a scaling policy is read in one namespace, not %q", q.Namespace)
			}
			jobs, err := st.JobList(ws, q.Namespace, "")
			if err != nil {
				return 0, nil, err
			}
			for _, j := range jobs {
				for _, p := range jobPolicies(j) {
					if p.ID == id {
						return st.Index(state.TableJobs), p, nil
					}
				}
			}
			return 0, nil, structs.NewError(structs.ErrNotFound, "scaling policy %q not found in namespace %q", id, q.Namespace)
		}
	})
}
