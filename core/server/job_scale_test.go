package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/httpapi"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/builtin"
	"github.com/drover-org/drover/plugins/gc"
)

// cappedRouter serves the built-in types, with batch declaring a
// max_group_count of 5: the type's bound on scaling.
type cappedRouter struct{ builtin.InProcess }

func (r cappedRouter) JobType(t string) (structs.JobTypeBehavior, bool) {
	b, ok := r.InProcess.JobType(t)
	if t == "batch" {
		b.MaxGroupCount = 5
	}
	return b, ok
}

// scaleFixture is a server behind its HTTP API with a batch job "web"
// (group "g", count 1), a sysbatch job "sb" and a stopped batch job "old".
func scaleFixture(t *testing.T, mut func(*Config)) (*Server, *httptest.Server) {
	t.Helper()
	s := testServer(t, func(c *Config) {
		c.Schedulers = cappedRouter{}
		if mut != nil {
			mut(c)
		}
	})
	registerJob(t, s, testJob("web", "batch"))
	registerJob(t, s, testJob("sb", "sysbatch"))
	registerJob(t, s, testJob("old", "batch"))
	if _, err := s.Jobs().Deregister(context.Background(), "", "old", false); err != nil {
		t.Fatal(err)
	}
	// The registrations' evals are done before a test compares indexes.
	for _, id := range []string{"web", "sb", "old"} {
		waitJobEvalsTerminal(t, s, id)
	}
	ts := httptest.NewServer(httpapi.New(httpConfig(s)).Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

func send(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// Every refusal of a scale or revert answers its status with a message
// naming the field or rule, and leaves the state untouched.
func TestScaleAndRevertRefusals(t *testing.T) {
	s, ts := scaleFixture(t, func(c *Config) { c.MaxAllocsPerJob = 4 })
	web, _ := s.State().JobByID(nil, "default", "web")
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"unknown job", "PUT", "/v1/job/nope/scale", `{"Count":2,"Target":{"Group":"g"}}`, 404, `job "nope" not found`},
		{"missing group", "PUT", "/v1/job/web/scale", `{"Count":2}`, 400, "Target.Group: the task group to scale is required"},
		{"unknown group", "POST", "/v1/job/web/scale", `{"Count":2,"Target":{"Group":"nope"}}`, 400, `task group "nope" specified for scaling does not exist`},
		{"negative count", "PUT", "/v1/job/web/scale", `{"Count":-1,"Target":{"Group":"g"}}`, 400, "Count: must not be negative (got -1)"},
		{"above the type's max_group_count", "PUT", "/v1/job/web/scale", `{"Count":6,"Target":{"Group":"g"}}`, 400, "at most 5 allocation(s)"},
		{"above max_allocs_per_job", "PUT", "/v1/job/web/scale", `{"Count":5,"Target":{"Group":"g"}}`, 400, "max_allocs_per_job = 4"},
		{"huge count", "PUT", "/v1/job/web/scale", `{"Count":9223372036854775807,"Target":{"Group":"g"}}`, 400, "allocation(s)"},
		{"per-node type", "PUT", "/v1/job/sb/scale", `{"Count":2,"Target":{"Group":"g"}}`, 400, "per_node"},
		{"stopped job", "PUT", "/v1/job/old/scale", `{"Count":2,"Target":{"Group":"g"}}`, 400, `job "old" is stopped`},
		{"target names another job", "PUT", "/v1/job/web/scale", `{"Count":2,"Target":{"Group":"g","Job":"other"}}`, 400, `Target.Job: "other" does not match`},
		{"nothing to do", "PUT", "/v1/job/web/scale", `{"Target":{"Group":"g"}}`, 400, "Count: required unless"},
		{"message too long", "PUT", "/v1/job/web/scale", `{"Message":"` + strings.Repeat("x", structs.MaxScalingMessageBytes+1) + `","Target":{"Group":"g"}}`, 400, "Message: 4097 bytes"},
		{"meta too large", "PUT", "/v1/job/web/scale", `{"Message":"m","Meta":{"k":"` + strings.Repeat("x", structs.MaxScalingMetaBytes) + `"},"Target":{"Group":"g"}}`, 400, "Meta:"},
		{"stale job modify index", "PUT", "/v1/job/web/scale", fmt.Sprintf(`{"Count":2,"JobModifyIndex":%d,"Target":{"Group":"g"}}`, web.JobModifyIndex+100), 409, "JobModifyIndex"},
		{"bad body", "PUT", "/v1/job/web/scale", `{"Count":"two"}`, 400, ""},
		{"scale status of unknown job", "GET", "/v1/job/nope/scale", "", 404, "job not found"},
		{"delete on scale", "DELETE", "/v1/job/web/scale", "", 405, ""},
		{"revert unknown job", "PUT", "/v1/job/nope/revert", `{"JobVersion":0}`, 404, `job "nope" not found`},
		{"revert to current version", "PUT", "/v1/job/web/revert", `{"JobVersion":0}`, 400, "can't revert to the current version 0"},
		{"revert to unknown version", "PUT", "/v1/job/web/revert", `{"JobVersion":9}`, 404, "has no version 9"},
		{"revert enforcing another prior version", "PUT", "/v1/job/web/revert", `{"JobVersion":9,"EnforcePriorVersion":3}`, 400, "EnforcePriorVersion: current job has version 0; enforcing version 3"},
		{"revert body names another job", "PUT", "/v1/job/web/revert", `{"JobID":"x","JobVersion":0}`, 400, `JobID: "x" does not match`},
		{"revert with GET", "GET", "/v1/job/web/revert", "", 405, ""},
	}
	before := s.State().LatestIndex()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := send(t, tc.method, ts.URL+tc.path, tc.body)
			if code != tc.status || !strings.Contains(body, tc.want) {
				t.Fatalf("%s %s = %d %.300q, want %d containing %q", tc.method, tc.path, code, body, tc.status, tc.want)
			}
		})
	}
	if after := s.State().LatestIndex(); after != before {
		t.Errorf("refusals moved the state from index %d to %d", before, after)
	}
	if ev, _ := s.State().ScalingEventsByJob(nil, "default", "web"); ev != nil {
		t.Errorf("a refused scale recorded events: %+v", ev)
	}
}

