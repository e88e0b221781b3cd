package cli

import (
	"context"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// monitorWait is how long one blocking read of the monitored evaluation
// waits for a change before asking again.
const monitorWait = 30 * time.Second

// Monitor follows an evaluation until it finishes, printing what happens to
// it and to its allocations like Nomad's CLI. It returns 0 when the eval
// completed with everything placed, 2 when placement failed or the eval
// failed, and 1 on an error.
type Monitor struct {
	UI      *UI
	Client  *APIClient
	Verbose bool
}

// allocSeen is what the monitor last printed about an allocation.
type allocSeen struct {
	clientStatus string
}

// FollowEval is how a write that creates an evaluation ends: it monitors
// evalID, unless detach or there is no eval, in which case it prints done
// ("Job registration successful") and the eval's ID, if any.
func (m *Meta) FollowEval(ctx context.Context, client *APIClient, evalID, done string, detach, verbose bool) int {
	if detach || evalID == "" {
		m.UI.Printf("%s\n", done)
		if evalID != "" {
			m.UI.Printf("Evaluation ID: %s\n", evalID)
		}
		return ExitOK
	}
	return (&Monitor{UI: m.UI, Client: client, Verbose: verbose}).Run(ctx, evalID)
}

func (m *Monitor) Run(ctx context.Context, evalID string) int {
	m.UI.Printf("==> Monitoring evaluation %q\n", LimitID(evalID, m.Verbose))
	var (
		index      uint64
		lastStatus string
		first      = true
		allocs     = map[string]allocSeen{}
		// A leader election while the eval runs answers 503 for a moment:
		// the monitor waits it out rather than giving up on the job.
		retry = NewRetrier()
	)
	for {
		var (
			eval structs.Evaluation
			meta QueryMeta
		)
		err := retry.Do(ctx, func() (err error) {
			eval = structs.Evaluation{}
			meta, err = m.Client.BlockingGet(ctx, "/v1/evaluation/"+EscapeID(evalID), index, monitorWait, &eval)
			return err
		})
		if err != nil {
			if IsNotFound(err) {
				return m.UI.Errorf("No evaluation with id %q found", evalID)
			}
			return m.UI.Errorf("Error reading evaluation: %s", err)
		}
		index = meta.LastIndex

		if first {
			switch {
			case eval.JobID != "":
				m.UI.Printf("    Evaluation triggered by job %q\n", eval.JobID)
			case eval.NodeID != "":
				m.UI.Printf("    Evaluation triggered by node %q\n", LimitID(eval.NodeID, m.Verbose))
			}
		}
		// Allocations first: they are what the status change produced.
		if err := retry.Do(ctx, func() error { return m.reportAllocs(ctx, &eval, allocs) }); err != nil {
			return m.UI.Errorf("Error reading allocations: %s", err)
		}
		if !first && eval.Status != lastStatus {
			m.UI.Printf("    Evaluation status changed: %q -> %q\n", lastStatus, eval.Status)
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
			m.UI.Printf("==> Monitoring next evaluation %q%s\n", LimitID(eval.NextEval, m.Verbose), wait)
			evalID, index, first, lastStatus = eval.NextEval, 0, true, ""
			clear(allocs)
			continue
		}
		return m.finish(&eval)
	}
}

// reportAllocs prints the allocations of the eval that are new or whose
// client status changed since the last look.
func (m *Monitor) reportAllocs(ctx context.Context, eval *structs.Evaluation, seen map[string]allocSeen) error {
	var stubs []*structs.AllocListStub
	if _, err := m.Client.Get(ctx, "/v1/evaluation/"+EscapeID(eval.ID)+"/allocations", nil, &stubs); err != nil {
		return err
	}
	for _, a := range stubs {
		prev, known := seen[a.ID]
		switch {
		case !known && a.CreateIndex >= eval.CreateIndex:
			m.UI.Printf("    Allocation %q created: node %q, group %q\n", LimitID(a.ID, m.Verbose), LimitID(a.NodeID, m.Verbose), a.TaskGroup)
		case !known:
			m.UI.Printf("    Allocation %q modified: node %q, group %q\n", LimitID(a.ID, m.Verbose), LimitID(a.NodeID, m.Verbose), a.TaskGroup)
		case prev.clientStatus != a.ClientStatus:
			desc := ""
			if a.ClientDescription != "" {
				desc = " (" + a.ClientDescription + ")"
			}
			m.UI.Printf("    Allocation %q status changed: %q -> %q%s\n", LimitID(a.ID, m.Verbose), prev.clientStatus, a.ClientStatus, desc)
		}
		seen[a.ID] = allocSeen{clientStatus: a.ClientStatus}
	}
	return nil
}

func (m *Monitor) finish(eval *structs.Evaluation) int {
	id := LimitID(eval.ID, m.Verbose)
	if len(eval.FailedTGAllocs) > 0 {
		m.UI.Printf("==> Evaluation %q finished with status %q but failed to place all allocations:\n", id, eval.Status)
		m.UI.Printf("%s\n", FormatFailedTGAllocs(eval.FailedTGAllocs, "    "))
		if eval.BlockedEval != "" {
			m.UI.Printf("    Evaluation %q waiting for additional capacity to place remainder\n", LimitID(eval.BlockedEval, m.Verbose))
		}
		return exitPlacementFailure
	}
	m.UI.Printf("==> Evaluation %q finished with status %q\n", id, eval.Status)
	if eval.Status == structs.EvalStatusFailed {
		return exitPlacementFailure
	}
	return ExitOK
}
