package structs_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/core/structs"
	batch "github.com/drover-org/drover/plugins/scheduler-batch"
	service "github.com/drover-org/drover/plugins/scheduler-service"
	sysbatch "github.com/drover-org/drover/plugins/scheduler-sysbatch"
	system "github.com/drover-org/drover/plugins/scheduler-system"
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// cliJobJSON is a job as Nomad's CLI sends it for a job file that sets
// no update, reschedule or restart block: every such field null. Format
// it with the type and the group's ReschedulePolicy (JSON).
const cliJobJSON = `{"ID":"j","Name":null,"Type":%q,"Priority":null,"Datacenters":null,
	"Update":null,"Periodic":null,"ParameterizedJob":null,
	"TaskGroups":[{"Name":"g","Count":null,"Update":null,"RestartPolicy":null,"ReschedulePolicy":%s,
		"Migrate":null,"EphemeralDisk":null,
		"Tasks":[{"Name":"t","Driver":"raw_exec","Config":{"command":"/bin/true"},"Resources":null,"RestartPolicy":null}]}]}`

// decodeAsServer decodes body as the server takes a job in: null
// policies filled from the type's declaration, the declaration stamped,
// canonicalized.
func decodeAsServer(t *testing.T, body string, decl *schedulerpb.JobTypeInfo) *structs.Job {
	t.Helper()
	var job structs.Job
	if err := json.Unmarshal([]byte(body), &job); err != nil {
		t.Fatal(err)
	}
	b := pluginhost.Behavior(decl)
	job.FillNullPolicies(&b)
	job.TypeBehavior = b.Copy()
	job.Canonicalize()
	return &job
}

// A job sent by Nomad's CLI without an update block takes Nomad's
// default update strategy when its type rolls out through deployments
// (service: max_parallel 1, health from checks, 10s min healthy, 5m
// healthy deadline, 10m progress deadline, stagger 30s, no auto revert or
// promote, no canary), job and group alike, so its updates run as
// deployments; the other built-in types get none. An all-zero reschedule
// block, as Nomad writes one out for system and sysbatch groups, is no
// block for those types and is accepted.
func TestCanonicalizeDefaultUpdateByType(t *testing.T) {
	def := structs.UpdateStrategy{
		Stagger: 30 * time.Second, MaxParallel: 1, HealthCheck: "checks", MinHealthyTime: 10 * time.Second,
		HealthyDeadline: 5 * time.Minute, ProgressDeadline: 10 * time.Minute,
	}
	const zeroResched = `{"Attempts":0,"Interval":0,"Delay":0,"DelayFunction":"","MaxDelay":0,"Unlimited":false}`
	tests := []struct {
		name       string
		typ        string
		decl       *schedulerpb.JobTypeInfo
		resched    string
		wantUpdate *structs.UpdateStrategy
		// wantResched: whether the group keeps a reschedule policy.
		wantResched bool
	}{
		{"service", "service", service.Declaration(), "null", &def, true},
		{"batch", "batch", batch.Declaration(), "null", nil, true},
		{"system", "system", system.Declaration(), "null", nil, false},
		{"sysbatch", "sysbatch", sysbatch.Declaration(), "null", nil, false},
		{"system, zero reschedule block", "system", system.Declaration(), zeroResched, nil, false},
		{"sysbatch, zero reschedule block", "sysbatch", sysbatch.Declaration(), zeroResched, nil, false},
		{"service, zero reschedule block kept", "service", service.Declaration(), zeroResched, &def, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := decodeAsServer(t, fmt.Sprintf(cliJobJSON, tc.typ, tc.resched), tc.decl)
			if err := job.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			tg := job.TaskGroups[0]
			for what, got := range map[string]*structs.UpdateStrategy{"job": job.Update, "group": tg.Update} {
				switch {
				case tc.wantUpdate == nil && got != nil:
					t.Errorf("%s update = %+v, want none", what, *got)
				case tc.wantUpdate != nil && (got == nil || *got != *tc.wantUpdate):
					t.Errorf("%s update = %+v, want Nomad's default %+v", what, got, *tc.wantUpdate)
				}
			}
			if got := tg.ReschedulePolicy != nil; got != tc.wantResched {
				t.Errorf("group reschedule policy = %+v, want one: %v", tg.ReschedulePolicy, tc.wantResched)
			}
		})
	}
}

// An update block the job sets is kept as set: the default fills only an
// absent one, and a max_parallel of 0 (no deployments) stays 0.
func TestCanonicalizeKeepsExplicitUpdate(t *testing.T) {
	body := `{"ID":"j","Type":"service","Update":{"MaxParallel":0},"TaskGroups":[{"Name":"g",
		"Tasks":[{"Name":"t","Driver":"raw_exec","Config":{"command":"/bin/true"}}]}]}`
	job := decodeAsServer(t, body, service.Declaration())
	if job.Update == nil || job.Update.MaxParallel != 0 || job.Update.MinHealthyTime != 10*time.Second {
		t.Fatalf("job update = %+v, want max_parallel 0 and the other fields Nomad's defaults", job.Update)
	}
	if tg := job.TaskGroups[0]; tg.Update == nil || tg.Update.MaxParallel != 0 {
		t.Fatalf("group update = %+v, want the job's (max_parallel 0)", tg.Update)
	}
}
