package httpapi

import (
	"context"
	"net/http"
	"slices"
	"sort"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// serviceHandlers serves /v1/services and /v1/service/*. Its handlers reach
// the server through the embedded pointer.
type serviceHandlers struct{ *HTTPServer }

// ServicesAPI is the write side of native service registrations
// (`DELETE /v1/service/<name>/<id>`); a follower forwards it to the leader.
type ServicesAPI interface {
	Delete(ctx context.Context, ns, name, id string) (uint64, error)
}

// serviceReader is the read side of service registrations.
type serviceReader interface {
	ServiceRegistrations(ws memdb.WatchSet, ns string) ([]*structs.ServiceRegistration, error)
	ServiceRegistrationsByName(ws memdb.WatchSet, ns, name string) ([]*structs.ServiceRegistration, error)
}

// serviceStub and serviceListStub are Nomad's ServiceRegistrationStub and
// ServiceRegistrationListStub: the services of a namespace with the union
// of their registrations' tags.
type (
	serviceStub struct {
		ServiceName string
		Tags        []string
	}
	serviceListStub struct {
		Namespace string
		Services  []*serviceStub
	}
)

// serviceStubs groups registrations by namespace and service, both sorted
// by name, with each service's tags deduplicated and sorted.
func serviceStubs(regs []*structs.ServiceRegistration) []*serviceListStub {
	type key struct{ ns, name string }
	tags := map[key][]string{}
	for _, r := range regs {
		k := key{r.Namespace, r.ServiceName}
		t := tags[k]
		if t == nil {
			t = []string{}
		}
		for _, tag := range r.Tags {
			if !slices.Contains(t, tag) {
				t = append(t, tag)
			}
		}
		tags[k] = t
	}
	keys := make([]key, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].ns != keys[j].ns {
			return keys[i].ns < keys[j].ns
		}
		return keys[i].name < keys[j].name
	})
	out := []*serviceListStub{}
	for _, k := range keys {
		if len(out) == 0 || out[len(out)-1].Namespace != k.ns {
			out = append(out, &serviceListStub{Namespace: k.ns})
		}
		t := tags[k]
		sort.Strings(t)
		last := out[len(out)-1]
		last.Services = append(last.Services, &serviceStub{ServiceName: k.name, Tags: t})
	}
	return out
}

func serviceNS(r *structs.ServiceRegistration) string { return r.Namespace }

func (s serviceHandlers) serviceList(w http.ResponseWriter, r *http.Request) {
	allow := nsFilter(r, acl.NamespaceCapabilityReadJob)
	readList(s.HTTPServer, w, r, state.TableServiceRegistrations, serviceStubs, func(ws memdb.WatchSet, st reader, q queryOptions) ([]*structs.ServiceRegistration, error) {
		regs, err := st.ServiceRegistrations(ws, q.Namespace)
		return filterNS(regs, serviceNS, allow), err
	})
}

// serviceGet answers a service's registrations, [] for an unknown one, as
// Nomad does.
func (s serviceHandlers) serviceGet(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	readList(s.HTTPServer, w, r, state.TableServiceRegistrations, func(regs []*structs.ServiceRegistration) []*structs.ServiceRegistration {
		if regs == nil {
			return []*structs.ServiceRegistration{}
		}
		return regs
	}, func(ws memdb.WatchSet, st reader, q queryOptions) ([]*structs.ServiceRegistration, error) {
		if q.Namespace == state.AllNamespaces {
			return nil, badRequest("a service is read in one namespace, not %q", q.Namespace)
		}
		return st.ServiceRegistrationsByName(ws, q.Namespace, name)
	})
}

func (s serviceHandlers) serviceDelete(w http.ResponseWriter, r *http.Request) {
	ss := s.services
	if ss == nil || s.srv == nil {
		writeText(w, http.StatusNotImplemented, "This agent's server does not delete service registrations")
		return
	}
	// nsCap lets "*" through for lists; a delete is in one namespace.
	if q := r.URL.Query().Get("namespace"); q == state.AllNamespaces {
		s.writeError(w, badRequest("a service registration is deleted in one namespace, not %q", q))
		return
	}
	ns := namespaceOf("", r)
	idx, err := ss.Delete(r.Context(), ns, r.PathValue("name"), r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, idx, struct{ Index uint64 }{idx})
}
