package fsm

import (
	"time"

	"github.com/drover-org/drover/core/structs"
)

// applyGCReap deletes what the leader's garbage collector decided, each
// object re-checked as the entry applies (state.GCReap). Its response is
// the *structs.GCReapResponse, or the store's error for a request over its
// bounds (which the leader never proposes): an error response, never a
// stop.
func (f *FSM) applyGCReap(index uint64, buf []byte) any {
	start := time.Now()
	req := decode[structs.GCReapRequest](structs.GCReapRequestType, index, buf)
	out, err := f.State().At(at(req.Now)).GCReap(index, req)
	if err != nil {
		return err
	}
	out.Apply = time.Since(start)
	for _, j := range out.DeletedJobs {
		f.hooks.JobDeleted(j.Namespace, j.ID)
	}
	return out
}

// checkGCReap decodes as applyGCReap does and refuses a request over its
// bounds, so that the leader never commits one.
func checkGCReap(buf []byte) error {
	// One decode serves both checks: the leader checks every reap entry
	// it proposes, and a large one is thousands of references.
	req := new(structs.GCReapRequest)
	if err := unmarshal(buf, req); err != nil {
		return err
	}
	if err := structs.CheckNoNilElements(req); err != nil {
		return err
	}
	return req.Validate()
}

// applyReconcileJobSummaries rebuilds the job summaries the request
// bounds from the state; its response is the
// *structs.ReconcileJobSummariesResponse, or the store's error for a
// request over its bounds (which the leader never proposes).
func (f *FSM) applyReconcileJobSummaries(index uint64, buf []byte) any {
	req := decode[structs.ReconcileJobSummariesRequest](structs.ReconcileJobSummariesRequestType, index, buf)
	out, err := f.State().ReconcileJobSummaries(index, req)
	if err != nil {
		return err
	}
	return out
}

// checkReconcileJobSummaries refuses a request over its bounds, so that
// the leader never commits one.
func checkReconcileJobSummaries(buf []byte) error {
	if err := check[structs.ReconcileJobSummariesRequest](buf); err != nil {
		return err
	}
	req := new(structs.ReconcileJobSummariesRequest)
	if err := unmarshal(buf, req); err != nil {
		return err
	}
	return req.Validate()
}

var gcTypeNames = map[structs.MessageType]string{
	structs.GCReapRequestType:                "GCReap",
	structs.ReconcileJobSummariesRequestType: "ReconcileJobSummaries",
}
