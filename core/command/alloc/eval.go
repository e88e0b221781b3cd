package alloc

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// EvalStatusCommand is `drover eval status`.
type EvalStatusCommand struct {
	cli.Meta
	ui *cli.UI
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
	c.Meta.UI = c.ui
	fs := c.FlagSet("eval status", evalStatusHelp)
	var asJSON, verbose bool
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	arg, code, ok := c.ParseOne(fs, args, "<evaluation>")
	if !ok {
		return code
	}
	client := c.Client()
	ctx := context.Background()
	id, err := cli.ResolveEvalID(ctx, client, arg)
	if err != nil {
		return c.ui.Errorf("%s", cli.LookupError("evaluation", err))
	}
	if asJSON {
		return c.PrintJSON(ctx, client, "/v1/evaluation/"+id, "evaluation")
	}
	var eval structs.Evaluation
	if _, err := client.Get(ctx, "/v1/evaluation/"+id, nil, &eval); err != nil {
		return c.ui.Errorf("Error querying evaluation: %s", err)
	}
	c.ui.Printf("%s\n", formatEvalStatus(&eval, verbose, c.Now()))
	return cli.ExitOK
}

func formatEvalStatus(e *structs.Evaluation, verbose bool, now time.Time) string {
	desc := e.StatusDescription
	if desc == "" {
		desc = e.Status
	}
	idOrNone := func(id string) string { return cli.OrNone(cli.LimitID(id, verbose)) }
	out := cli.FormatKV([]string{
		"ID|" + cli.LimitID(e.ID, verbose),
		"Create Time|" + cli.PrettyTimeDiff(time.Unix(0, e.CreateTime), now),
		"Modify Time|" + cli.PrettyTimeDiff(time.Unix(0, e.ModifyTime), now),
		"Status|" + e.Status,
		"Status Description|" + desc,
		"Type|" + e.Type,
		"TriggeredBy|" + e.TriggeredBy,
		"Job ID|" + cli.OrNone(e.JobID),
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
		for _, tg := range cli.SortedKeys(e.QueuedAllocations) {
			rows = append(rows, fmt.Sprintf("%s|%d", tg, e.QueuedAllocations[tg]))
		}
		out += "\n\nQueued Allocations\n" + cli.FormatList(rows)
	}
	if len(e.FailedTGAllocs) > 0 {
		out += "\n\nFailed Placements\n" + cli.FormatFailedTGAllocs(e.FailedTGAllocs, "")
		if e.BlockedEval != "" {
			out += fmt.Sprintf("\n\nEvaluation %q waiting for additional capacity to place remainder", cli.LimitID(e.BlockedEval, verbose))
		}
	}
	return out
}

// EvalListCommand is `drover eval list`.
type EvalListCommand struct {
	cli.Meta
	ui *cli.UI
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
	c.Meta.UI = c.ui
	fs := c.FlagSet("eval list", evalListHelp)
	var asJSON, verbose bool
	var jobID, status string
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	fs.StringVar(&jobID, "job", "", "")
	fs.StringVar(&status, "status", "", "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	client := c.Client()
	path := "/v1/evaluations"
	if jobID != "" {
		path = "/v1/job/" + cli.EscapeID(jobID) + "/evaluations"
	}
	var evals []*structs.Evaluation
	if _, err := client.Get(context.Background(), path, url.Values{}, &evals); err != nil {
		return c.ui.Errorf("Error querying evaluations: %s", err)
	}
	filtered := evals[:0]
	for _, e := range evals {
		if status == "" || e.Status == status {
			filtered = append(filtered, e)
		}
	}
	sort.SliceStable(filtered, func(i, j int) bool { return filtered[i].CreateIndex > filtered[j].CreateIndex })
	if asJSON {
		c.ui.Printf("%s\n", cli.ToJSON(filtered))
		return cli.ExitOK
	}
	if len(filtered) == 0 {
		c.ui.Printf("No evals found\n")
		return cli.ExitOK
	}
	rows := []string{"ID|Priority|Triggered By|Job ID|Namespace|Node ID|Status|Placement Failures"}
	for _, e := range filtered {
		rows = append(rows, fmt.Sprintf("%s|%d|%s|%s|%s|%s|%s|%t", cli.LimitID(e.ID, verbose), e.Priority, e.TriggeredBy,
			cli.OrNone(e.JobID), e.Namespace, cli.OrNone(cli.LimitID(e.NodeID, verbose)), e.Status, len(e.FailedTGAllocs) > 0))
	}
	c.ui.Printf("%s\n", cli.FormatList(rows))
	return cli.ExitOK
}
