package server

import (
	"context"

	"github.com/drover-org/drover/core/structs"
)

// MaxNamespacesPerRequest bounds one namespace upsert.
const MaxNamespacesPerRequest = 64

// Upsert creates or updates namespaces, all of them in one Raft
// entry, and returns its index. A follower forwards to the leader.
func (ep Namespaces) Upsert(ctx context.Context, namespaces []*structs.Namespace) (uint64, error) {
	s := ep.srv
	if r, ok, err := forward[NamespaceUpsertArgs, IndexReply](ctx, s, "Namespace.Upsert", &NamespaceUpsertArgs{Namespaces: namespaces}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	switch {
	case len(namespaces) == 0:
		return 0, structs.NewError(structs.ErrInvalid, "Namespaces: at least one namespace is required")
	case len(namespaces) > MaxNamespacesPerRequest:
		return 0, structs.NewError(structs.ErrInvalid, "Namespaces: %d namespaces, more than %d per request", len(namespaces), MaxNamespacesPerRequest)
	}
	seen := make(map[string]bool, len(namespaces))
	copies := make([]*structs.Namespace, 0, len(namespaces))
	for _, ns := range namespaces {
		if err := ns.Validate(); err != nil {
			return 0, err
		}
		if seen[ns.Name] {
			return 0, structs.NewError(structs.ErrInvalid, "namespace %q: named twice in one request", ns.Name)
		}
		seen[ns.Name] = true
		c := ns.Copy()
		c.CreateIndex, c.ModifyIndex = 0, 0
		copies = append(copies, c)
	}
	idx, err := s.raftApply(structs.NamespaceUpsertRequestType, &structs.NamespaceUpsertRequest{Namespaces: copies})
	if err != nil {
		return 0, err
	}
	for _, ns := range copies {
		s.logger.Info("namespace upserted", "namespace", ns.Name, "index", idx)
	}
	return idx, nil
}

// Delete deletes a namespace and returns the entry's index. The
// default namespace and a namespace holding jobs are refused with
// structs.ErrInvalid, a missing one with structs.ErrNotFound, before
// anything is proposed; the FSM refuses them again should a job arrive in
// between. A follower forwards to the leader.
func (ep Namespaces) Delete(ctx context.Context, name string) (uint64, error) {
	s := ep.srv
	if r, ok, err := forward[NamespaceDeleteArgs, IndexReply](ctx, s, "Namespace.Delete", &NamespaceDeleteArgs{Name: name}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if name == "" {
		return 0, structs.NewError(structs.ErrInvalid, "namespace name: missing")
	}
	if len(name) > 128 {
		return 0, structs.NewError(structs.ErrInvalid, "namespace name: longer than 128 bytes")
	}
	if name == structs.DefaultNamespace {
		return 0, structs.NewError(structs.ErrInvalid, "namespace %q: the default namespace cannot be deleted", name)
	}
	st := s.State()
	ns, err := st.NamespaceByName(nil, name)
	if err != nil {
		return 0, err
	}
	if ns == nil {
		return 0, structs.NewError(structs.ErrNotFound, "namespace not found: %s", name)
	}
	jobs, err := st.JobsByNamespace(nil, name)
	if err != nil {
		return 0, err
	}
	if len(jobs) > 0 {
		return 0, structs.NewError(structs.ErrInvalid, "namespace %q: has %d job(s) (e.g. %q); stop and purge them first", name, len(jobs), jobs[0].ID)
	}
	idx, err := s.raftApply(structs.NamespaceDeleteRequestType, &structs.NamespaceDeleteRequest{Namespaces: []string{name}})
	if err != nil {
		return 0, err
	}
	s.logger.Info("namespace deleted", "namespace", name, "index", idx)
	return idx, nil
}
