package fsm

import (
	"github.com/drover-org/drover/core/structs"
)

// Appliers of the node pool entries. The endpoint validates and checks
// the request against the state first; the state store still refuses what
// no longer fits (the pool gained a node or a job meanwhile), all or
// nothing, and the refusal is the entry's response.

func (f *FSM) applyNodePoolUpsert(index uint64, buf []byte) any {
	req := decode[structs.NodePoolUpsertRequest](structs.NodePoolUpsertRequestType, index, buf)
	return f.State().UpsertNodePools(index, req.NodePools)
}

func (f *FSM) applyNodePoolDelete(index uint64, buf []byte) any {
	req := decode[structs.NodePoolDeleteRequest](structs.NodePoolDeleteRequestType, index, buf)
	return f.State().DeleteNodePools(index, req.Names)
}

var nodePoolTypeNames = map[structs.MessageType]string{
	structs.NodePoolUpsertRequestType: "NodePoolUpsert",
	structs.NodePoolDeleteRequestType: "NodePoolDelete",
}
