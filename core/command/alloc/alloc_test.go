package alloc

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

func TestAllocStatus(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	clitest.ServeAlloc(f, clitest.TestAlloc("t"))
	r := f.Run(t, "", "alloc", "status", "8ba8")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out,
		"ID                  = 8ba85cef",
		"Eval ID             = 4f6c9e5e",
		"Name                = web.g[0]",
		"Job Version         = 3",
		"Client Description  = Tasks are running",
		"Desired Description = <none>",
		"Created             = 5m ago",
		`Task "t" is "running"`,
		"Task Resources:\nCPU      Memory   Disk\n500 MHz  256 MiB  300 MiB",
		"Total Restarts = 0",
		"Recent Events:\nTime",
		"Started     Task started by client",
	)
	// Newest event first.
	if strings.Index(r.Out, "Task started by client") > strings.Index(r.Out, "Task received by client") {
		t.Errorf("events not newest first:\n%s", r.Out)
	}

	r = f.Run(t, "", "alloc", "status", "-json", "8ba8")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "json", r.Out, `"ClientStatus": "running"`)

	f.JSON("GET /v1/allocations", []*structs.AllocListStub{{ID: "8ba85cef-1"}, {ID: "8ba85cef-2"}})
	r = f.Run(t, "", "alloc", "status", "8ba8")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "Prefix matched multiple allocations", "8ba85cef-1", "8ba85cef-2")

	f.JSON("GET /v1/allocations", []any{})
	r = f.Run(t, "", "alloc", "status", "ffff")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, `No allocation(s) with prefix or id "ffff" found`)
}

func TestAllocStop(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	clitest.ServeAlloc(f, clitest.TestAlloc("t"))
	f.JSON("PUT /v1/allocation/"+clitest.AllocID+"/stop", structs.AllocStopResponse{EvalID: clitest.EvalID})
	clitest.ServeEval(f, &structs.Evaluation{ID: clitest.EvalID, Status: "complete", JobID: "web"}, nil)
	r := f.Run(t, "", "alloc", "stop", "-detach", "8ba8")
	clitest.WantCode(t, r, 0)
	if strings.TrimSpace(r.Out) != clitest.EvalID {
		t.Errorf("stdout %q", r.Out)
	}
	r = f.Run(t, "", "alloc", "stop", "8ba8")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, `==> Monitoring evaluation "4f6c9e5e"`)
}

func TestAllocLogs(t *testing.T) {
	const text = "one\ntwo\nthree\nfour\n"
	tests := []struct {
		name    string
		tasks   []string
		args    []string
		code    int
		want    string
		query   url.Values
		wantErr string
	}{
		{name: "whole stdout", tasks: []string{"t"}, args: []string{"8ba8"}, want: text,
			query: url.Values{"task": {"t"}, "type": {"stdout"}, "origin": {"start"}, "offset": {"0"}, "plain": {"true"}}},
		{name: "stderr of a named task", tasks: []string{"t", "u"}, args: []string{"-stderr", "8ba8", "t"}, want: text,
			query: url.Values{"task": {"t"}, "type": {"stderr"}, "origin": {"start"}, "offset": {"0"}, "plain": {"true"}}},
		{name: "tail default 10 lines", tasks: []string{"t"}, args: []string{"-tail", "8ba8"}, want: text,
			query: url.Values{"task": {"t"}, "type": {"stdout"}, "origin": {"end"}, "offset": {"2560"}, "plain": {"true"}}},
		{name: "last 2 lines", tasks: []string{"t"}, args: []string{"-n", "2", "8ba8"}, want: "three\nfour\n",
			query: url.Values{"task": {"t"}, "type": {"stdout"}, "origin": {"end"}, "offset": {"512"}, "plain": {"true"}}},
		{name: "last bytes", tasks: []string{"t"}, args: []string{"-c", "5", "8ba8"}, want: text,
			query: url.Values{"task": {"t"}, "type": {"stdout"}, "origin": {"end"}, "offset": {"5"}, "plain": {"true"}}},
		{name: "follow", tasks: []string{"t"}, args: []string{"-f", "8ba8"}, want: text,
			query: url.Values{"task": {"t"}, "type": {"stdout"}, "origin": {"start"}, "offset": {"0"}, "follow": {"true"}}},
		{name: "follow tail", tasks: []string{"t"}, args: []string{"-f", "-n", "1", "8ba8"}, want: "four\n",
			query: url.Values{"task": {"t"}, "type": {"stdout"}, "origin": {"end"}, "offset": {"256"}, "follow": {"true"}}},
		{name: "task must be named", tasks: []string{"t", "u"}, args: []string{"8ba8"}, code: 1,
			wantErr: "Allocation \"8ba85cef\" is running the following tasks:\n  * t\n  * u\n\nPlease specify the task."},
		{name: "unknown task", tasks: []string{"t"}, args: []string{"8ba8", "x"}, code: 1, wantErr: "Could not find task named: x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := clitest.NewFakeAgent(t)
			clitest.ServeAlloc(f, clitest.TestAlloc(tc.tasks...))
			clitest.ServeLogs(f, text, 3)
			r := f.Run(t, "", append([]string{"alloc", "logs"}, tc.args...)...)
			clitest.WantCode(t, r, tc.code)
			clitest.WantContains(t, "stderr", r.ErrOut, tc.wantErr)
			if tc.code != 0 {
				return
			}
			if r.Out != tc.want {
				t.Errorf("stdout %q, want %q", r.Out, tc.want)
			}
			q, _ := url.ParseQuery(f.Request("GET /v1/client/fs/logs/" + clitest.AllocID).Query)
			if q.Encode() != tc.query.Encode() {
				t.Errorf("query %s, want %s", q.Encode(), tc.query.Encode())
			}
		})
	}
}

// A rescheduled alloc shows its lineage and how many of its group's
// reschedule attempts it used, as Nomad's alloc status does.
func TestAllocStatusRescheduled(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	a := clitest.TestAlloc("t")
	a.Job.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{Attempts: 2, Interval: time.Hour}
	a.ClientStatus = "failed"
	a.PreviousAllocation = "11111111-aaaa-bbbb-cccc-000000000000"
	a.RescheduleTracker = &structs.RescheduleTracker{Events: []*structs.RescheduleEvent{{RescheduleTime: 1, PrevAllocID: a.PreviousAllocation}}}
	clitest.ServeAlloc(f, a)
	r := f.Run(t, "", "alloc", "status", "8ba8")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out,
		"Previous Allocation = 11111111",
		"Reschedule Attempts = 1/2",
	)
}
