package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/httpapi"
	"github.com/drover-org/drover/core/structs"
)

// TestSubmitRefusals: a job over a field's bound, with a constraint that
// cannot compile, or with a cron expression or time zone the dispatcher
// could not honour, is refused at submit with a 400 naming the field and
// the rule (without echoing a huge value), through the HTTP API and
// through the server's own entry point (what a forwarded RPC reaches), and
// nothing is written.
func TestSubmitRefusals(t *testing.T) {
	s := testServer(t, nil)
	ts := httptest.NewServer(httpapi.New(httpConfig(s)).Handler())
	t.Cleanup(ts.Close)
	before := s.State().LatestIndex()

	job := func(mut func(j *structs.Job)) *structs.Job {
		j := testJob("refused", "batch")
		j.TypeBehavior = nil
		mut(j)
		return j
	}
	periodic := func(spec, tz string) func(j *structs.Job) {
		return func(j *structs.Job) { j.Periodic = &structs.PeriodicConfig{Enabled: true, Spec: spec, TimeZone: tz} }
	}
	constraint := func(op, r string) func(j *structs.Job) {
		return func(j *structs.Job) {
			j.TaskGroups[0].Constraints = []*structs.Constraint{{LTarget: "${attr.os.version}", Operand: op, RTarget: r}}
		}
	}
	cases := []struct {
		name string
		job  *structs.Job
		want string
	}{
		{"job ID of 1 MiB", job(func(j *structs.Job) { j.ID = strings.Repeat("x", 1<<20) }),
			"Job.ID: 1048576 bytes; exceeds limit MaxIdentifierBytes (128)"},
		{"meta value", job(func(j *structs.Job) { j.Meta = map[string]string{"k": strings.Repeat("v", 100_000)} }),
			`Job.Meta["k"]: 100000 bytes; exceeds limit MaxTextBytes (8192)`},
		{"env entries", job(func(j *structs.Job) {
			j.TaskGroups[0].Tasks[0].Env = map[string]string{}
			for i := range structs.MaxEntries + 1 {
				j.TaskGroups[0].Tasks[0].Env[fmt.Sprintf("V%d", i)] = "1"
			}
		}), "Job.TaskGroups[0].Tasks[0].Env: 1025 entries; exceeds limit MaxEntries (1024)"},
		{"cron of eight fields", job(periodic("0 0 0 * * * 2030 x", "")), `invalid cron expression "0 0 0 * * * 2030 x": the expression has 8 fields`},
		{"cron macro with a field", job(periodic("@daily 5", "")), `"@daily 5": @daily stands alone`},
		{"time zone", job(periodic("@daily", "Mars/Olympus")), `invalid time_zone "Mars/Olympus"`},
		{"regexp", job(constraint("regexp", "[a-")), `group "g": constraint 1: regexp "[a-" does not compile`},
		{"version", job(constraint("version", ">= x.y")), `group "g": constraint 1: version constraint ">= x.y" is invalid`},
		{"semver", job(constraint("semver", "1.2.*")), `semver constraint "1.2.*" is invalid`},
		{"set_contains", job(constraint("set_contains", "")), "set_contains needs a value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, err := json.Marshal(map[string]any{"Job": tc.job})
			if err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{"/v1/jobs", "/v1/job/" + tc.job.ID + "/plan"} {
				if len(tc.job.ID) > 1000 && strings.Contains(path, "plan") {
					continue // the URL would carry the megabyte
				}
				code, msg := send(t, "PUT", ts.URL+path, string(body))
				if code != 400 || !strings.Contains(msg, tc.want) {
					t.Errorf("PUT %.40s: %d %.500q, want 400 containing %q", path, code, msg, tc.want)
				}
				if len(msg) > 4096 {
					t.Errorf("PUT %.40s: the answer is %d bytes: it echoes the value", path, len(msg))
				}
			}
			_, err = s.Jobs().Register(context.Background(), tc.job, false, 0)
			if err == nil || structs.HTTPStatus(err) != 400 || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("RegisterJob: %.500v, want an invalid-request error containing %q", err, tc.want)
			}
		})
	}
	if after := s.State().LatestIndex(); after != before {
		t.Fatalf("refused jobs wrote to state: index %d -> %d", before, after)
	}
	if jobs, _ := s.State().Jobs(nil); len(jobs) != 0 {
		t.Fatalf("refused jobs stored: %d jobs", len(jobs))
	}
}

