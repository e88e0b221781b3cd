package job

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

func TestJobStatusList(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/jobs", []*structs.JobListStub{
		{ID: "cron", Type: "batch", Priority: 50, Status: "running", Periodic: true},
		{ID: "web", Type: "service", Priority: 70, Status: "pending"},
	})
	for _, args := range [][]string{{"job", "status"}, {"status"}} {
		r := f.Run(t, "", args...)
		clitest.WantCode(t, r, 0)
		lines := strings.Split(strings.TrimSpace(r.Out), "\n")
		if len(lines) != 3 {
			t.Fatalf("%v: %d lines:\n%s", args, len(lines), r.Out)
		}
		clitest.WantContains(t, "header", lines[0], "ID    Type            Priority  Status   Submit Date")
		clitest.WantContains(t, "row", lines[1], "cron  batch/periodic  50        running")
		clitest.WantContains(t, "row", lines[2], "web   service         70        pending")
	}

	r := f.Run(t, "", "job", "status", "-json")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "json", r.Out, `"ID": "cron"`, `"Periodic": true`)

	f.JSON("GET /v1/jobs", []any{})
	r = f.Run(t, "", "status")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, "No running jobs")
}

func TestJobStatusOne(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/jobs", []*structs.JobListStub{{ID: "web"}})
	f.JSON("GET /v1/job/web", &structs.Job{ID: "web", Name: "web", Type: "batch", Priority: 50, Datacenters: []string{"dc1", "dc2"},
		Namespace: "default", NodePool: "default", Status: "running", SubmitTime: clitest.Ns(clitest.TestNow.Add(-time.Hour)),
		TaskGroups: []*structs.TaskGroup{{Name: "g"}}})
	f.JSON("GET /v1/job/web/summary", &structs.JobSummary{JobID: "web", Summary: map[string]structs.TaskGroupSummary{"g": {Running: 2, Complete: 1}}})
	f.JSON("GET /v1/job/web/evaluations", []*structs.Evaluation{
		{ID: "11111111-aaaa", Priority: 50, TriggeredBy: "job-register", Status: "complete", CreateIndex: 5},
		{ID: "22222222-bbbb", Priority: 50, TriggeredBy: "node-update", Status: "complete", CreateIndex: 9,
			FailedTGAllocs: map[string]*structs.AllocMetric{"g": {NodesEvaluated: 1, NodesExhausted: 1}}},
	})
	f.JSON("GET /v1/job/web/allocations", []*structs.AllocListStub{
		{ID: "aaaaaaaa-1111", NodeID: "nnnnnnnn-1111", TaskGroup: "g", JobVersion: 0, DesiredStatus: "run", ClientStatus: "running",
			CreateIndex: 6, CreateTime: clitest.Ns(clitest.TestNow.Add(-5 * time.Minute)), ModifyTime: clitest.Ns(clitest.TestNow.Add(-30 * time.Second))},
		{ID: "bbbbbbbb-2222", NodeID: "nnnnnnnn-2222", TaskGroup: "g", JobVersion: 1, DesiredStatus: "run", ClientStatus: "complete",
			CreateIndex: 8, CreateTime: clitest.Ns(clitest.TestNow.Add(-2 * time.Minute)), ModifyTime: clitest.Ns(clitest.TestNow.Add(-time.Minute))},
	})
	r := f.Run(t, "", "job", "status", "web")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out,
		"ID            = web",
		"Datacenters   = dc1,dc2",
		"Parameterized = false",
		"Summary\nTask Group  Queued  Starting  Running  Failed  Complete  Lost  Unknown\ng           0       0         2        0       1         0     0",
		"Placement Failure\nTask Group \"g\" (failed to place 1 allocation):\n  * Resources exhausted on 1 nodes",
		"Allocations\nID        Node ID   Task Group  Version  Desired  Status    Created  Modified\nbbbbbbbb  nnnnnnnn  g           1        run      complete  2m ago   1m ago\naaaaaaaa  nnnnnnnn  g           0        run      running   5m ago   30s ago",
		"Latest Evaluations\nID        Priority  Triggered By  Status    Placement Failures\n22222222  50        node-update   complete  true\n11111111  50        job-register  complete  false",
	)

	r = f.Run(t, "", "job", "status", "-verbose", "web")
	clitest.WantContains(t, "verbose", r.Out, "aaaaaaaa-1111  nnnnnnnn-1111")

	r = f.Run(t, "", "job", "status", "-json", "web")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "json", r.Out, `"TaskGroups": [`)
}

