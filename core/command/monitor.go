package command

import (
	"context"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// monitorWait is how long one blocking read of the monitored evaluation
// waits for a change before asking again.
const monitorWait = 30 * time.Second

// monitor follows an evaluation until it finishes, printing what happens to
// it and to its allocations like Nomad's CLI. It returns 0 when the eval
// completed with everything placed, 2 when placement failed or the eval
// failed, and 1 on an error.
type monitor struct {
	ui      *UI
	client  *APIClient
	verbose bool
}

// allocSeen is what the monitor last printed about an allocation.
type allocSeen struct {
	clientStatus string
}

// followEval is how a write that creates an evaluation ends: it monitors
// evalID, unless detach or there is no eval, in which case it prints done
// ("Job registration successful") and the eval's ID, if any.
func (m *meta) followEval(ctx context.Context, client *APIClient, evalID, done string, detach, verbose bool) int {
	if detach || evalID == "" {
		m.ui.printf("%s\n", done)
		if evalID != "" {
			m.ui.printf("Evaluation ID: %s\n", evalID)
		}
		return exitOK
	}
	return (&monitor{ui: m.ui, client: client, verbose: verbose}).run(ctx, evalID)
}

func (m *monitor) run(ctx context.Context, evalID string) int {
	m.ui.printf("==> Monitoring evaluation %q\n", limitID(evalID, m.verbose))
	var (
		index      uint64
		lastStatus string
		first      = true
		allocs     = map[string]allocSeen{}
		// A leader election while the eval runs answers 503 for a moment:
		// the monitor waits it out rather than giving up on the job.
		retry = newRetrier()
	)
	for {
		var (
			eval structs.Evaluation
			meta QueryMeta
		)
		err := retry.do(ctx, func() (err error) {
			eval = structs.Evaluation{}
			meta, err = m.client.BlockingGet(ctx, "/v1/evaluation/"+escapeID(evalID), index, monitorWait, &eval)
			return err
		})
		if err != nil {
			if IsNotFound(err) {
				return m.ui.errorf("No evaluation with id %q found", evalID)
			}
			return m.ui.errorf("Error reading evaluation: %s", err)
		}
		index = meta.LastIndex

		if first {
			switch {
			case eval.JobID != "":
				m.ui.printf("    Evaluation triggered by job %q\n", eval.JobID)
			case eval.NodeID != "":
				m.ui.printf("    Evaluation triggered by node %q\n", limitID(eval.NodeID, m.verbose))
			}
		}
		// Allocations first: they are what the status change produced.
		if err := retry.do(ctx, func() error { return m.reportAllocs(ctx, &eval, allocs) }); err != nil {
			return m.ui.errorf("Error reading allocations: %s", err)
		}
		if !first && eval.Status != lastStatus {
			m.ui.printf("    Evaluation status changed: %q -> %q\n", lastStatus, eval.Status)
		}
		first, lastStatus = false, eval.Status
		if !eval.TerminalStatus() {
			continue
		}
		if eval.NextEval != "" {
			wait := ""
			if eval.Wait > 0 {
				wait = " in " + eval.Wait.String()
			}
			m.ui.printf("==> Monitoring next evaluation %q%s\n", limitID(eval.NextEval, m.verbose), wait)
			evalID, index, first, lastStatus = eval.NextEval, 0, true, ""
			clear(allocs)
			continue
		}
		return m.finish(&eval)
	}
}

// reportAllocs prints the allocations of the eval that are new or whose
// client status changed since the last look.
func (m *monitor) reportAllocs(ctx context.Context, eval *structs.Evaluation, seen map[string]allocSeen) error {
	var stubs []*structs.AllocListStub
	if _, err := m.client.Get(ctx, "/v1/evaluation/"+escapeID(eval.ID)+"/allocations", nil, &stubs); err != nil {
		return err
	}
	for _, a := range stubs {
		prev, known := seen[a.ID]
		switch {
		case !known && a.CreateIndex >= eval.CreateIndex:
			m.ui.printf("    Allocation %q created: node %q, group %q\n", limitID(a.ID, m.verbose), limitID(a.NodeID, m.verbose), a.TaskGroup)
		case !known:
			m.ui.printf("    Allocation %q modified: node %q, group %q\n", limitID(a.ID, m.verbose), limitID(a.NodeID, m.verbose), a.TaskGroup)
		case prev.clientStatus != a.ClientStatus:
			desc := ""
			if a.ClientDescription != "" {
				desc = " (" + a.ClientDescription + ")"
			}
			m.ui.printf("    Allocation %q status changed: %q -> %q%s\n", limitID(a.ID, m.verbose), prev.clientStatus, a.ClientStatus, desc)
		}
		seen[a.ID] = allocSeen{clientStatus: a.ClientStatus}
	}
	return nil
}

func (m *monitor) finish(eval *structs.Evaluation) int {
	id := limitID(eval.ID, m.verbose)
	if len(eval.FailedTGAllocs) > 0 {
		m.ui.printf("==> Evaluation %q finished with status %q but failed to place all allocations:\n", id, eval.Status)
		m.ui.printf("%s\n", formatFailedTGAllocs(eval.FailedTGAllocs, "    "))
		if eval.BlockedEval != "" {
			m.ui.printf("    Evaluation %q waiting for additional capacity to place remainder\n", limitID(eval.BlockedEval, m.verbose))
		}
		return exitPlacementFailure
	}
	m.ui.printf("==> Evaluation %q finished with status %q\n", id, eval.Status)
	if eval.Status == structs.EvalStatusFailed {
		return exitPlacementFailure
	}
	return exitOK
}
