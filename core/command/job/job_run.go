package job

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/jobspec"
	"github.com/drover-org/drover/core/structs"
)

// jobTypesTimeout bounds the fetch of the agent's job type declarations.
// Only `job run` and `job plan` parse job files, and both contact the agent
// right after, so the fetch costs one short round trip on a working agent;
// the bound keeps a silent one from adding more than this to the command's
// own failure.
const jobTypesTimeout = 2 * time.Second

// jobTypeOptions returns the parse options holding what the agent's
// scheduler plugins declare about the job types they serve (GET
// /v1/agent/plugins), so a group's partial restart or reschedule block is
// laid over the serving plugin's defaults as the server would. It never
// fails the command: when the list cannot be had (an agent too old to
// serve it, unreachable, slow or refusing), or names no scheduler plugin
// (an agent running no server), the file is parsed knowing no type, and
// the server fills what the file leaves out at registration.
func jobTypeOptions(ctx context.Context, client *cli.APIClient) jobspec.Options {
	ctx, cancel := context.WithTimeout(ctx, jobTypesTimeout)
	defer cancel()
	var resp struct{ Plugins []structs.AgentPlugin }
	if _, err := client.Get(ctx, "/v1/agent/plugins", nil, &resp); err != nil {
		return jobspec.Options{}
	}
	types := map[string]*structs.JobTypeBehavior{}
	for _, p := range resp.Plugins {
		for _, jt := range p.JobTypes {
			if _, dup := types[jt.Name]; !dup && jt.Name != "" {
				types[jt.Name] = jt.Behavior.Copy()
			}
		}
	}
	if len(types) == 0 {
		return jobspec.Options{}
	}
	return jobspec.Options{Defaults: func(jobType string) *structs.JobTypeBehavior { return types[jobType] }}
}

// JobRunCommand is `drover job run`.
type JobRunCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *JobRunCommand) Synopsis() string { return "Run a new job or update an existing job" }

const jobRunHelp = `
Usage: drover job run [options] <path>

  Parses the job file (HCL, Nomad's jobspec; "-" reads standard input),
  submits it, and monitors the evaluation it creates until it finishes.
  Exits 2 when some allocations could not be placed.

Run Options:

  -detach
    Return right after submitting, printing the evaluation ID.

  -check-index=<index>
    Register the job only if its current job modify index is <index>
    (0 means the job must not exist yet). "drover job plan" prints it.

  -verbose
    Show full IDs.
` + jobFileHelp

func (c *JobRunCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("job run", jobRunHelp)
	var detach, verbose bool
	var checkIndex uint64
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	fs.Uint64Var(&checkIndex, "check-index", 0, "")
	var vf jobFileFlags
	vf.register(fs)
	path, code, ok := c.ParseOne(fs, args, "<path>")
	if !ok {
		return code
	}
	enforce := false
	fs.Visit(func(f *flag.Flag) { enforce = enforce || f.Name == "check-index" })

	client := c.Client()
	ctx := context.Background()
	job, loc, err := parseJobFileLocated(ctx, c.ui, client, path, &vf)
	if err != nil {
		return c.ui.Errorf("Error getting job struct: %s", err)
	}
	body := map[string]any{"Job": job, "EnforceIndex": enforce, "JobModifyIndex": checkIndex}
	var resp structs.JobRegisterResponse
	if err := client.Write(ctx, http.MethodPut, "/v1/jobs", nil, body, &resp); err != nil {
		return c.ui.Errorf("Error submitting job: %s", placeRefusal(err, loc))
	}
	if resp.Warnings != "" {
		c.ui.Printf("Job Warnings:\n%s\n\n", resp.Warnings)
	}

	switch {
	case job.IsPeriodic() && !job.IsParameterized():
		c.ui.Printf("Job registration successful\n")
		if job.Periodic.Enabled {
			now := c.Now()
			if next, err := job.Periodic.Next(now); err == nil && !next.IsZero() {
				c.ui.Printf("Approximate next launch time: %s (%s from now)\n", cli.FormatTime(next), cli.ShortDuration(next.Sub(now)))
			}
		}
		return cli.ExitOK
	case job.IsParameterized():
		c.ui.Printf("Job registration successful\n")
		return cli.ExitOK
	}
	return c.FollowEval(ctx, client, resp.EvalID, "Job registration successful", detach, verbose)
}

// JobPlanCommand is `drover job plan`.
type JobPlanCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *JobPlanCommand) Synopsis() string { return "Dry-run a job update to determine its effects" }

const jobPlanHelp = `
Usage: drover job plan [options] <path>

  Asks the scheduler what submitting the job file would change, without
  changing anything. Exit codes: 0 when no allocations would be created or
  destroyed, 1 when some would, 255 on error.

Plan Options:

  -diff
    Show the job's differences to the registered version (default true).

  -verbose
    Show the whole diff: the fields of added jobs, groups and tasks, and
    unchanged fields next to changed ones.
` + jobFileHelp

