package reconcile

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

func versionedJob() *schedulerpb.Job {
	return &schedulerpb.Job{
		Id: "j", Name: "j", JobModifyIndex: jobIndex, Meta: map[string]string{"owner": "a"},
		TaskGroups: []*schedulerpb.TaskGroup{{
			Name: "g", Count: 1, EphemeralDiskMb: 300, Meta: map[string]string{"tier": "1"},
			Tasks: []*schedulerpb.Task{{
				Name: "t", Driver: "exec", User: "nobody", ConfigJson: []byte(`{"command":"true"}`),
				Env: map[string]string{"A": "1"}, Meta: map[string]string{"m": "x"},
				Resources:           &schedulerpb.Resources{Cpu: 100, MemoryMb: 64},
				DispatchPayloadFile: "in.json",
			}},
		}},
	}
}

// TestDestructive covers each field of the in-place vs destructive rule
// (§2.7).
func TestDestructive(t *testing.T) {
	cases := []struct {
		name        string
		change      func(j *schedulerpb.Job)
		destructive bool
	}{
		{"unchanged", func(*schedulerpb.Job) {}, false},
		{"count only", func(j *schedulerpb.Job) { j.TaskGroups[0].Count = 3 }, false},
		{"constraint only", func(j *schedulerpb.Job) {
			j.Constraints = []*schedulerpb.Constraint{{LTarget: "a", Operand: "=", RTarget: "b"}}
		}, false},
		{"priority only", func(j *schedulerpb.Job) { j.Priority = 90 }, false},
		{"job spread replaced", func(j *schedulerpb.Job) {
			j.Spreads = []*schedulerpb.Spread{{Attribute: "${node.datacenter}", Weight: 50}}
		}, true},
		{"job spread percent", func(j *schedulerpb.Job) { j.Spreads[0].Targets[0].Percent = 20 }, true},
		{"group spread removed", func(j *schedulerpb.Job) { j.TaskGroups[0].Spreads = nil }, true},
		{"job affinity weight", func(j *schedulerpb.Job) { j.Affinities[0].Weight = -50 }, true},
		{"group affinity added", func(j *schedulerpb.Job) {
			j.TaskGroups[0].Affinities = []*schedulerpb.Affinity{{LTarget: "${meta.rack}", Operand: "=", RTarget: "r1", Weight: 10}}
		}, true},
		{"task affinity", func(j *schedulerpb.Job) { j.TaskGroups[0].Tasks[0].Affinities[0].RTarget = "r3" }, true},
		{"task added", func(j *schedulerpb.Job) {
			j.TaskGroups[0].Tasks = append(j.TaskGroups[0].Tasks, &schedulerpb.Task{Name: "u", Driver: "exec"})
		}, true},
		{"task renamed", func(j *schedulerpb.Job) { j.TaskGroups[0].Tasks[0].Name = "t2" }, true},
		{"driver", func(j *schedulerpb.Job) { j.TaskGroups[0].Tasks[0].Driver = "docker" }, true},
		{"user", func(j *schedulerpb.Job) { j.TaskGroups[0].Tasks[0].User = "root" }, true},
		{"config bytes", func(j *schedulerpb.Job) { j.TaskGroups[0].Tasks[0].ConfigJson = []byte(`{"command":"false"}`) }, true},
		{"env", func(j *schedulerpb.Job) { j.TaskGroups[0].Tasks[0].Env["A"] = "2" }, true},
		{"job meta", func(j *schedulerpb.Job) { j.Meta["owner"] = "b" }, true},
		{"group meta", func(j *schedulerpb.Job) { j.TaskGroups[0].Meta["new"] = "v" }, true},
		{"task meta", func(j *schedulerpb.Job) { delete(j.TaskGroups[0].Tasks[0].Meta, "m") }, true},
		{"meta moved between levels is not a change", func(j *schedulerpb.Job) {
			delete(j.TaskGroups[0].Tasks[0].Meta, "m")
			j.TaskGroups[0].Meta["m"] = "x"
		}, false},
		{"cpu", func(j *schedulerpb.Job) { j.TaskGroups[0].Tasks[0].Resources.Cpu = 200 }, true},
		{"memory", func(j *schedulerpb.Job) { j.TaskGroups[0].Tasks[0].Resources.MemoryMb = 128 }, true},
		{"memory max", func(j *schedulerpb.Job) { j.TaskGroups[0].Tasks[0].Resources.MemoryMaxMb = 128 }, true},
		{"cores", func(j *schedulerpb.Job) { j.TaskGroups[0].Tasks[0].Resources.Cores = 1 }, true},
		{"ephemeral disk", func(j *schedulerpb.Job) { j.TaskGroups[0].EphemeralDiskMb = 500 }, true},
		{"dispatch payload file", func(j *schedulerpb.Job) { j.TaskGroups[0].Tasks[0].DispatchPayloadFile = "x" }, true},
		{"lifecycle", func(j *schedulerpb.Job) { j.TaskGroups[0].Tasks[0].LifecycleHook = "prestart" }, true},
		{"group gone", func(j *schedulerpb.Job) { j.TaskGroups[0].Name = "h" }, true},
		{"volume added", func(j *schedulerpb.Job) {
			j.TaskGroups[0].Volumes = []*schedulerpb.VolumeRequest{{Name: "d", Type: "csi", Source: "v"}}
		}, true},
	}
	for _, c := range cases {
		old := versionedJob()
		old.Spreads = []*schedulerpb.Spread{{Attribute: "${node.datacenter}", Weight: 100,
			Targets: []*schedulerpb.SpreadTarget{{Value: "dc1", Percent: 75}, {Value: "dc2", Percent: 25}}}}
		old.Affinities = []*schedulerpb.Affinity{{LTarget: "${node.class}", Operand: "=", RTarget: "big", Weight: 50}}
		old.TaskGroups[0].Spreads = []*schedulerpb.Spread{{Attribute: "${meta.rack}", Weight: 20}}
		old.TaskGroups[0].Tasks[0].Affinities = []*schedulerpb.Affinity{{LTarget: "${meta.rack}", Operand: "=", RTarget: "r2", Weight: 10}}
		next := proto.CloneOf(old)
		next.JobModifyIndex = jobIndex + 1
		c.change(next)
		if got := Destructive(old, next, "g"); got != c.destructive {
			t.Errorf("%s: destructive = %v, want %v", c.name, got, c.destructive)
		}
	}
	if !Destructive(nil, versionedJob(), "g") {
		t.Error("unknown old version must be destructive")
	}
}

