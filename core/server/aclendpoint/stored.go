package aclendpoint

import (
	"github.com/drover-org/drover/core/structs"
)

// Roles and binding rules are written and deleted the same way: a delete
// names stored objects by UUID, and an upsert answers with the objects as
// the state holds them after the write. what names the kind in errors
// ("role", "binding rule").

// requireStored checks that every id is a UUID naming an object get
// finds: a malformed ID is structs.ErrInvalid, a missing one
// structs.ErrNotFound, and either refuses the whole request.
func requireStored[T any](what string, ids []string, get func(id string) (*T, error)) error {
	for _, id := range ids {
		if !structs.IsUUID(id) {
			return structs.NewError(structs.ErrInvalid, "%s ID %q: must be a UUID", what, bounded(id))
		}
		o, err := get(id)
		if err != nil {
			return err
		}
		if o == nil {
			return structs.NewError(structs.ErrNotFound, "ACL %s not found: %s", what, id)
		}
	}
	return nil
}

// readBack returns copies (cp) of the objects with the given IDs as
// stored; an object deleted meanwhile is left out.
func readBack[T any](ids []string, get func(id string) (*T, error), cp func(*T) *T) ([]*T, error) {
	out := make([]*T, 0, len(ids))
	for _, id := range ids {
		o, err := get(id)
		if err != nil {
			return nil, err
		}
		if o != nil {
			out = append(out, cp(o))
		}
	}
	return out, nil
}
