package reconcile

import (
	"slices"
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

const jobIndex = 10

func testJob() *schedulerpb.Job {
	return &schedulerpb.Job{
		Id: "j", Name: "j", JobModifyIndex: jobIndex,
		TaskGroups: []*schedulerpb.TaskGroup{{Name: "g", Count: 1}},
	}
}

// nodeInput builds the reconciler's view of node n1 in one of the states a
// node can be in.
func nodeInput(state string, allocs []*schedulerpb.Allocation) (ready map[string]*schedulerpb.Node, notReady map[string]struct{}, tainted map[string]*schedulerpb.Node) {
	n := &schedulerpb.Node{Id: "n1", Status: NodeReady, Eligible: true}
	ready = map[string]*schedulerpb.Node{}
	notReady = map[string]struct{}{}
	nodes := map[string]*schedulerpb.Node{"n1": n}
	switch state {
	case "ready":
		ready["n1"] = n
	case "ineligible":
		n.Eligible = false
	case "initializing":
		n.Status = NodeInitializing
	case "draining":
		n.Draining = true
	case "down":
		n.Status = NodeDown
	case "disconnected":
		n.Status = NodeDisconnected
	case "missing":
		delete(nodes, "n1")
	case "other-dc":
		// Ready, but not a candidate of this job: neither map holds it.
	default:
		panic(state)
	}
	if state != "ready" && state != "other-dc" && state != "missing" {
		notReady["n1"] = struct{}{}
	}
	return ready, notReady, Tainted(allocs, nodes)
}

// bucketOf names the bucket holding the tuple for alloc name on n1.
func bucketOf(res *Result, name string) []string {
	var out []string
	for bucket, ts := range map[string][]AllocTuple{
		"place": res.Place, "update": res.Update, "migrate": res.Migrate, "stop": res.Stop,
		"ignore": res.Ignore, "lost": res.Lost, "disconnecting": res.Disconnecting, "reconnecting": res.Reconnecting,
	} {
		for _, t := range ts {
			if t.Name == name && t.NodeID == "n1" {
				out = append(out, bucket)
			}
		}
	}
	slices.Sort(out)
	return out
}

func liveAlloc() *schedulerpb.Allocation {
	return &schedulerpb.Allocation{
		Id: "a1", Name: "j.g[0]", NodeId: "n1", TaskGroup: "g", JobModifyIndex: jobIndex,
		DesiredStatus: DesiredRun, ClientStatus: ClientRunning,
	}
}

// TestPassA covers every row of the Pass A table (§2.5), in table order.
func TestPassA(t *testing.T) {
	yes := func(*schedulerpb.Allocation) bool { return true }
	cases := []struct {
		row      string
		node     string
		sysbatch bool
		alloc    func(a *schedulerpb.Allocation)
		job      func(j *schedulerpb.Job)
		reconn   bool // NeedsReconnect hook says yes
		expired  bool // ReconnectExpired hook says yes
		want     string
	}{
		{row: "1 name not required (count lowered)", node: "ready", job: func(j *schedulerpb.Job) { j.TaskGroups[0].Count = 0 }, want: "stop"},
		{row: "1 job stopped", node: "ready", job: func(j *schedulerpb.Job) { j.Stop = true }, want: "stop"},
		{row: "1 misnamed alloc", node: "ready", alloc: func(a *schedulerpb.Allocation) { a.Name = "j.g[7]" }, want: "stop"},
		{row: "1 group removed", node: "ready", job: func(j *schedulerpb.Job) { j.TaskGroups[0].Name = "h" }, want: "stop"},
		{row: "2 sysbatch migrate on ready node", node: "ready", sysbatch: true, alloc: func(a *schedulerpb.Allocation) { a.Migrate = true }, want: "migrate"},
		{row: "2 migrate beats down node", node: "down", alloc: func(a *schedulerpb.Allocation) { a.Migrate = true }, want: "migrate"},
		{row: "3 reconnect window expired", node: "ready", reconn: true, expired: true,
			alloc: func(a *schedulerpb.Allocation) { a.ClientStatus = ClientUnknown }, want: "lost"},
		{row: "4 unknown and desired run", node: "disconnected",
			alloc: func(a *schedulerpb.Allocation) { a.ClientStatus = ClientUnknown }, want: "ignore"},
		{row: "4 unknown ignored even when job changed", node: "ready",
			alloc: func(a *schedulerpb.Allocation) { a.ClientStatus = ClientUnknown; a.JobModifyIndex = 3 }, want: "ignore"},
		{row: "5 reconnecting on healthy node", node: "ready", reconn: true, want: "reconnecting"},
		{row: "6a sysbatch success on down node", node: "down", sysbatch: true,
			alloc: func(a *schedulerpb.Allocation) { a.RanSuccessfully = true }, want: "ignore"},
		{row: "6a system success on down node is lost", node: "down",
			alloc: func(a *schedulerpb.Allocation) { a.RanSuccessfully = true }, want: "lost"},
		{row: "6b disconnected and running", node: "disconnected", want: "disconnecting"},
		{row: "6b disconnected but pending", node: "disconnected",
			alloc: func(a *schedulerpb.Allocation) { a.ClientStatus = ClientPending }, want: "ignore"},
		{row: "6c down node", node: "down", want: "lost"},
		{row: "6c missing node", node: "missing", sysbatch: true, want: "lost"},
		{row: "6d draining node", node: "draining", want: "ignore"},
		{row: "6d draining node after job change", node: "draining",
			alloc: func(a *schedulerpb.Allocation) { a.JobModifyIndex = 3 }, want: "ignore"},
		{row: "7 ineligible, job unchanged", node: "ineligible", want: "ignore"},
		{row: "7 ineligible, job changed", node: "ineligible",
			alloc: func(a *schedulerpb.Allocation) { a.JobModifyIndex = 3 }, want: "stop"},
		{row: "7 initializing, job unchanged", node: "initializing", want: "ignore"},
		{row: "8 node left the job's datacenters", node: "other-dc", want: "stop"},
		{row: "9 job changed", node: "ready", alloc: func(a *schedulerpb.Allocation) { a.JobModifyIndex = 3 }, want: "update"},
		{row: "10 nothing to do", node: "ready", want: "ignore"},
		{row: "10 sysbatch nothing to do", node: "ready", sysbatch: true, want: "ignore"},
	}
	for _, c := range cases {
		t.Run(c.row, func(t *testing.T) {
			job, a := testJob(), liveAlloc()
			if c.job != nil {
				c.job(job)
			}
			if c.alloc != nil {
				c.alloc(a)
			}
			ready, notReady, tainted := nodeInput(c.node, []*schedulerpb.Allocation{a})
			in := &Input{Job: job, Sysbatch: c.sysbatch, Ready: ready, NotReady: notReady, Tainted: tainted,
				Live: []*schedulerpb.Allocation{a}, Terminal: TerminalIndex{}}
			if c.reconn {
				in.NeedsReconnect = yes
			}
			if c.expired {
				in.ReconnectExpired = yes
			}
			res := Nodes(in)
			if got := bucketOf(res, a.GetName()); !slices.Equal(got, []string{c.want}) {
				t.Fatalf("buckets %v, want [%s]", got, c.want)
			}
			// A live alloc's name is never placed again on its node.
			for _, p := range res.Place {
				if p.Name == a.GetName() {
					t.Fatalf("placed %v next to its live alloc", p)
				}
			}
		})
	}
}

// TestPassB covers every rule of Pass B (§2.5).
func TestPassB(t *testing.T) {
	terminal := func(status string, index uint64) *schedulerpb.Allocation {
		return &schedulerpb.Allocation{Id: "t-" + status, Name: "j.g[0]", NodeId: "n1", TaskGroup: "g",
			JobModifyIndex: index, DesiredStatus: DesiredRun, ClientStatus: status, CreateIndex: index}
	}
	cases := []struct {
		name      string
		node      string
		sysbatch  bool
		allocs    []*schedulerpb.Allocation
		want      string // bucket of j.g[0] on n1, "" for none
		wantAlloc string // ID of the tuple's alloc
	}{
		{name: "fresh node places a stub", node: "ready", want: "place"},
		{name: "sysbatch complete, job unchanged: done", node: "ready", sysbatch: true,
			allocs: []*schedulerpb.Allocation{terminal(ClientComplete, jobIndex)}, want: "ignore", wantAlloc: "t-complete"},
		{name: "sysbatch failed, job unchanged: done", node: "ready", sysbatch: true,
			allocs: []*schedulerpb.Allocation{terminal(ClientFailed, jobIndex)}, want: "ignore", wantAlloc: "t-failed"},
		{name: "sysbatch complete, job changed: update", node: "ready", sysbatch: true,
			allocs: []*schedulerpb.Allocation{terminal(ClientComplete, 3)}, want: "update", wantAlloc: "t-complete"},
		{name: "system failed alloc is replaced, chained", node: "ready",
			allocs: []*schedulerpb.Allocation{terminal(ClientFailed, jobIndex)}, want: "place", wantAlloc: "t-failed"},
		{name: "system picks the newest terminal alloc", node: "ready",
			allocs: []*schedulerpb.Allocation{terminal(ClientFailed, 9), terminal(ClientComplete, jobIndex)},
			want:   "place", wantAlloc: "t-complete"},
		{name: "tainted node gets nothing", node: "draining", want: ""},
		{name: "not-ready node gets nothing", node: "ineligible", want: ""},
		{name: "node outside the job's datacenters gets nothing", node: "other-dc", want: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ready, notReady, tainted := nodeInput(c.node, c.allocs)
			live, term := Split(c.allocs)
			res := Nodes(&Input{Job: testJob(), Sysbatch: c.sysbatch, Ready: ready, NotReady: notReady,
				Tainted: tainted, Live: live, Terminal: term})
			got := bucketOf(res, "j.g[0]")
			if c.want == "" {
				if len(got) != 0 {
					t.Fatalf("buckets %v, want none", got)
				}
				return
			}
			if !slices.Equal(got, []string{c.want}) {
				t.Fatalf("buckets %v, want [%s]", got, c.want)
			}
			all := slices.Concat(res.Place, res.Update, res.Ignore)
			if id := all[0].Alloc.GetId(); id != c.wantAlloc {
				t.Fatalf("tuple alloc %q, want %q", id, c.wantAlloc)
			}
			if all[0].TaskGroup.GetName() != "g" {
				t.Fatalf("tuple group %v", all[0].TaskGroup)
			}
		})
	}
}

