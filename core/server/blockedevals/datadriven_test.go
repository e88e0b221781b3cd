package blockedevals

// Scripted tests of the blocked-evals tracker (testdata/*.txt, run with
// github.com/cockroachdb/datadriven; `go test -run TestDataDriven -rewrite`
// regenerates the expected output, which must then be read and checked).
//
// Each script starts with an enabled tracker whose Enqueuer records what it
// is given. Every command that may release evals prints what reached the
// Enqueuer ("released: ..." in the order given, each with the status it
// carries), or "released: none".
//
// Commands:
//
//	block id=ID job=JOB [ns=NS] [index=N] [snapshot=N] [node=NODE] [escaped]
//	      [eligible=(C,...)] [ineligible=(C,...)] [token=T]
//	    Block an eval (status blocked, CreateIndex index, SnapshotIndex
//	    snapshot, default index); node pins it, escaped sets
//	    EscapedComputedClass, eligible/ineligible fill ClassEligibility;
//	    with token it is a Reblock
//	unblock class=C index=N
//	unblock-node node=NODE index=N
//	unblock-all index=N
//	unblock-many prefix=P count=N index=N
//	    Unblock classes P0..P(N-1) at indexes index, index+1, ...
//	untrack job=JOB [ns=NS]
//	duplicates [max=N]
//	    drain superseded evals
//	enable | disable
//	state
//	    every tracked eval (sorted by ID) with its kind, the unblock
//	    history and the duplicates not yet drained
//	stats
//	    Stats()

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/drover-org/drover/core/structs"
)

func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		r := &recorder{}
		b := New(r, nil)
		b.SetEnabled(true)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return ddRun(t, d, b, r)
		})
	})
}