func TestJobStatusLookup(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/jobs", []*structs.JobListStub{{ID: "web-a", Type: "batch"}, {ID: "web-b", Type: "batch"}})
	r := f.Run(t, "", "job", "status", "web")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "Prefix matched multiple jobs", "web-a", "web-b")
	if q := f.Request("GET /v1/jobs").Query; q != "prefix=web" {
		t.Errorf("query %q", q)
	}

	f.JSON("GET /v1/jobs", []any{})
	r = f.Run(t, "", "job", "status", "nope")
	clitest.WantCode(t, r, 1)
	if strings.TrimSpace(r.ErrOut) != `No job(s) with prefix or id "nope" found` {
		t.Errorf("stderr %q", r.ErrOut)
	}
}

func TestJobStatusParent(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/jobs", []*structs.JobListStub{
		{ID: "param", ParameterizedJob: true},
		{ID: "param/dispatch-1-aaaa", ParentID: "param", Status: "dead", SubmitTime: 1},
		{ID: "param/dispatch-2-bbbb", ParentID: "param", Status: "running", SubmitTime: 2},
		{ID: "param/other", ParentID: "someone-else"},
	})
	f.JSON("GET /v1/job/param", &structs.Job{ID: "param", Name: "param", Type: "batch", Status: "running",
		ParameterizedJob: &structs.ParameterizedJobConfig{Payload: "required", MetaRequired: []string{"color"}}})
	f.JSON("GET /v1/job/param/summary", &structs.JobSummary{JobID: "param", Children: &structs.JobChildrenSummary{Running: 1, Dead: 1}})
	r := f.Run(t, "", "job", "status", "param")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out,
		"Parameterized = true",
		"Parameterized Job\nPayload           = required\nRequired Metadata = color\nOptional Metadata = <none>",
		"Parameterized Job Summary\nPending  Running  Dead\n0        1        1",
		"Dispatched Jobs\nID                     Status\nparam/dispatch-2-bbbb  running\nparam/dispatch-1-aaaa  dead",
	)
	if strings.Contains(r.Out, "param/other") {
		t.Error("a job of another parent is listed as a child")
	}
	if q := f.Request("GET /v1/jobs").Query; q != "prefix=param%2F" {
		t.Errorf("children query %q", q)
	}
}

func TestJobStatusPeriodicParent(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/jobs", []*structs.JobListStub{
		{ID: "cron", Periodic: true},
		{ID: "cron/periodic-1777636800", ParentID: "cron", Status: "dead", SubmitTime: 1},
	})
	f.JSON("GET /v1/job/cron", &structs.Job{ID: "cron", Name: "cron", Type: "sysbatch", Status: "running",
		Periodic: &structs.PeriodicConfig{Enabled: true, Spec: "*/15 * * * *", TimeZone: "UTC"}})
	f.JSON("GET /v1/job/cron/summary", &structs.JobSummary{JobID: "cron", Children: &structs.JobChildrenSummary{Dead: 1}})
	r := f.Run(t, "", "job", "status", "cron")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out,
		"Periodic             = true",
		"Next Periodic Launch = 2026-05-01T12:15:00Z (15m from now)",
		"Children Job Summary\nPending  Running  Dead\n0        0        1",
		"Previously Launched Jobs\nID                        Status\ncron/periodic-1777636800  dead",
	)
}