// TestDispatchBounds: a dispatch's meta, idempotency token and ID prefix
// are bounded before the child is derived from them; nothing is written.
func TestDispatchBounds(t *testing.T) {
	s := testServer(t, nil)
	ts := httptest.NewServer(httpapi.New(httpConfig(s)).Handler())
	t.Cleanup(ts.Close)
	registerJob(t, s, paramJob("p", structs.DispatchPayloadOptional))
	before := s.State().LatestIndex()

	big := strings.Repeat("v", 100_000)
	cases := []struct {
		name string
		req  structs.JobDispatchRequest
		want string
	}{
		{"meta value", structs.JobDispatchRequest{JobID: "p", Meta: map[string]string{"color": big}}, `Dispatch.Meta["color"]: 100000 bytes; exceeds limit MaxTextBytes`},
		{"token", structs.JobDispatchRequest{JobID: "p", Meta: map[string]string{"color": "x"}, IdempotencyToken: big}, "Dispatch.IdempotencyToken: 100000 bytes"},
		{"prefix", structs.JobDispatchRequest{JobID: "p", Meta: map[string]string{"color": "x"}, IdPrefixTemplate: strings.Repeat("a", 65)}, "Dispatch.IdPrefixTemplate: 65 bytes; exceeds limit MaxDispatchPrefixBytes (64)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Jobs().Dispatch(context.Background(), "", &tc.req)
			if err == nil || structs.HTTPStatus(err) != 400 || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DispatchJob: %.300v, want an invalid-request error containing %q", err, tc.want)
			}
			if tc.req.IdempotencyToken != "" {
				return // a query parameter of a megabyte
			}
			body, _ := json.Marshal(map[string]any{"Meta": tc.req.Meta, "IdPrefixTemplate": tc.req.IdPrefixTemplate})
			if code, msg := send(t, "PUT", ts.URL+"/v1/job/p/dispatch", string(body)); code != 400 || !strings.Contains(msg, tc.want) {
				t.Errorf("PUT dispatch: %d %.300q, want 400 containing %q", code, msg, tc.want)
			}
		})
	}
	assertNoChildren(t, s, "p", before)
}

// TestNodeRegisterBounds: a node registration over a field's bound is
// refused naming the field, and no node is written.
func TestNodeRegisterBounds(t *testing.T) {
	s := testServer(t, nil)
	before := s.State().LatestIndex()
	cases := []struct {
		name string
		mut  func(n *structs.Node)
		want string
	}{
		{"attribute value", func(n *structs.Node) { n.Attributes["big"] = strings.Repeat("x", 1<<20) },
			`Node.Attributes["big"]: 1048576 bytes; exceeds limit MaxTextBytes (8192)`},
		{"meta key", func(n *structs.Node) { n.Meta = map[string]string{strings.Repeat("k", 200): "v"} }, "200 bytes in the key; exceeds limit MaxIdentifierBytes"},
		{"node class", func(n *structs.Node) { n.NodeClass = strings.Repeat("c", 129) }, "Node.NodeClass: 129 bytes; exceeds limit MaxIdentifierBytes (128)"},
		{"driver attributes", func(n *structs.Node) {
			n.Drivers["raw_exec"].Attributes = map[string]string{}
			for i := range structs.MaxEntries + 1 {
				n.Drivers["raw_exec"].Attributes[fmt.Sprintf("a%d", i)] = "1"
			}
		}, `Node.Drivers["raw_exec"].Attributes: 1025 entries; exceeds limit MaxEntries (1024)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := testNode("n1")
			tc.mut(n)
			_, err := s.Nodes().Register(context.Background(), n)
			if err == nil || structs.HTTPStatus(err) != 400 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("RegisterNode: %.300v, want an invalid-request error containing %q", err, tc.want)
			}
		})
	}
	if after := s.State().LatestIndex(); after != before {
		t.Fatalf("refused registrations wrote to state: index %d -> %d", before, after)
	}

	// A drain's meta is kept in the node's LastDrain.
	n := testNode("n2")
	registerNodes(t, s, n)
	before = s.State().LatestIndex()
	_, err := s.Nodes().UpdateDrain(context.Background(), n.ID, &structs.DrainSpec{}, false, map[string]string{"why": strings.Repeat("x", 1<<20)})
	if want := `Meta["why"]: 1048576 bytes; exceeds limit MaxTextBytes (8192)`; err == nil || structs.HTTPStatus(err) != 400 || !strings.Contains(err.Error(), want) {
		t.Fatalf("UpdateNodeDrain: %.300v, want an invalid-request error containing %q", err, want)
	}
	if after := s.State().LatestIndex(); after != before {
		t.Fatalf("a refused drain wrote to state: index %d -> %d", before, after)
	}
}
