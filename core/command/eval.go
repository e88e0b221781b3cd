package command

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// EvalStatusCommand is `drover eval status`.
type EvalStatusCommand struct {
	meta
	ui *UI
}

func (c *EvalStatusCommand) Synopsis() string {
	return "Display evaluation status and placement failures"
}

const evalStatusHelp = `
Usage: drover eval status [options] <evaluation>

  Shows an evaluation (by ID or ID prefix) and, when it could not place
  every allocation, why: the constraints that filtered nodes and the
  resources that were exhausted.

Eval Status Options:

  -json
    Print the API's JSON instead.

  -verbose
    Show full IDs.`

func (c *EvalStatusCommand) Run(args []string) int {
	c.meta.ui = c.ui
	fs := c.flagSet("eval status", evalStatusHelp)
	var asJSON, verbose bool
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	arg, code, ok := c.parseOne(fs, args, "<evaluation>")
	if !ok {
		return code
	}
	client := c.client()
	ctx := context.Background()
	id, err := resolveEvalID(ctx, client, arg)
	if err != nil {
		return c.ui.errorf("%s", lookupError("evaluation", err))
	}
	if asJSON {
		return c.printJSON(ctx, client, "/v1/evaluation/"+id, "evaluation")
	}
	var eval structs.Evaluation
	if _, err := client.Get(ctx, "/v1/evaluation/"+id, nil, &eval); err != nil {
		return c.ui.errorf("Error querying evaluation: %s", err)
	}
	c.ui.printf("%s\n", formatEvalStatus(&eval, verbose, c.now()))
	return exitOK
}

func formatEvalStatus(e *structs.Evaluation, verbose bool, now time.Time) string {
	desc := e.StatusDescription
	if desc == "" {
		desc = e.Status
	}
	idOrNone := func(id string) string { return orNone(limitID(id, verbose)) }
	out := formatKV([]string{
		"ID|" + limitID(e.ID, verbose),
		"Create Time|" + prettyTimeDiff(time.Unix(0, e.CreateTime), now),
		"Modify Time|" + prettyTimeDiff(time.Unix(0, e.ModifyTime), now),
		"Status|" + e.Status,
		"Status Description|" + desc,
		"Type|" + e.Type,
		"TriggeredBy|" + e.TriggeredBy,
		"Job ID|" + orNone(e.JobID),
		"Node ID|" + idOrNone(e.NodeID),
		"Namespace|" + e.Namespace,
		fmt.Sprintf("Priority|%d", e.Priority),
		fmt.Sprintf("Placement Failures|%t", len(e.FailedTGAllocs) > 0),
		"Previous Eval|" + idOrNone(e.PreviousEval),
		"Next Eval|" + idOrNone(e.NextEval),
		"Blocked Eval|" + idOrNone(e.BlockedEval),
	})
	if len(e.QueuedAllocations) > 0 {
		rows := []string{"Task Group|Queued"}
		for _, tg := range sortedKeys(e.QueuedAllocations) {
			rows = append(rows, fmt.Sprintf("%s|%d", tg, e.QueuedAllocations[tg]))
		}
		out += "\n\nQueued Allocations\n" + formatList(rows)
	}
	if len(e.FailedTGAllocs) > 0 {
		out += "\n\nFailed Placements\n" + formatFailedTGAllocs(e.FailedTGAllocs, "")
		if e.BlockedEval != "" {
			out += fmt.Sprintf("\n\nEvaluation %q waiting for additional capacity to place remainder", limitID(e.BlockedEval, verbose))
		}
	}
	return out
}

// EvalListCommand is `drover eval list`.
type EvalListCommand struct {
	meta
	ui *UI
}

func (c *EvalListCommand) Synopsis() string { return "List the evaluations" }

const evalListHelp = `
Usage: drover eval list [options]

  Lists evaluations, newest first.

Eval List Options:

  -job <id>
    Only evaluations of this job.

  -status <status>
    Only evaluations with this status (pending, blocked, complete, …).

  -json
    Print the API's JSON instead.

  -verbose
    Show full IDs.`

func (c *EvalListCommand) Run(args []string) int {
	c.meta.ui = c.ui
	fs := c.flagSet("eval list", evalListHelp)
	var asJSON, verbose bool
	var jobID, status string
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	fs.StringVar(&jobID, "job", "", "")
	fs.StringVar(&status, "status", "", "")
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return c.usageError(fs, "This command takes no arguments")
	}
	client := c.client()
	path := "/v1/evaluations"
	if jobID != "" {
		path = "/v1/job/" + escapeID(jobID) + "/evaluations"
	}
	var evals []*structs.Evaluation
	if _, err := client.Get(context.Background(), path, url.Values{}, &evals); err != nil {
		return c.ui.errorf("Error querying evaluations: %s", err)
	}
	filtered := evals[:0]
	for _, e := range evals {
		if status == "" || e.Status == status {
			filtered = append(filtered, e)
		}
	}
	sort.SliceStable(filtered, func(i, j int) bool { return filtered[i].CreateIndex > filtered[j].CreateIndex })
	if asJSON {
		c.ui.printf("%s\n", toJSON(filtered))
		return exitOK
	}
	if len(filtered) == 0 {
		c.ui.printf("No evals found\n")
		return exitOK
	}
	rows := []string{"ID|Priority|Triggered By|Job ID|Namespace|Node ID|Status|Placement Failures"}
	for _, e := range filtered {
		rows = append(rows, fmt.Sprintf("%s|%d|%s|%s|%s|%s|%s|%t", limitID(e.ID, verbose), e.Priority, e.TriggeredBy,
			orNone(e.JobID), e.Namespace, orNone(limitID(e.NodeID, verbose)), e.Status, len(e.FailedTGAllocs) > 0))
	}
	c.ui.printf("%s\n", formatList(rows))
	return exitOK
}
