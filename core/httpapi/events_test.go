package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/structs"
)

// streamLine is one line of /v1/event/stream, decoded loosely.
type streamLine struct {
	Index  uint64
	Error  string
	Events []struct {
		Topic, Type, Key, Namespace string
		Index                       uint64
		Payload                     map[string]json.RawMessage
	}
}

// openStream starts a raw stream request and returns a line reader; the
// request ends with the test.
func openStream(t *testing.T, url, secret string) (*http.Response, *bufio.Scanner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("X-Nomad-Token", secret)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	return resp, sc
}

// untilHeartbeat reads lines up to the first heartbeat: with index 0 the
// whole backlog comes first, so the heartbeat marks its end.
func untilHeartbeat(t *testing.T, sc *bufio.Scanner) []streamLine {
	t.Helper()
	var out []streamLine
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "{}" {
			return out
		}
		var l streamLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	t.Fatalf("stream ended before a heartbeat: %v", sc.Err())
	return nil
}

// Per caller, the Job events across namespaces that the stream shows: only
// those of namespaces the token may read-job in, Env redacted unless it may
// submit; a topic the token cannot read in the asked namespace is 403.
func TestEventStreamACL(t *testing.T) {
	w := newACLWorld(t)
	h := New(sameServer(w.h, Config{EventHeartbeat: 50 * time.Millisecond}))
	ts := httptest.NewServer(h.Handler())
	t.Cleanup(ts.Close)
	tests := []struct {
		caller     int
		namespaces []string
		redacted   bool
	}{
		{callerMgmt, []string{"default", "team"}, false},
		{callerOtherNS, []string{"team"}, false},
		{callerReadOnly, []string{"default"}, true},
		{callerNoCap, nil, false},
		{callerNone, nil, false},
	}
	for _, tt := range tests {
		t.Run(callerNames[tt.caller], func(t *testing.T) {
			resp, sc := openStream(t, ts.URL+"/v1/event/stream?topic=Job&namespace=*", w.secrets[tt.caller])
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			var seen []string
			for _, l := range untilHeartbeat(t, sc) {
				for _, e := range l.Events {
					if e.Topic != "Job" {
						t.Fatalf("topic %s in a Job stream", e.Topic)
					}
					if !slices.Contains(seen, e.Namespace) {
						seen = append(seen, e.Namespace)
					}
					job := string(e.Payload["Job"])
					if got := strings.Contains(job, "hunter2"); got == tt.redacted {
						t.Fatalf("Env secret shown=%v, want redacted=%v: %s", got, tt.redacted, job)
					}
				}
			}
			slices.Sort(seen)
			if fmt.Sprint(seen) != fmt.Sprint(tt.namespaces) {
				t.Fatalf("namespaces seen = %v, want %v", seen, tt.namespaces)
			}
		})
	}
	// A topic asked for in a namespace the token cannot read is refused.
	for _, c := range []struct {
		caller int
		query  string
	}{
		{callerReadOnly, "topic=Job&namespace=team"},
		{callerOtherNS, "topic=Node"},
		{callerReadOnly, "topic=ACLToken"},
		{callerReadOnly, ""}, // every topic: management only, as Nomad
	} {
		resp, _ := openStream(t, ts.URL+"/v1/event/stream?"+c.query, w.secrets[c.caller])
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s as %s: status %d, want 403", c.query, callerNames[c.caller], resp.StatusCode)
		}
	}
}

// Bad parameters are 400 naming the parameter and the rule.
func TestEventStreamBadParams(t *testing.T) {
	srv := devServer(t, false)
	ts := httptest.NewServer(New(serverConfig(srv, Config{})).Handler())
	t.Cleanup(ts.Close)
	many := strings.Repeat("topic=Job&", 65)
	tests := []struct{ query, want string }{
		{"index=abc", "index query parameter"},
		{"index=-3", "non-negative integer"},
		{"topic=Bogus", `unknown topic "Bogus"`},
		{"topic=:web", "expected Topic or Topic:Key"},
		// Nomad's TestEvent_Stream_Err_InvalidQueryParam: one colon at most.
		{"topic=Evaluation:::*", "Invalid key value pair for topic: Evaluation:::*"},
		{many, "at most 64 topic parameters"},
	}
	for _, tt := range tests {
		resp, sc := openStream(t, ts.URL+"/v1/event/stream?"+tt.query, "")
		var body strings.Builder
		for sc.Scan() {
			body.WriteString(sc.Text())
		}
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body.String(), tt.want) {
			t.Errorf("%.40s: %d %q, want 400 with %q", tt.query, resp.StatusCode, body.String(), tt.want)
		}
	}
}

