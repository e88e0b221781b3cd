package httpapi

import (
	"context"
	"net/http"
	"sort"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// namespaceHandlers serves /v1/namespaces and /v1/namespace/*. Its handlers
// reach the server through the embedded pointer.
type namespaceHandlers struct{ *HTTPServer }

// NamespacesAPI (Config.Namespaces) writes namespaces.
type NamespacesAPI interface {
	Upsert(ctx context.Context, namespaces []*structs.Namespace) (uint64, error)
	Delete(ctx context.Context, name string) (uint64, error)
}

func (s namespaceHandlers) namespaceList(w http.ResponseWriter, r *http.Request) {
	readList(s.HTTPServer, w, r, state.TableNamespaces, func(ns []*structs.Namespace) any {
		sort.Slice(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name })
		return ns
	}, func(ws memdb.WatchSet, st reader, q queryOptions) ([]*structs.Namespace, error) {
		all, err := st.Namespaces(ws, q.Prefix)
		// A caller sees the namespaces it has any rule for.
		if a := requestACL(r); a != nil {
			all = filterNS(all, func(n *structs.Namespace) string { return n.Name }, a.AllowNamespace)
		}
		return all, err
	})
}

func (s namespaceHandlers) namespaceGet(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	readObject(s.HTTPServer, w, r, state.TableNamespaces, "namespace not found",
		func(n *structs.Namespace) (uint64, any) { return n.ModifyIndex, n },
		func(ws memdb.WatchSet, st reader, _ queryOptions) (*structs.Namespace, error) {
			return st.NamespaceByName(ws, name)
		})
}

func (s namespaceHandlers) namespaceServer(w http.ResponseWriter) (NamespacesAPI, bool) {
	ns := s.namespaces
	if ns == nil || s.srv == nil {
		writeText(w, http.StatusNotImplemented, "This agent's server does not write namespaces")
		return nil, false
	}
	return ns, true
}

// namespaceUpsert is PUT /v1/namespace[/{name}] with the Namespace as
// the body; a name in the path must match the body's.
func (s namespaceHandlers) namespaceUpsert(w http.ResponseWriter, r *http.Request) {
	nsrv, ok := s.namespaceServer(w)
	if !ok {
		return
	}
	var ns structs.Namespace
	if err := decodeBody(r, &ns); err != nil {
		s.writeError(w, err)
		return
	}
	if name := r.PathValue("name"); name != "" {
		if ns.Name == "" {
			ns.Name = name
		} else if ns.Name != name {
			writeText(w, http.StatusBadRequest, "Namespace name does not match request path")
			return
		}
	}
	idx, err := nsrv.Upsert(r.Context(), []*structs.Namespace{&ns})
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, idx, struct{ Index uint64 }{idx})
}

func (s namespaceHandlers) namespaceDelete(w http.ResponseWriter, r *http.Request) {
	nsrv, ok := s.namespaceServer(w)
	if !ok {
		return
	}
	idx, err := nsrv.Delete(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, idx, struct{ Index uint64 }{idx})
}
