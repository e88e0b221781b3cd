package httpapi

import (
	"testing"

	"github.com/drover-org/drover/core/fsm"
	"github.com/drover-org/drover/core/httpapi/jsoninput"
	"github.com/drover-org/drover/core/structs"
)

// FuzzDecodeJob: the JSON edge never panics, and a job it accepts that
// also validates is an entry the FSM can decode: nothing the API lets
// through can wedge the Raft log.
func FuzzDecodeJob(f *testing.F) {
	f.Add([]byte(`{"Job":{"ID":"web","TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Driver":"raw_exec","Config":{"args":[[1]]}}]}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req jobRegisterRequest
		if err := jsoninput.Decode(body, &req); err != nil || req.Job == nil {
			return
		}
		job := req.Job.Copy()
		job.Canonicalize()
		if err := job.Validate(); err != nil {
			return
		}
		buf, err := fsm.Encode(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Namespace: job.Namespace, JobID: job.ID})
		if err != nil {
			t.Fatalf("accepted job does not encode: %v", err)
		}
		if err := fsm.CheckEntry(buf); err != nil {
			t.Fatalf("accepted job is an entry the FSM cannot decode: %v", err)
		}
	})
}
