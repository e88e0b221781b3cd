package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/test/internal/harness"
)

// nomadClient is the official nomad/api client pointed at the agent; it
// shares the agent's HTTP client so that the cleanup closes its
// connections.
func (a *testAgent) nomadClient() *nomadapi.Client {
	a.t.Helper()
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: "http://" + a.Addr, HttpClient: a.HTTP})
	if err != nil {
		a.t.Fatalf("nomad/api client: %v", err)
	}
	return c
}

// allocIndex is the index in an alloc name "<job>.<group>[<index>]".
func allocIndex(t *testing.T, name string) int {
	t.Helper()
	var idx int
	open := strings.LastIndexByte(name, '[')
	if open < 0 || !strings.HasSuffix(name, "]") {
		t.Fatalf("alloc name %q has no index", name)
	}
	if _, err := fmt.Sscanf(name[open:], "[%d]", &idx); err != nil {
		t.Fatalf("alloc name %q: %v", name, err)
	}
	return idx
}

// indexes returns the sorted name indexes of the allocs.
func indexes(t *testing.T, allocs []serviceAlloc) []int {
	t.Helper()
	var out []int
	for _, al := range allocs {
		out = append(out, allocIndex(t, al.Name))
	}
	sort.Ints(out)
	return out
}

// wantedIndexes is the sorted name indexes of the job's allocs the
// scheduler still wants.
func (a *testAgent) wantedIndexes(jobID string) []int {
	a.t.Helper()
	var wanted []serviceAlloc
	for _, al := range a.serviceAllocs(jobID) {
		if al.DesiredStatus == "run" {
			wanted = append(wanted, al)
		}
	}
	return indexes(a.t, wanted)
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// A user scales a running service job up and down with `drover job scale
// <job> <group> <n>` and with the nomad/api client's Jobs().Scale: each
// step runs exactly the new count, a scale down stops the allocs with the
// highest name indexes and keeps the others running where they were, and
// Jobs().ScaleStatus reports the group's Desired, Placed and Running and
// one event per scaling.
func TestServiceScaleUpAndDown(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const id = "e2e-service-scale"
	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, "svc.hcl", fmt.Sprintf(serviceJob, id, 2, "300")))
	a.waitServiceRunning(id, 2, 0)
	nc := a.nomadClient()

	// checkStatus asserts the scale status through nomad/api.
	checkStatus := func(step string, count, events int) {
		t.Helper()
		st, _, err := nc.Jobs().ScaleStatus(id, nil)
		if err != nil {
			t.Fatalf("%s: ScaleStatus: %v", step, err)
		}
		g, ok := st.TaskGroups["g"]
		if st.JobID != id || !ok {
			t.Fatalf("%s: ScaleStatus = %+v, want job %s with group g", step, st, id)
		}
		if g.Desired != count || g.Placed != count || g.Running != count {
			t.Errorf("%s: group g desired/placed/running = %d/%d/%d, want %d each", step, g.Desired, g.Placed, g.Running, count)
		}
		if len(g.Events) != events {
			t.Errorf("%s: %d scaling events, want %d: %+v", step, len(g.Events), events, g.Events)
		} else if ev := g.Events[0]; ev.Count == nil || *ev.Count != int64(count) {
			t.Errorf("%s: latest scaling event %+v, want count %d first", step, ev, count)
		}
	}

	steps := []struct {
		name  string
		count int
		scale func(n int) // scales group g to n
	}{
		{"cli up to 5", 5, func(n int) {
			res := a.MustCLI("job", "scale", id, "g", fmt.Sprint(n))
			if !strings.Contains(res.Stdout, `finished with status "complete"`) {
				t.Errorf("job scale did not monitor its eval to completion:\n%s", res)
			}
		}},
		{"cli down to 3", 3, func(n int) { a.MustCLI("job", "scale", id, "g", fmt.Sprint(n)) }},
		{"api up to 4", 4, func(n int) {
			resp, _, err := nc.Jobs().Scale(id, "g", &n, "scaled by the test", false, nil, nil)
			if err != nil || resp.EvalID == "" {
				t.Fatalf("Jobs().Scale(%d): %+v %v; want an eval", n, resp, err)
			}
		}},
		{"api down to 1", 1, func(n int) {
			if _, _, err := nc.Jobs().Scale(id, "g", &n, "", false, nil, nil); err != nil {
				t.Fatalf("Jobs().Scale(%d): %v", n, err)
			}
		}},
	}
	prev := a.waitServiceRunning(id, 2, 0)
	for i, s := range steps {
		s.scale(s.count)
		running := a.waitServiceRunning(id, s.count, uint64(i+1))
		if got := indexes(t, running); fmt.Sprint(got) != fmt.Sprint(seq(s.count)) {
			t.Errorf("%s: running indexes %v, want %v", s.name, got, seq(s.count))
		}
		if got := a.wantedIndexes(id); fmt.Sprint(got) != fmt.Sprint(seq(s.count)) {
			t.Errorf("%s: wanted indexes %v, want %v", s.name, got, seq(s.count))
		}
		// A count change is an in-place update: the allocs that were
		// running and are still wanted are the same allocs; those of the
		// highest indexes, past the new count, are the ones stopped.
		now := map[string]string{}
		for _, al := range running {
			now[al.Name] = al.ID
		}
		desired := map[string]string{}
		for _, al := range a.serviceAllocs(id) {
			desired[al.ID] = al.DesiredStatus
		}
		for _, al := range prev {
			if allocIndex(t, al.Name) >= s.count {
				if desired[al.ID] != "stop" {
					t.Errorf("%s: %s (%s) is %q; a scale down stops the highest indexes", s.name, al.Name, al.ID, desired[al.ID])
				}
				continue
			}
			if now[al.Name] != al.ID {
				t.Errorf("%s: %s was %s, now %q; want it kept", s.name, al.Name, al.ID, now[al.Name])
			}
		}
		checkStatus(s.name, s.count, i+1)
		prev = running
	}

	st, _, err := nc.Jobs().ScaleStatus(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	evs := st.TaskGroups["g"].Events
	if len(evs) == len(steps) {
		// Newest first, each naming the count it changed from.
		wantPrev := []int64{4, 3, 5, 2}
		for i, ev := range evs {
			if ev.PreviousCount != wantPrev[i] {
				t.Errorf("event %d: previous count %d, want %d", i, ev.PreviousCount, wantPrev[i])
			}
		}
		if evs[1].Message != "scaled by the test" {
			t.Errorf("the api scale's event message %q", evs[1].Message)
		}
	}
	a.MustCLI("job", "stop", "-detach", id)
}
