package drainer

// Scripted tests of the Drainer (testdata/*.txt, run with
// github.com/cockroachdb/datadriven; `go test -run TestDataDriven -rewrite`
// regenerates the expected output, which must then be read and checked).
//
// A script drives one draining node "n" of a real state store through
// Tick passes. The Raft entries a pass proposes are printed and applied
// to the store, as the FSM would. Times are offsets from t0
// (decide_test.go); the clock moves only by `now`.
//
// Commands:
//
//	drain [deadline=D] [ignore-system]
//	    start (or replace) n's drain; deadline is the force deadline at +D
//	    from t0 (none without it)
//	job id=J behavior=service|sysbatch|system
//	    register a job whose type declares that behaviour
//	alloc id=A job=J [status=S] [migrating]
//	    place an alloc of J on n (status: running, the default, complete,
//	    failed, lost)
//	status id=A status=S
//	    the client reports A in status S
//	now D
//	    the clock is at +D
//	fail on|off
//	    Raft refuses (or accepts again) every entry
//	tick
//	    one pass: the entries proposed (or the refusal), then applied
//	show
//	    n's drain and its allocs (status, desired transition)

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/drover-org/drover/core/structs"
)

var ddBehaviors = map[string]*structs.JobTypeBehavior{
	"service":  {},
	"sysbatch": {RunsToCompletion: true},
	"system":   {DrainLast: true},
}

func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := newHarness(t, &structs.Node{ID: "n"})
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			h.t = t
			out, err := ddRun(h, d)
			if err != nil {
				d.Fatalf(t, "%s: %v", d.Cmd, err)
			}
			return out
		})
	})
}

func ddRun(h *harness, d *datadriven.TestData) (string, error) {
	arg := func(key string) (string, bool) {
		for _, a := range d.CmdArgs {
			if a.Key == key {
				if len(a.Vals) == 0 {
					return "", true
				}
				return a.Vals[0], true
			}
		}
		return "", false
	}
	offset := func(s string) (time.Time, error) {
		dur, err := time.ParseDuration(s)
		return t0.Add(dur), err
	}
	switch d.Cmd {
	case "drain":
		ds := &structs.DrainStrategy{}
		if v, ok := arg("deadline"); ok {
			at, err := offset(v)
			if err != nil {
				return "", err
			}
			ds.ForceDeadline = at
			ds.Deadline = at.Sub(t0)
		}
		_, ds.IgnoreSystemJobs = arg("ignore-system")
		return "", h.store.UpdateNodeDrain(h.next(), "n", ds, false, h.now.Unix(), nil)
	case "job":
		id, _ := arg("id")
		b, _ := arg("behavior")
		tb, ok := ddBehaviors[b]
		if !ok {
			return "", fmt.Errorf("unknown behavior %q", b)
		}
		h.job(&structs.Job{ID: id, TypeBehavior: tb})
		return "", nil
	case "alloc":
		id, _ := arg("id")
		jobID, _ := arg("job")
		j, err := h.store.JobByID(nil, structs.DefaultNamespace, jobID)
		if err != nil || j == nil {
			return "", fmt.Errorf("job %q: %v", jobID, err)
		}
		status, ok := arg("status")
		if !ok {
			status = structs.AllocClientStatusRunning
		}
		_, migrating := arg("migrating")
		h.allocs(alloc(id, j, status, migrating))
		return "", nil
	case "status":
		id, _ := arg("id")
		status, _ := arg("status")
		a, err := h.store.AllocByID(nil, id)
		if err != nil || a == nil {
			return "", fmt.Errorf("alloc %q: %v", id, err)
		}
		a = a.Copy()
		a.ClientStatus = status
		return "", h.store.UpdateAllocsFromClient(h.next(), []*structs.Allocation{a})
	case "now":
		at, err := offset(d.CmdArgs[0].Key)
		if err != nil {
			return "", err
		}
		h.mu.Lock()
		h.now = at
		h.mu.Unlock()
		return "", nil
	case "fail":
		h.mu.Lock()
		defer h.mu.Unlock()
		h.fail = nil
		if d.CmdArgs[0].Key == "on" {
			h.fail = errors.New("raft down")
		}
		return "", nil
	case "tick":
		h.d.Tick()
		return ddApply(h)
	case "show":
		return ddShow(h)
	}
	return "", fmt.Errorf("unknown command")
}

// ddApply prints the entries of the last pass and applies them.
func ddApply(h *harness) (string, error) {
	var b strings.Builder
	h.mu.Lock()
	failing := h.fail != nil
	h.mu.Unlock()
	entries := h.taken()
	if len(entries) == 0 {
		if failing {
			return "refused by raft\n", nil
		}
		return "no entries\n", nil
	}
	for _, e := range entries {
		switch m := e.msg.(type) {
		case *structs.AllocUpdateDesiredTransitionRequest:
			var ids []string
			for id, dt := range m.Allocs {
				if dt.ShouldMigrate() {
					ids = append(ids, id)
				}
			}
			sort.Strings(ids)
			var evals []string
			for _, ev := range m.Evals {
				evals = append(evals, fmt.Sprintf("%s(%s on %s)", ev.JobID, ev.TriggeredBy, ev.NodeID))
			}
			sort.Strings(evals)
			fmt.Fprintf(&b, "migrate %s; evals %s\n", strings.Join(ids, " "), strings.Join(evals, " "))
			if err := h.store.UpdateAllocsDesiredTransitions(h.next(), m.Allocs, nil); err != nil {
				return "", err
			}
		case *structs.NodeUpdateDrainRequest:
			msg := ""
			if m.NodeEvent != nil {
				msg = m.NodeEvent.Message
			}
			fmt.Fprintf(&b, "drain of %s ended: %q\n", m.NodeID, msg)
			if err := h.store.UpdateNodeDrain(h.next(), m.NodeID, m.DrainStrategy, m.MarkEligible, m.UpdatedAt, m.NodeEvent); err != nil {
				return "", err
			}
		default:
			return "", fmt.Errorf("unexpected entry %T", e.msg)
		}
	}
	return b.String(), nil
}

func ddShow(h *harness) (string, error) {
	var b strings.Builder
	n, err := h.store.NodeByID(nil, "n")
	if err != nil {
		return "", err
	}
	switch ds := n.DrainStrategy; {
	case ds == nil:
		b.WriteString("node n: not draining\n")
	case ds.ForceDeadline.IsZero():
		fmt.Fprintf(&b, "node n: draining, no deadline, ignore-system=%v\n", ds.IgnoreSystemJobs)
	default:
		fmt.Fprintf(&b, "node n: draining, deadline +%s, ignore-system=%v\n", ds.ForceDeadline.Sub(t0), ds.IgnoreSystemJobs)
	}
	allocs, err := h.store.AllocsByNode(nil, "n")
	if err != nil {
		return "", err
	}
	sort.Slice(allocs, func(i, j int) bool { return allocs[i].ID < allocs[j].ID })
	for _, a := range allocs {
		fmt.Fprintf(&b, "  %s job=%s %s migrate=%v\n", a.ID, a.JobID, a.ClientStatus, a.DesiredTransition.ShouldMigrate())
	}
	return b.String(), nil
}