// The official client decodes the stream: a registered job arrives as
// JobRegistered with the job, its placement as PlanResult with the
// allocation; a key filter keeps other jobs out; heartbeats come on the
// (shortened) interval when nothing happens.
func TestEventStreamNomadClient(t *testing.T) {
	srv := devServer(t, false)
	ctx := context.Background()
	node := &structs.Node{
		ID: uuid.NewString(), SecretID: uuid.NewString(), Name: "n1", Datacenter: "dc1",
		Attributes: map[string]string{"kernel.name": "linux", "unique.hostname": "n1"},
		NodeResources: &structs.NodeResources{
			Cpu: structs.NodeCpuResources{CpuShares: 4000}, Memory: structs.NodeMemoryResources{MemoryMB: 8192},
			Disk: structs.NodeDiskResources{DiskMB: 100000},
		},
		Drivers: map[string]*structs.DriverInfo{"raw_exec": {Detected: true, Healthy: true}},
	}
	if _, err := srv.Nodes().Register(ctx, node); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(New(serverConfig(srv, Config{EventHeartbeat: 50 * time.Millisecond})).Handler())
	t.Cleanup(ts.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL, HttpClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stream, err := c.EventStream().Stream(sctx, map[nomadapi.Topic][]string{
		nomadapi.TopicJob: {"web"}, nomadapi.TopicAllocation: {"web"}, nomadapi.TopicNode: {"*"},
	}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"other", "web"} {
		job := nomadapi.NewSysbatchJob(id, id, "global", 50)
		job.Datacenters = []string{"dc1"}
		job.AddTaskGroup(nomadapi.NewTaskGroup("g", 1).AddTask(nomadapi.NewTask("t", "raw_exec").
			SetConfig("command", "/bin/true").Require(&nomadapi.Resources{CPU: new(100), MemoryMB: new(64)})))
		if _, _, err := c.Jobs().Register(job, nil); err != nil {
			t.Fatal(err)
		}
	}
	var sawNode, sawJob, sawPlan bool
	var last uint64
	for !(sawNode && sawJob && sawPlan) {
		var evs *nomadapi.Events
		select {
		case evs = <-stream:
		case <-sctx.Done():
			t.Fatalf("timed out: node=%v job=%v plan=%v", sawNode, sawJob, sawPlan)
		}
		if evs == nil || evs.Err != nil {
			t.Fatalf("stream ended: %+v", evs)
		}
		if evs.Index < last {
			t.Fatalf("index went back: %d after %d", evs.Index, last)
		}
		last = evs.Index
		for _, e := range evs.Events {
			if e.Index != evs.Index {
				t.Fatalf("event index %d in a batch at %d", e.Index, evs.Index)
			}
			switch e.Topic {
			case nomadapi.TopicNode:
				n, err := e.Node()
				if err != nil || n.ID != node.ID || e.Type != "NodeRegistration" {
					t.Fatalf("node event %s: %+v %v", e.Type, n, err)
				}
				sawNode = true
			case nomadapi.TopicJob:
				j, err := e.Job()
				if err != nil || j == nil || *j.ID != "web" {
					t.Fatalf("job event %s key %s: %v %v", e.Type, e.Key, j, err)
				}
				sawJob = sawJob || e.Type == "JobRegistered"
			case nomadapi.TopicAllocation:
				a, err := e.Allocation()
				if err != nil || a.JobID != "web" || a.NodeID != node.ID {
					t.Fatalf("alloc event %s: %+v %v", e.Type, a, err)
				}
				sawPlan = sawPlan || e.Type == "PlanResult"
			default:
				t.Fatalf("unexpected topic %s", e.Topic)
			}
		}
	}
}

// A stream ends once its token is deleted: it is resolved again every
// heartbeat interval.
func TestEventStreamTokenDeleted(t *testing.T) {
	w := newACLWorld(t)
	h := New(sameServer(w.h, Config{EventHeartbeat: 50 * time.Millisecond}))
	ts := httptest.NewServer(h.Handler())
	t.Cleanup(ts.Close)
	resp, sc := openStream(t, ts.URL+"/v1/event/stream?topic=Job&namespace=*", w.secrets[callerOtherNS])
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	untilHeartbeat(t, sc)
	st := w.h.srv.State()
	if err := st.DeleteACLTokens(st.LatestIndex()+1, []string{w.accessors[callerOtherNS]}); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"Error"`) {
			if !strings.Contains(sc.Text(), "ACL token no longer valid") {
				t.Fatalf("error line %q", sc.Text())
			}
			if sc.Scan() {
				t.Fatalf("stream went on after the error: %q", sc.Text())
			}
			return
		}
	}
	t.Fatalf("stream ended without an error line: %v", sc.Err())
}

// Every server serves its own event stream and metrics: neither is
// forwarded to the leader.
func TestEventStreamAndMetricsServedLocally(t *testing.T) {
	for _, target := range []string{"/v1/event/stream?topic=Job", "/v1/metrics", "/v1/metrics?format=prometheus"} {
		if leaderRead(httptest.NewRequest("GET", target, nil)) {
			t.Errorf("GET %s is forwarded to the leader; every server answers it", target)
		}
	}
	if !leaderRead(httptest.NewRequest("GET", "/v1/jobs", nil)) {
		t.Error("GET /v1/jobs is no longer a leader read: the check above proves nothing")
	}
}
