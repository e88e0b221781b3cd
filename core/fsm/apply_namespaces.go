package fsm

import (
	"github.com/drover-org/drover/core/structs"
)

// Appliers of the namespace entries. The endpoint validates and checks the
// request against the state first; the state store still refuses what no
// longer fits (the namespace gained a job meanwhile), all or nothing, and
// the refusal is the entry's response.

func (f *FSM) applyNamespaceUpsert(index uint64, buf []byte) any {
	req := decode[structs.NamespaceUpsertRequest](structs.NamespaceUpsertRequestType, index, buf)
	return f.State().UpsertNamespaces(index, req.Namespaces)
}

func (f *FSM) applyNamespaceDelete(index uint64, buf []byte) any {
	req := decode[structs.NamespaceDeleteRequest](structs.NamespaceDeleteRequestType, index, buf)
	return f.State().DeleteNamespaces(index, req.Namespaces)
}

var namespaceTypeNames = map[structs.MessageType]string{
	structs.NamespaceUpsertRequestType: "NamespaceUpsert",
	structs.NamespaceDeleteRequestType: "NamespaceDelete",
}
