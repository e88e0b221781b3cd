package events

import (
	"encoding/json"
	"testing"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// An allocation event carries the stored allocation itself (no copy) and
// encodes it without its Job; the stored object keeps its Job.
func TestAllocationEventPayload(t *testing.T) {
	job := &structs.Job{ID: "web", Namespace: "default"}
	a := &structs.Allocation{ID: "a1", Namespace: "default", JobID: "web", Job: job, ClientStatus: structs.AllocClientStatusComplete}
	for _, tc := range []struct {
		name   string
		change memdb.Change
		typ    string
	}{
		{"updated", memdb.Change{Table: tableAllocs, After: a}, TypeAllocationUpdated},
		{"deleted", memdb.Change{Table: tableAllocs, Before: a}, TypeAllocationDeleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := FromChanges(structs.GCReapRequestType, memdb.Changes{tc.change})
			if len(evs) != 1 {
				t.Fatalf("%d events, want 1", len(evs))
			}
			e := evs[0]
			if e.Topic != TopicAllocation || e.Key != "a1" || e.Type == "" {
				t.Fatalf("event %+v", e)
			}
			p, ok := e.Payload["Allocation"].(AllocationPayload)
			if !ok || p.Alloc != a {
				t.Fatalf("payload %#v: want the stored allocation", e.Payload["Allocation"])
			}
			raw, err := e.JSON()
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Payload struct {
					Allocation map[string]any
				}
			}
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			al := got.Payload.Allocation
			if al["ID"] != "a1" || al["ClientStatus"] != structs.AllocClientStatusComplete {
				t.Fatalf("encoded allocation %v", al)
			}
			if j, ok := al["Job"]; ok && j != nil {
				t.Fatalf("encoded allocation carries its job: %v", j)
			}
			if a.Job != job {
				t.Fatal("encoding changed the stored allocation")
			}
		})
	}
}