func ddRun(t *testing.T, d *datadriven.TestData, b *BlockedEvals, r *recorder) string {
	var index uint64
	switch d.Cmd {
	case "block":
		ev := ddEval(t, d)
		var token string
		if d.MaybeScanArgs(t, "token", &token) {
			b.Reblock(ev, token)
		} else {
			b.Block(ev)
		}
		return released(r) + ddTracked(b, ev.ID)
	case "unblock":
		var class string
		d.ScanArgs(t, "class", &class)
		d.ScanArgs(t, "index", &index)
		b.Unblock(class, index)
		return released(r)
	case "unblock-node":
		var node string
		d.ScanArgs(t, "node", &node)
		d.ScanArgs(t, "index", &index)
		b.UnblockNode(node, index)
		return released(r)
	case "unblock-all":
		d.ScanArgs(t, "index", &index)
		b.UnblockAll(index)
		return released(r)
	case "unblock-many":
		var prefix string
		var count int
		d.ScanArgs(t, "prefix", &prefix)
		d.ScanArgs(t, "count", &count)
		d.ScanArgs(t, "index", &index)
		for i := range count {
			b.Unblock(fmt.Sprintf("%s%d", prefix, i), index+uint64(i))
		}
		return released(r)
	case "untrack":
		var job string
		ns := structs.DefaultNamespace
		d.ScanArgs(t, "job", &job)
		d.MaybeScanArgs(t, "ns", &ns)
		b.Untrack(ns, job)
		return released(r)
	case "duplicates":
		var max int
		d.MaybeScanArgs(t, "max", &max)
		dups := b.Duplicates(max)
		if len(dups) == 0 {
			return "none\n"
		}
		return strings.Join(ids(dups), " ") + "\n"
	case "enable":
		b.SetEnabled(true)
		return "ok\n"
	case "disable":
		b.SetEnabled(false)
		return "ok\n"
	case "state":
		return ddState(b)
	case "stats":
		s := b.Stats()
		out := fmt.Sprintf("blocked=%d escaped=%d captured=%d pinned=%d duplicates=%d\n",
			s.TotalBlocked, s.TotalEscaped, s.TotalCaptured, s.TotalPinned, s.TotalDuplicates)
		nodes := make([]string, 0, len(s.ByNode))
		for n := range s.ByNode {
			nodes = append(nodes, n)
		}
		sort.Strings(nodes)
		for _, n := range nodes {
			out += fmt.Sprintf("  node %s: %d\n", n, s.ByNode[n])
		}
		return out
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func ddEval(t *testing.T, d *datadriven.TestData) *structs.Evaluation {
	ev := &structs.Evaluation{Namespace: structs.DefaultNamespace, Type: "service", Priority: 50,
		Status: structs.EvalStatusBlocked, TriggeredBy: structs.EvalTriggerQueuedAllocs}
	d.ScanArgs(t, "id", &ev.ID)
	d.ScanArgs(t, "job", &ev.JobID)
	d.MaybeScanArgs(t, "ns", &ev.Namespace)
	d.MaybeScanArgs(t, "index", &ev.CreateIndex)
	ev.SnapshotIndex = ev.CreateIndex
	d.MaybeScanArgs(t, "snapshot", &ev.SnapshotIndex)
	d.MaybeScanArgs(t, "node", &ev.NodeID)
	if d.HasArg("node") {
		ev.Type = "system"
	}
	ev.EscapedComputedClass = d.HasArg("escaped")
	for key, elig := range map[string]bool{"eligible": true, "ineligible": false} {
		var classes []string
		if d.MaybeScanArgs(t, key, &classes) {
			if ev.ClassEligibility == nil {
				ev.ClassEligibility = map[string]bool{}
			}
			for _, c := range classes {
				ev.ClassEligibility[c] = elig
			}
		}
	}
	return ev
}

// released drains what the tracker gave the Enqueuer.
func released(r *recorder) string {
	r.mu.Lock()
	evs := r.evs
	r.evs = nil
	r.mu.Unlock()
	if len(evs) == 0 {
		return "released: none\n"
	}
	parts := make([]string, 0, len(evs))
	for _, ev := range evs {
		parts = append(parts, fmt.Sprintf("%s(%s)", ev.ID, ev.Status))
	}
	return "released: " + strings.Join(parts, " ") + "\n"
}

// kindOf names how a tracked eval can be released.
func kindOf(ev *structs.Evaluation) string {
	switch {
	case ev.NodeID != "":
		return "pinned node=" + ev.NodeID
	case ev.EscapedComputedClass:
		return "escaped"
	}
	return "captured"
}

func ddDescribe(tr *tracked) string {
	ev := tr.eval
	s := fmt.Sprintf("%s %s job=%s/%s index=%d snapshot=%d", ev.ID, kindOf(ev), ev.Namespace, ev.JobID,
		ev.CreateIndex, ev.SnapshotIndex)
	if len(ev.ClassEligibility) > 0 {
		classes := make([]string, 0, len(ev.ClassEligibility))
		for c, ok := range ev.ClassEligibility {
			if !ok {
				c = "!" + c
			}
			classes = append(classes, c)
		}
		sort.Strings(classes)
		s += " classes=" + strings.Join(classes, ",")
	}
	if tr.token != "" {
		s += " token=" + tr.token
	}
	return s
}

func ddTracked(b *BlockedEvals, id string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	tr, ok := b.byID[id]
	if !ok {
		return id + " not tracked\n"
	}
	return ddDescribe(tr) + "\n"
}

func ddHistory(name string, h indexHistory) string {
	keys := make([]string, 0, len(h.latest))
	for k := range h.latest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var list string
	if len(keys) > 8 {
		list = fmt.Sprintf("%d keys", len(keys))
	} else {
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s@%d", k, h.latest[k]))
		}
		list = strings.Join(parts, " ")
	}
	return fmt.Sprintf("%s history: [%s] floor=%d max=%d\n", name, list, h.floor, h.max)
}

func ddState(b *BlockedEvals) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out strings.Builder
	if !b.enabled {
		out.WriteString("disabled\n")
	}
	idList := make([]string, 0, len(b.byID))
	for id := range b.byID {
		idList = append(idList, id)
	}
	sort.Strings(idList)
	for _, id := range idList {
		out.WriteString(ddDescribe(b.byID[id]) + "\n")
	}
	if len(idList) == 0 {
		out.WriteString("no blocked evals\n")
	}
	out.WriteString(ddHistory("class", b.classUnblocks))
	out.WriteString(ddHistory("node", b.nodeUnblocks))
	if b.allUnblock > 0 {
		fmt.Fprintf(&out, "unblock-all@%d\n", b.allUnblock)
	}
	if len(b.duplicates) > 0 {
		fmt.Fprintf(&out, "duplicates: %s\n", strings.Join(ids(b.duplicates), " "))
	}
	return out.String()
}
