package httpapi

import (
	"context"
	"net/http"
	"sort"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// deploymentHandlers serves /v1/deployments and /v1/deployment/*. Its
// handlers reach the server through the embedded pointer.
type deploymentHandlers struct{ *HTTPServer }

// DeploymentsAPI is the write side of deployments (Nomad's
// /v1/deployment/* writes); a follower forwards each to the leader.
type DeploymentsAPI interface {
	Promote(ctx context.Context, id string, all bool, groups []string) (*structs.DeploymentUpdateResponse, error)
	Pause(ctx context.Context, id string, pause bool) (*structs.DeploymentUpdateResponse, error)
	Fail(ctx context.Context, id string) (*structs.DeploymentUpdateResponse, error)
	SetAllocHealth(ctx context.Context, id string, healthy, unhealthy []string) (*structs.DeploymentUpdateResponse, error)
}

// deploymentReader is the read side of deployments.
type deploymentReader interface {
	DeploymentByID(ws memdb.WatchSet, id string) (*structs.Deployment, error)
	DeploymentsByIDPrefix(ws memdb.WatchSet, ns, prefix string) ([]*structs.Deployment, error)
	DeploymentsByJob(ws memdb.WatchSet, ns, jobID string) ([]*structs.Deployment, error)
	LatestDeploymentByJob(ws memdb.WatchSet, ns, jobID string) (*structs.Deployment, error)
	AllocsByDeployment(ws memdb.WatchSet, d *structs.Deployment) ([]*structs.Allocation, error)
}

func deploymentNS(d *structs.Deployment) string { return d.Namespace }

// byNewest orders deployments newest first, as Nomad lists them.
func byNewest(ds []*structs.Deployment) []*structs.Deployment {
	out := append(make([]*structs.Deployment, 0, len(ds)), ds...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].CreateIndex != out[j].CreateIndex {
			return out[i].CreateIndex > out[j].CreateIndex
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func (s deploymentHandlers) deploymentList(w http.ResponseWriter, r *http.Request) {
	allow := nsFilter(r, acl.NamespaceCapabilityReadJob)
	readList(s.HTTPServer, w, r, state.TableDeployments, byNewest, func(ws memdb.WatchSet, st reader, q queryOptions) ([]*structs.Deployment, error) {
		ds, err := st.DeploymentsByIDPrefix(ws, q.Namespace, q.Prefix)
		return filterNS(ds, deploymentNS, allow), err
	})
}

// lookupDeployment finds a deployment by ID or by a prefix that names one
// deployment alone.
func lookupDeployment(ws memdb.WatchSet, st reader, id string) (*structs.Deployment, error) {
	d, err := st.DeploymentByID(ws, id)
	if err != nil || d != nil || id == "" {
		return d, err
	}
	matches, err := st.DeploymentsByIDPrefix(ws, state.AllNamespaces, id)
	if err != nil || len(matches) != 1 {
		return nil, err
	}
	return matches[0], nil
}

func (s deploymentHandlers) deploymentGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	readObject(s.HTTPServer, w, r, state.TableDeployments, "deployment not found",
		func(d *structs.Deployment) (uint64, any) { return d.ModifyIndex, d },
		func(ws memdb.WatchSet, st reader, _ queryOptions) (*structs.Deployment, error) {
			d, err := lookupDeployment(ws, st, id)
			if d != nil && !allowNS(r, d.Namespace, acl.NamespaceCapabilityReadJob) {
				return nil, err
			}
			return d, err
		})
}

func (s deploymentHandlers) deploymentAllocs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	readList(s.HTTPServer, w, r, state.TableAllocs, allocStubs, func(ws memdb.WatchSet, st reader, _ queryOptions) ([]*structs.Allocation, error) {
		d, err := lookupDeployment(ws, st, id)
		if err != nil || d == nil || !allowNS(r, d.Namespace, acl.NamespaceCapabilityReadJob) {
			return nil, err
		}
		return st.AllocsByDeployment(ws, d)
	})
}

// Request bodies (Nomad's api.Deployment*Request).
type (
	deploymentPromoteBody struct {
		DeploymentID string
		All          bool
		Groups       []string
	}
	deploymentPauseBody struct {
		DeploymentID string
		Pause        bool
	}
	deploymentFailBody        struct{ DeploymentID string }
	deploymentAllocHealthBody struct {
		DeploymentID           string
		HealthyAllocationIDs   []string
		UnhealthyAllocationIDs []string
	}
)

// deploymentWrite decodes a write's body, checks that it names the URL's
// deployment and that the caller may submit jobs in its namespace, then
// runs do. An unknown deployment is a 404.
func deploymentWrite[B any](s *HTTPServer, w http.ResponseWriter, r *http.Request, bodyID func(*B) string,
	do func(ds DeploymentsAPI, id string, body *B) (*structs.DeploymentUpdateResponse, error)) {
	id := r.PathValue("id")
	body := new(B)
	if err := decodeOptionalBody(r, body); err != nil {
		s.writeError(w, err)
		return
	}
	if bid := bodyID(body); bid != "" && bid != id {
		s.writeError(w, badRequest("DeploymentID %q does not match the deployment %q in the URL", bid, id))
		return
	}
	d, err := s.srv.State().DeploymentByID(nil, id)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if d == nil || !allowNS(r, d.Namespace, acl.NamespaceCapabilityReadJob) {
		writeText(w, http.StatusNotFound, "deployment not found")
		return
	}
	if !allowNS(r, d.Namespace, acl.NamespaceCapabilitySubmitJob) {
		s.writeError(w, errPermissionDenied)
		return
	}
	resp, err := do(s.deployments, id, body)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

func (s deploymentHandlers) deploymentPromote(w http.ResponseWriter, r *http.Request) {
	deploymentWrite(s.HTTPServer, w, r, func(b *deploymentPromoteBody) string { return b.DeploymentID },
		func(ds DeploymentsAPI, id string, b *deploymentPromoteBody) (*structs.DeploymentUpdateResponse, error) {
			if len(b.Groups) > structs.MaxCollectionElements {
				return nil, badRequest("Groups: %d groups, at most %d", len(b.Groups), structs.MaxCollectionElements)
			}
			return ds.Promote(r.Context(), id, b.All, b.Groups)
		})
}

func (s deploymentHandlers) deploymentFail(w http.ResponseWriter, r *http.Request) {
	deploymentWrite(s.HTTPServer, w, r, func(b *deploymentFailBody) string { return b.DeploymentID },
		func(ds DeploymentsAPI, id string, _ *deploymentFailBody) (*structs.DeploymentUpdateResponse, error) {
			return ds.Fail(r.Context(), id)
		})
}

func (s deploymentHandlers) deploymentPause(w http.ResponseWriter, r *http.Request) {
	deploymentWrite(s.HTTPServer, w, r, func(b *deploymentPauseBody) string { return b.DeploymentID },
		func(ds DeploymentsAPI, id string, b *deploymentPauseBody) (*structs.DeploymentUpdateResponse, error) {
			return ds.Pause(r.Context(), id, b.Pause)
		})
}

func (s deploymentHandlers) deploymentAllocHealth(w http.ResponseWriter, r *http.Request) {
	deploymentWrite(s.HTTPServer, w, r, func(b *deploymentAllocHealthBody) string { return b.DeploymentID },
		func(ds DeploymentsAPI, id string, b *deploymentAllocHealthBody) (*structs.DeploymentUpdateResponse, error) {
			return ds.SetAllocHealth(r.Context(), id, b.HealthyAllocationIDs, b.UnhealthyAllocationIDs)
		})
}

// jobDeployments serves GET /v1/job/<id>/deployments.
func (s jobHandlers) jobDeployments(w http.ResponseWriter, r *http.Request, id string) {
	readList(s.HTTPServer, w, r, state.TableDeployments, byNewest, func(ws memdb.WatchSet, st reader, q queryOptions) ([]*structs.Deployment, error) {
		return st.DeploymentsByJob(ws, q.Namespace, id)
	})
}

// jobLatestDeployment serves GET /v1/job/<id>/deployment: the latest
// deployment, or null.
func (s jobHandlers) jobLatestDeployment(w http.ResponseWriter, r *http.Request, id string) {
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			d, err := st.LatestDeploymentByJob(ws, q.Namespace, id)
			if err != nil {
				return 0, nil, err
			}
			if d == nil {
				return st.Index(state.TableDeployments), nil, nil
			}
			return d.ModifyIndex, d, nil
		}
	})
}