func TestVersionsJobOf(t *testing.T) {
	cur := versionedJob()
	old := proto.CloneOf(cur)
	old.JobModifyIndex = 4
	v := NewVersions(cur, []*schedulerpb.Job{old})
	cases := []struct {
		index uint64
		want  *schedulerpb.Job
	}{{jobIndex, cur}, {4, old}, {5, nil}}
	for _, c := range cases {
		if got := v.JobOf(&schedulerpb.Allocation{JobModifyIndex: c.index}); got != c.want {
			t.Errorf("JobOf(%d) = %v", c.index, got)
		}
	}
}

func TestEvictAndPlace(t *testing.T) {
	tuples := func(groups ...*schedulerpb.TaskGroup) []AllocTuple {
		var out []AllocTuple
		for i, g := range groups {
			out = append(out, AllocTuple{Name: string(rune('a' + i)), TaskGroup: g})
		}
		return out
	}
	unset := &schedulerpb.TaskGroup{Name: "u"}
	two := &schedulerpb.TaskGroup{Name: "two", UpdateMaxParallel: 2}
	cases := []struct {
		name        string
		jobParallel int32
		in          []AllocTuple
		want        []string
		limited     bool
	}{
		{"unlimited", 0, tuples(unset, unset, unset), []string{"a", "b", "c"}, false},
		{"job limit", 1, tuples(unset, unset, unset), []string{"a"}, true},
		{"group limit beats job limit", 1, tuples(two, two, two), []string{"a", "b"}, true},
		{"limits are per group", 1, tuples(two, unset, two, unset), []string{"a", "b", "c"}, true},
		{"under the limit", 5, tuples(unset, unset), []string{"a", "b"}, false},
	}
	for _, c := range cases {
		job := &schedulerpb.Job{UpdateMaxParallel: c.jobParallel}
		now, limited := EvictAndPlace(job, c.in)
		var got []string
		for _, t := range now {
			got = append(got, t.Name)
		}
		if !slices.Equal(got, c.want) || limited != c.limited {
			t.Errorf("%s: got %v limited=%v, want %v limited=%v", c.name, got, limited, c.want, c.limited)
		}
	}
}

func TestTaintedLostAndSplit(t *testing.T) {
	nodes := map[string]*schedulerpb.Node{
		"ready":      {Id: "ready", Status: NodeReady, Eligible: true},
		"ineligible": {Id: "ineligible", Status: NodeReady},
		"drain":      {Id: "drain", Status: NodeReady, Eligible: true, Draining: true},
		"down":       {Id: "down", Status: NodeDown},
		"disc":       {Id: "disc", Status: NodeDisconnected},
	}
	mk := func(id, node, desired, client string, create uint64) *schedulerpb.Allocation {
		return &schedulerpb.Allocation{Id: id, Name: "j.g[0]", NodeId: node, DesiredStatus: desired, ClientStatus: client, CreateIndex: create}
	}
	allocs := []*schedulerpb.Allocation{
		mk("a", "ready", DesiredRun, ClientRunning, 1),
		mk("b", "ineligible", DesiredRun, ClientRunning, 1),
		mk("c", "drain", DesiredRun, ClientRunning, 1),
		mk("d", "down", DesiredStop, ClientRunning, 1),  // server-stopped, client running: lost
		mk("e", "down", DesiredStop, ClientComplete, 2), // already finished: not lost
		mk("f", "gone", DesiredEvict, ClientPending, 1), // missing node: lost
		mk("g", "disc", DesiredStop, ClientRunning, 1),  // disconnected is not down
		mk("h", "ready", DesiredStop, ClientRunning, 1), // healthy node: its client will stop it
		mk("i", "ready", DesiredRun, ClientComplete, 5),
	}
	tainted := Tainted(allocs, nodes)
	var ids []string
	for id := range tainted {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if want := []string{"disc", "down", "drain", "gone"}; !slices.Equal(ids, want) {
		t.Errorf("tainted %v, want %v", ids, want)
	}
	if tainted["gone"] != nil {
		t.Error("missing node must map to nil")
	}
	var lost []string
	for _, a := range LostStops(allocs, tainted) {
		lost = append(lost, a.GetId())
	}
	if want := []string{"d", "f"}; !slices.Equal(lost, want) {
		t.Errorf("lost %v, want %v", lost, want)
	}
	live, term := Split(allocs)
	var liveIDs []string
	for _, a := range live {
		liveIDs = append(liveIDs, a.GetId())
	}
	if want := []string{"c", "b", "a"}; !slices.Equal(liveIDs, want) { // by node ID
		t.Errorf("live %v, want %v", liveIDs, want)
	}
	if got := term.Get("ready", "j.g[0]").GetId(); got != "i" {
		t.Errorf("newest terminal on ready = %q, want i", got)
	}
	if got := term.Get("down", "j.g[0]").GetId(); got != "e" {
		t.Errorf("newest terminal on down = %q, want e", got)
	}
}