// A live alloc with a wrong name is stopped and the right name placed; a
// second group index is placed next to a live first one; nodes come out in
// ID order.
func TestNodesMixed(t *testing.T) {
	job := testJob()
	job.TaskGroups[0].Count = 2
	nodes := map[string]*schedulerpb.Node{}
	for _, id := range []string{"n3", "n1", "n2"} {
		nodes[id] = &schedulerpb.Node{Id: id, Status: NodeReady, Eligible: true}
	}
	allocs := []*schedulerpb.Allocation{
		{Id: "x", Name: "j.g[9]", NodeId: "n2", TaskGroup: "g", JobModifyIndex: jobIndex, DesiredStatus: DesiredRun, ClientStatus: ClientRunning},
		{Id: "y", Name: "j.g[0]", NodeId: "n3", TaskGroup: "g", JobModifyIndex: jobIndex, DesiredStatus: DesiredRun, ClientStatus: ClientRunning},
	}
	live, term := Split(allocs)
	res := Nodes(&Input{Job: job, Ready: nodes, NotReady: map[string]struct{}{}, Tainted: Tainted(allocs, nodes), Live: live, Terminal: term})
	var placed []string
	for _, p := range res.Place {
		placed = append(placed, p.NodeID+"/"+p.Name)
	}
	want := []string{"n1/j.g[0]", "n1/j.g[1]", "n2/j.g[0]", "n2/j.g[1]", "n3/j.g[1]"}
	if !slices.Equal(placed, want) {
		t.Errorf("placed %v, want %v", placed, want)
	}
	if len(res.Stop) != 1 || res.Stop[0].Alloc.GetId() != "x" {
		t.Errorf("stop %v, want x", res.Stop)
	}
	if len(res.Ignore) != 1 || res.Ignore[0].Alloc.GetId() != "y" {
		t.Errorf("ignore %v, want y", res.Ignore)
	}
}