func (c *JobPlanCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("job plan", jobPlanHelp)
	diff := true
	var verbose bool
	fs.BoolVar(&diff, "diff", true, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	var vf jobFileFlags
	vf.register(fs)
	path, code, ok := c.ParseOne(fs, args, "<path>")
	if !ok {
		if code == cli.ExitError {
			return cli.ExitPlanError
		}
		return code
	}
	client := c.Client()
	ctx := context.Background()
	job, loc, err := parseJobFileLocated(ctx, c.ui, client, path, &vf)
	if err != nil {
		c.ui.Errorf("Error getting job struct: %s", err)
		return cli.ExitPlanError
	}
	var resp structs.JobPlanResponse
	body := map[string]any{"Job": job, "Diff": diff}
	if err := client.Write(ctx, http.MethodPut, "/v1/job/"+cli.EscapeID(job.ID)+"/plan", nil, body, &resp); err != nil {
		c.ui.Errorf("Error during plan: %s", placeRefusal(err, loc))
		return cli.ExitPlanError
	}
	c.ui.Printf("%s", formatPlan(job, &resp, path, c.Now(), verbose))
	return planExitCode(&resp)
}

// planExitCode is 1 when the plan creates, destroys or moves allocations.
func planExitCode(resp *structs.JobPlanResponse) int {
	if resp.Annotations == nil {
		return cli.ExitOK
	}
	for _, u := range resp.Annotations.DesiredTGUpdates {
		if u.Place+u.Stop+u.Migrate+u.DestructiveUpdate+u.Canary > 0 {
			return 1
		}
	}
	return cli.ExitOK
}

var diffMarkers = map[string]string{"Added": "+", "Deleted": "-", "Edited": "+/-"}

// formatPlan renders a plan like Nomad's `job plan`.
func formatPlan(job *structs.Job, resp *structs.JobPlanResponse, path string, now time.Time, verbose bool) string {
	var b strings.Builder
	var updates map[string]*structs.DesiredUpdates
	if resp.Annotations != nil {
		updates = resp.Annotations.DesiredTGUpdates
	}
	if resp.Diff != nil {
		b.WriteString(formatJobDiff(resp.Diff, updates, verbose))
	} else {
		// An agent that sent no diff: the job's line and the plan's counts.
		fmt.Fprintf(&b, "Job: %q\n", job.ID)
		for _, tg := range job.TaskGroups {
			if u := updates[tg.Name]; u != nil {
				fmt.Fprintf(&b, "%sTask Group: %q (%s)\n", markerPrefix(groupMarker(u)), tg.Name, updateLabels(u))
			}
		}
	}

	b.WriteString("\nScheduler dry-run:\n")
	if len(resp.FailedTGAllocs) == 0 {
		b.WriteString("- All tasks successfully allocated.\n")
	} else {
		b.WriteString("- WARNING: Failed to place all allocations.\n")
		b.WriteString(cli.FormatFailedTGAllocs(resp.FailedTGAllocs, "  ") + "\n")
	}
	if next := resp.NextPeriodicLaunch; !next.IsZero() {
		fmt.Fprintf(&b, "- If submitted now, next periodic launch would be at %s (%s from now).\n", cli.FormatTime(next), cli.ShortDuration(next.Sub(now)))
	}
	if resp.Warnings != "" {
		fmt.Fprintf(&b, "\nJob Warnings:\n%s\n", resp.Warnings)
	}
	fmt.Fprintf(&b, "\nJob Modify Index: %d\n", resp.JobModifyIndex)
	fmt.Fprintf(&b, `To submit the job with version verification run:

drover job run -check-index %d %s

When running the job with the check-index flag, the job will only be run if the
job modify index given matches the server-side version. If the index has
changed, another user has modified the job and the plan's results are
potentially invalid.
`, resp.JobModifyIndex, path)
	return b.String()
}

func groupMarker(u *structs.DesiredUpdates) string {
	changes := u.DestructiveUpdate + u.InPlaceUpdate + u.Migrate + u.Canary
	switch {
	case changes > 0 || (u.Place > 0 && u.Stop > 0):
		return "+/-"
	case u.Place > 0:
		return "+"
	case u.Stop > 0:
		return "-"
	}
	return ""
}

// markerPrefix puts a change marker ("+", "-", "+/-") before a line; an
// unchanged line has none.
func markerPrefix(marker string) string {
	if marker == "" {
		return ""
	}
	return marker + " "
}

// updateLabels renders "1 create/destroy update, 2 create, 3 ignore".
func updateLabels(u *structs.DesiredUpdates) string {
	parts := []struct {
		n     uint64
		label string
	}{
		{u.DestructiveUpdate, "create/destroy update"},
		{u.InPlaceUpdate, "in-place update"},
		{u.Place, "create"},
		{u.Stop, "destroy"},
		{u.Migrate, "migrate"},
		{u.Canary, "canary"},
		{u.Ignore, "ignore"},
	}
	var out []string
	for _, p := range parts {
		if p.n > 0 {
			out = append(out, fmt.Sprintf("%d %s", p.n, p.label))
		}
	}
	if len(out) == 0 {
		return "no changes"
	}
	return strings.Join(out, ", ")
}
