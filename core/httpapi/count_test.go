package httpapi

import (
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// A JSON job whose group has no Count runs one allocation, as Nomad
// canonicalizes it; an explicit 0 is kept.
func TestJobRegisterAbsentCountIsOne(t *testing.T) {
	for body, want := range map[string]int{
		`{"Job":{"ID":"web","TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Driver":"raw_exec"}]}]}}`:           1,
		`{"Job":{"ID":"web","TaskGroups":[{"Name":"g","Count":0,"Tasks":[{"Name":"t","Driver":"raw_exec"}]}]}}`: 0,
		`{"Job":{"ID":"web","TaskGroups":[{"Name":"g","Count":4,"Tasks":[{"Name":"t","Driver":"raw_exec"}]}]}}`: 4,
	} {
		api, fake := newTestAPI(t, Config{})
		rec := do(t, api.Handler(), "PUT", "/v1/jobs", body)
		if rec.Code != 200 {
			t.Fatalf("%s: status %d: %s", body, rec.Code, rec.Body.String())
		}
		job := fake.lastCall(t).Args[0].(*structs.Job)
		if got := job.TaskGroups[0].Count; got != want {
			t.Errorf("%s: Count = %d; want %d", body, got, want)
		}
	}
}