// Nomad's client scales, reads the scale status and reverts; each write is
// a new job version with its eval, as the state shows.
func TestScaleAndRevertWithNomadClient(t *testing.T) {
	s, ts := scaleFixture(t, nil)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	jobs := c.Jobs()

	three := 3
	resp, wm, err := jobs.Scale("web", "g", &three, "more load", false, map[string]any{"source": "test", "n": 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	job, _ := s.State().JobByID(nil, "default", "web")
	if job.Version != 1 || job.TaskGroups[0].Count != 3 || resp.JobModifyIndex != job.JobModifyIndex {
		t.Fatalf("after scale: version %d count %d modify %d (response %d), want version 1 count 3", job.Version, job.TaskGroups[0].Count, job.JobModifyIndex, resp.JobModifyIndex)
	}
	ev, _ := s.State().EvalByID(nil, resp.EvalID)
	if ev == nil || ev.TriggeredBy != structs.EvalTriggerJobScaling || ev.JobModifyIndex != job.JobModifyIndex || resp.EvalCreateIndex == 0 {
		t.Fatalf("scale eval %+v (create index %d), want a job-scaling eval of the new version", ev, resp.EvalCreateIndex)
	}

	// A message-only request records an event and changes nothing else.
	resp2, _, err := jobs.Scale("web", "g", nil, "autoscaler saw an error", true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp2.EvalID != "" {
		t.Errorf("an event-only request created eval %s", resp2.EvalID)
	}
	if j, _ := s.State().JobByID(nil, "default", "web"); j.Version != 1 {
		t.Errorf("an event-only request wrote version %d", j.Version)
	}

	st, _, err := jobs.ScaleStatus("web", nil)
	if err != nil {
		t.Fatal(err)
	}
	g := st.TaskGroups["g"]
	if st.JobID != "web" || st.Namespace != "default" || st.JobStopped || st.JobModifyIndex != job.JobModifyIndex || g.Desired != 3 || len(g.Events) != 2 {
		t.Fatalf("scale status %+v, group %+v", st, g)
	}
	newest, first := g.Events[0], g.Events[1]
	if newest.Count != nil || !newest.Error || newest.Message != "autoscaler saw an error" || newest.EvalID != nil {
		t.Errorf("newest event %+v, want the error without count or eval", newest)
	}
	if first.Count == nil || *first.Count != 3 || first.PreviousCount != 1 || first.EvalID == nil || *first.EvalID != resp.EvalID ||
		first.Meta["source"] != "test" || first.Meta["n"] != float64(2) || first.Time == 0 || first.CreateIndex != wm.LastIndex {
		t.Errorf("scale event %+v, want count 3 from 1 with the eval, meta and index", first)
	}

	rresp, _, err := jobs.Revert("web", 0, new(uint64(1)), nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	job, _ = s.State().JobByID(nil, "default", "web")
	if job.Version != 2 || job.TaskGroups[0].Count != 1 || rresp.JobModifyIndex != job.JobModifyIndex {
		t.Fatalf("after revert: version %d count %d, want version 2 count 1", job.Version, job.TaskGroups[0].Count)
	}
	if ev, _ := s.State().EvalByID(nil, rresp.EvalID); ev == nil || ev.TriggeredBy != structs.EvalTriggerJobRegister {
		t.Fatalf("revert eval %+v, want a job-register eval", ev)
	}
	if _, _, err := jobs.Revert("web", 2, nil, nil, "", ""); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("revert to the current version through the client: %v, want a 400", err)
	}

	// Purging the job deletes its events.
	if _, err := s.Jobs().Deregister(context.Background(), "", "web", true); err != nil {
		t.Fatal(err)
	}
	if ev, _ := s.State().ScalingEventsByJob(nil, "default", "web"); ev != nil {
		t.Errorf("events outlived the purged job: %+v", ev)
	}
}

// A scale to the count the group has writes no version but evaluates, and
// the events of a group stay bounded however many actions it sees.
func TestScaleUnchangedAndEventsBounded(t *testing.T) {
	s, _ := scaleFixture(t, nil)
	ctx := context.Background()
	one := int64(1)
	resp, err := s.Jobs().Scale(ctx, "", "web", &structs.ScalingRequest{Count: &one, Target: map[string]string{"Group": "g"}})
	if err != nil {
		t.Fatal(err)
	}
	job, _ := s.State().JobByID(nil, "default", "web")
	if job.Version != 0 || resp.EvalID == "" || resp.JobModifyIndex != job.JobModifyIndex {
		t.Fatalf("unchanged scale: version %d eval %q modify %d/%d, want version 0 and an eval", job.Version, resp.EvalID, resp.JobModifyIndex, job.JobModifyIndex)
	}
	for i := 0; i < 25; i++ {
		if _, err := s.Jobs().Scale(ctx, "", "web", &structs.ScalingRequest{Message: fmt.Sprintf("m%d", i), Target: map[string]string{"Group": "g"}}); err != nil {
			t.Fatal(err)
		}
	}
	row, _ := s.State().ScalingEventsByJob(nil, "default", "web")
	l := row.ScalingEvents["g"]
	if len(l) != structs.MaxScalingEventsPerGroup || l[0].Message != "m24" || l[19].Message != "m5" {
		t.Fatalf("%d events, newest %q, oldest %q; want 20, m24..m5", len(l), l[0].Message, l[len(l)-1].Message)
	}
}

// A scale proposed for a version that changed before it applied is refused
// by the state machine, which writes nothing.
func TestScaleEntryRefusedWhenJobChanged(t *testing.T) {
	s, _ := scaleFixture(t, nil)
	job, _ := s.State().JobByID(nil, "default", "web")
	next := job.Copy()
	next.TaskGroups[0].Count = 2
	for _, tc := range []struct {
		name  string
		entry *structs.JobScaleRequest
		kind  error
	}{
		{"stale index", &structs.JobScaleRequest{Namespace: "default", JobID: "web", Group: "g", JobModifyIndex: job.JobModifyIndex - 1, Job: next, Event: &structs.ScalingEvent{}}, structs.ErrConflict},
		{"purged job", &structs.JobScaleRequest{Namespace: "default", JobID: "gone", Group: "g", Event: &structs.ScalingEvent{}}, structs.ErrNotFound},
		{"another job's spec", &structs.JobScaleRequest{Namespace: "default", JobID: "sb", Group: "g", Job: next}, structs.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.raftApply(structs.JobScaleRequestType, tc.entry)
			if !errors.Is(err, tc.kind) {
				t.Fatalf("err = %v, want kind %v", err, tc.kind)
			}
		})
	}
	if j, _ := s.State().JobByID(nil, "default", "web"); j.Version != 0 {
		t.Errorf("a refused entry wrote version %d", j.Version)
	}
	if ev, _ := s.State().ScalingEventsByJob(nil, "default", "web"); ev != nil {
		t.Errorf("a refused entry wrote events")
	}
	if s.Failed() != nil {
		t.Fatalf("server stopped: %v", s.Failed())
	}
}

// Scale and revert sent to a follower run on the leader; refusals keep
// their kind across the forward.
func TestScaleAndRevertForwardToLeader(t *testing.T) {
	var lns []net.Listener
	var addrs []string
	for i := 0; i < 2; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns, addrs = append(lns, ln), append(addrs, ln.Addr().String())
	}
	r := &gcRouter{col: gc.New()}
	a := clusterServer(t, "a", lns[0], addrs, r)
	b := clusterServer(t, "b", lns[1], addrs, r)
	var leader, follower *Server
	waitFor(t, 30*time.Second, "a leader", func() bool {
		switch {
		case a.IsLeader() && a.established.Load():
			leader, follower = a, b
		case b.IsLeader() && b.established.Load():
			leader, follower = b, a
		default:
			return false
		}
		return true
	})
	ctx := context.Background()
	registerNodes(t, leader, testNode("n1")) // the cluster knows raw_exec from the node
	registerJob(t, leader, testJob("web", "batch"))
	registerJob(t, leader, testJob("sb", "sysbatch"))
	two := int64(2)
	g := map[string]string{"Group": "g"}
	for _, tc := range []struct {
		name string
		call func() error
		kind error
	}{
		{"unknown job", func() error {
			_, err := follower.Jobs().Scale(ctx, "", "nope", &structs.ScalingRequest{Count: &two, Target: g})
			return err
		}, structs.ErrNotFound},
		{"unknown group", func() error {
			_, err := follower.Jobs().Scale(ctx, "", "web", &structs.ScalingRequest{Count: &two, Target: map[string]string{"Group": "x"}})
			return err
		}, structs.ErrInvalid},
		{"per-node type", func() error {
			_, err := follower.Jobs().Scale(ctx, "", "sb", &structs.ScalingRequest{Count: &two, Target: g})
			return err
		}, structs.ErrInvalid},
		{"revert to current", func() error {
			_, err := follower.Jobs().Revert(ctx, "", "web", 0, nil)
			return err
		}, structs.ErrInvalid},
		{"revert unknown version", func() error {
			_, err := follower.Jobs().Revert(ctx, "", "web", 7, nil)
			return err
		}, structs.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := retryNoLeader(t, tc.call); !errors.Is(err, tc.kind) {
				t.Fatalf("err = %v, want kind %v", err, tc.kind)
			}
		})
	}
	var resp *structs.JobRegisterResponse
	if err := retryNoLeader(t, func() (err error) {
		resp, err = follower.Jobs().Scale(ctx, "", "web", &structs.ScalingRequest{Count: &two, Target: g, Message: "via follower"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if j, _ := leader.State().JobByID(nil, "default", "web"); j.TaskGroups[0].Count != 2 || j.Version != 1 || resp.EvalID == "" {
		t.Fatalf("leader's job after a forwarded scale: count %d version %d", j.TaskGroups[0].Count, j.Version)
	}
	// The follower applies the same entry: its state holds the event.
	waitFor(t, 10*time.Second, "the event on the follower", func() bool {
		ev, _ := follower.State().ScalingEventsByJob(nil, "default", "web")
		return ev != nil && len(ev.ScalingEvents["g"]) == 1 && ev.ScalingEvents["g"][0].Message == "via follower"
	})
	if _, err := follower.Jobs().Revert(ctx, "", "web", 0, nil); err != nil {
		t.Fatal(err)
	}
	if j, _ := leader.State().JobByID(nil, "default", "web"); j.TaskGroups[0].Count != 1 || j.Version != 2 {
		t.Fatalf("leader's job after a forwarded revert: count %d version %d", j.TaskGroups[0].Count, j.Version)
	}
}

// Scaling a periodic parent changes the count of its next children and
// evaluates nothing now.
func TestScalePeriodicParent(t *testing.T) {
	s, _ := scaleFixture(t, nil)
	parent := testJob("cron", "batch")
	parent.Periodic = &structs.PeriodicConfig{Enabled: true, Spec: "0 * * * *"}
	registerJob(t, s, parent)
	two := int64(2)
	resp, err := s.Jobs().Scale(context.Background(), "", "cron", &structs.ScalingRequest{Count: &two, Target: map[string]string{"Group": "g"}})
	if err != nil {
		t.Fatal(err)
	}
	job, _ := s.State().JobByID(nil, "default", "cron")
	if resp.EvalID != "" || job.Version != 1 || job.TaskGroups[0].Count != 2 || resp.JobModifyIndex != job.JobModifyIndex {
		t.Fatalf("scaled parent: eval %q version %d count %d", resp.EvalID, job.Version, job.TaskGroups[0].Count)
	}
	row, _ := s.State().ScalingEventsByJob(nil, "default", "cron")
	if row == nil || len(row.ScalingEvents["g"]) != 1 || row.ScalingEvents["g"][0].EvalID != nil {
		t.Fatalf("parent's events %+v, want one without an eval", row)
	}
}

// A group's scaling block bounds `job scale`: a count outside [min, max]
// is refused with the bound named, through Nomad's client too, and
// nothing is written; a count inside is scaled to.
func TestScaleWithinScalingPolicy(t *testing.T) {
	s, ts := scaleFixture(t, nil)
	job := testJob("bounded", "batch")
	job.TaskGroups[0].Count = 2
	job.TaskGroups[0].Scaling = &structs.ScalingPolicy{Min: 1, Max: 4, Enabled: true}
	registerJob(t, s, job)
	waitJobEvalsTerminal(t, s, "bounded")
	stored, _ := s.State().JobByID(nil, "default", "bounded")
	sp := stored.TaskGroups[0].Scaling
	if sp == nil || sp.Type != "horizontal" || sp.ID != structs.ScalingPolicyID("default", "bounded", "g") ||
		sp.Target["Job"] != "bounded" || sp.Target["Group"] != "g" || sp.Target["Namespace"] != "default" {
		t.Fatalf("stored scaling policy %+v, want a horizontal policy targeting default/bounded/g", sp)
	}

	before := s.State().LatestIndex()
	for _, tc := range []struct {
		body, want string
	}{
		{`{"Count":5,"Target":{"Group":"g"}}`, `Count: 5 is greater than the maximum of group "g"'s scaling policy (max = 4)`},
		{`{"Count":0,"Target":{"Group":"g"}}`, `Count: 0 is less than the minimum of group "g"'s scaling policy (min = 1)`},
	} {
		code, body := send(t, "PUT", ts.URL+"/v1/job/bounded/scale", tc.body)
		if code != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("scale %s = %d %q, want 400 containing %q", tc.body, code, body, tc.want)
		}
	}
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	ten := 10
	if _, _, err := c.Jobs().Scale("bounded", "g", &ten, "", false, nil, nil); err == nil || !strings.Contains(err.Error(), "max = 4") {
		t.Errorf("scale to 10 through Nomad's client: %v, want the maximum named", err)
	}
	if after := s.State().LatestIndex(); after != before {
		t.Errorf("refused scales moved the state from index %d to %d", before, after)
	}

	four := 4
	if _, _, err := c.Jobs().Scale("bounded", "g", &four, "", false, nil, nil); err != nil {
		t.Fatal(err)
	}
	stored, _ = s.State().JobByID(nil, "default", "bounded")
	if stored.TaskGroups[0].Count != 4 || stored.TaskGroups[0].Scaling.Max != 4 {
		t.Errorf("after scaling to the max: count %d, policy %+v", stored.TaskGroups[0].Count, stored.TaskGroups[0].Scaling)
	}
}

// retryNoLeader calls call again while it fails for want of a leader, as a
// real client retries: on a loaded machine a two-server cluster may hold
// an election between the test's calls. It gives up after 30 s.
func retryNoLeader(t *testing.T, call func() error) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := call()
		if !errors.Is(err, structs.ErrNoLeader) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond) // back-off between retries, not synchronisation
	}
}
