package job

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// JobStatusCommand is `drover job status` and its alias `drover status`.
type JobStatusCommand struct {
	cli.Meta
	ui    *cli.UI
	alias string
}

func (c *JobStatusCommand) Synopsis() string {
	if c.alias != "" {
		return "List jobs (alias of \"job status\")"
	}
	return "Display status information about a job"
}

const jobStatusHelp = `
Usage: drover job status [options] [job]

  Without a job, lists the registered jobs. With a job ID or ID prefix,
  shows the job, its task group summary, allocations and latest
  evaluations; for periodic and parameterized jobs, the children.

Status Options:

  -json
    Print the API's JSON instead.

  -evals
    Show every evaluation of the job, not only the latest ones.

  -verbose
    Show full IDs.`

// latestEvals is how many evaluations `job status` shows without -evals.
const latestEvals = 3

func (c *JobStatusCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	name := "job status"
	if c.alias != "" {
		name = c.alias
	}
	fs := c.FlagSet(name, jobStatusHelp)
	var asJSON, allEvals, verbose bool
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&allEvals, "evals", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		return c.UsageError(fs, "This command takes either no arguments or one: <job>")
	}
	client := c.Client()
	ctx := context.Background()
	if fs.NArg() == 0 {
		return c.list(ctx, client, asJSON)
	}

	stub, err := cli.ResolveJob(ctx, client, fs.Arg(0))
	if err != nil {
		return c.ui.Errorf("%s", cli.LookupError("job", err))
	}
	if asJSON {
		return c.PrintJSON(ctx, client, "/v1/job/"+cli.EscapeID(stub.ID), "job")
	}
	out, err := c.describe(ctx, client, stub.ID, allEvals, verbose)
	if err != nil {
		return c.ui.Errorf("%s", err)
	}
	c.ui.Printf("%s\n", out)
	return cli.ExitOK
}

func (c *JobStatusCommand) list(ctx context.Context, client *cli.APIClient, asJSON bool) int {
	if asJSON {
		return c.PrintJSON(ctx, client, "/v1/jobs", "jobs")
	}
	var jobs []*structs.JobListStub
	if _, err := client.Get(ctx, "/v1/jobs", nil, &jobs); err != nil {
		return c.ui.Errorf("Error querying jobs: %s", err)
	}
	if len(jobs) == 0 {
		c.ui.Printf("No running jobs\n")
		return cli.ExitOK
	}
	c.ui.Printf("%s\n", cli.FormatJobList(jobs, client.Namespace == "*"))
	return cli.ExitOK
}

// describe renders one job with its summary, children, allocations and
// evaluations.
func (c *JobStatusCommand) describe(ctx context.Context, client *cli.APIClient, id string, allEvals, verbose bool) (string, error) {
	var job structs.Job
	if _, err := client.Get(ctx, "/v1/job/"+cli.EscapeID(id), nil, &job); err != nil {
		return "", fmt.Errorf("Error querying job: %w", err)
	}
	now := c.Now()
	var sections []string

	info := []string{
		"ID|" + job.ID,
		"Name|" + job.Name,
		"Submit Date|" + cli.FormatUnixNano(job.SubmitTime),
		"Type|" + job.Type,
		fmt.Sprintf("Priority|%d", job.Priority),
		"Datacenters|" + strings.Join(job.Datacenters, ","),
		"Namespace|" + job.Namespace,
		"Node Pool|" + job.NodePool,
		"Status|" + jobStatusString(&job),
		fmt.Sprintf("Periodic|%t", job.IsPeriodic()),
		fmt.Sprintf("Parameterized|%t", job.IsParameterized()),
	}
	if job.IsPeriodic() && !job.Stop && job.Periodic.Enabled {
		if next, err := job.Periodic.Next(now); err == nil && !next.IsZero() {
			info = append(info, fmt.Sprintf("Next Periodic Launch|%s (%s from now)", cli.FormatTime(next), cli.ShortDuration(next.Sub(now))))
		}
	}
	sections = append(sections, cli.FormatKV(info))

	if p := job.ParameterizedJob; job.IsParameterized() {
		sections = append(sections, "Parameterized Job\n"+cli.FormatKV([]string{
			"Payload|" + p.Payload,
			"Required Metadata|" + cli.OrNone(strings.Join(p.MetaRequired, ", ")),
			"Optional Metadata|" + cli.OrNone(strings.Join(p.MetaOptional, ", ")),
		}))
	}

	var summary structs.JobSummary
	if _, err := client.Get(ctx, "/v1/job/"+cli.EscapeID(id)+"/summary", nil, &summary); err != nil {
		return "", fmt.Errorf("Error querying job summary: %w", err)
	}
	if job.IsParent() {
		children, err := c.children(ctx, client, &job, &summary)
		if err != nil {
			return "", err
		}
		sections = append(sections, children...)
		return strings.Join(sections, "\n\n"), nil
	}
	sections = append(sections, "Summary\n"+formatSummary(&job, &summary))
	if dep, err := latestDeploymentSection(ctx, client, &job, verbose); err != nil {
		return "", err
	} else if dep != "" {
		sections = append(sections, dep)
	}

	var evals []*structs.Evaluation
	if _, err := client.Get(ctx, "/v1/job/"+cli.EscapeID(id)+"/evaluations", nil, &evals); err != nil {
		return "", fmt.Errorf("Error querying job evaluations: %w", err)
	}
	sort.SliceStable(evals, func(i, j int) bool { return evals[i].CreateIndex > evals[j].CreateIndex })
	if len(evals) > 0 && len(evals[0].FailedTGAllocs) > 0 {
		sections = append(sections, "Placement Failure\n"+cli.FormatFailedTGAllocs(evals[0].FailedTGAllocs, ""))
	}

	var allocs []*structs.AllocListStub
	if _, err := client.Get(ctx, "/v1/job/"+cli.EscapeID(id)+"/allocations", nil, &allocs); err != nil {
		return "", fmt.Errorf("Error querying job allocations: %w", err)
	}
	if len(allocs) == 0 {
		sections = append(sections, "Allocations\nNo allocations placed")
	} else {
		sections = append(sections, "Allocations\n"+cli.FormatAllocStubs(allocs, verbose, now))
	}

	if !allEvals && len(evals) > latestEvals {
		evals = evals[:latestEvals]
	}
	if len(evals) > 0 {
		rows := []string{"ID|Priority|Triggered By|Status|Placement Failures"}
		for _, e := range evals {
			rows = append(rows, fmt.Sprintf("%s|%d|%s|%s|%t", cli.LimitID(e.ID, verbose), e.Priority, e.TriggeredBy, e.Status, len(e.FailedTGAllocs) > 0))
		}
		title := "Latest Evaluations"
		if allEvals {
			title = "Evaluations"
		}
		sections = append(sections, title+"\n"+cli.FormatList(rows))
	}
	return strings.Join(sections, "\n\n"), nil
}

// jobStatusString marks a stopped job the way Nomad does.
func jobStatusString(job *structs.Job) string {
	if job.Stop {
		return job.Status + " (stopped)"
	}
	return job.Status
}

// formatSummary is the per-group count table.
func formatSummary(job *structs.Job, s *structs.JobSummary) string {
	rows := []string{"Task Group|Queued|Starting|Running|Failed|Complete|Lost|Unknown"}
	names := make([]string, 0, len(job.TaskGroups))
	for _, tg := range job.TaskGroups {
		names = append(names, tg.Name)
	}
	if len(names) == 0 {
		names = cli.SortedKeys(s.Summary)
	}
	for _, name := range names {
		g := s.Summary[name]
		rows = append(rows, fmt.Sprintf("%s|%d|%d|%d|%d|%d|%d|%d", name, g.Queued, g.Starting, g.Running, g.Failed, g.Complete, g.Lost, g.Unknown))
	}
	return cli.FormatList(rows)
}

// children renders the children summary and the list of children of a
// periodic or parameterized parent.
func (c *JobStatusCommand) children(ctx context.Context, client *cli.APIClient, job *structs.Job, s *structs.JobSummary) ([]string, error) {
	var ch structs.JobChildrenSummary
	if s.Children != nil {
		ch = *s.Children
	}
	title, listTitle := "Children Job Summary", "Previously Launched Jobs"
	if job.IsParameterized() {
		title, listTitle = "Parameterized Job Summary", "Dispatched Jobs"
	}
	sections := []string{title + "\n" + cli.FormatList([]string{
		"Pending|Running|Dead",
		fmt.Sprintf("%d|%d|%d", ch.Pending, ch.Running, ch.Dead),
	})}

	var stubs []*structs.JobListStub
	q := url.Values{"prefix": {job.ID + "/"}}
	if _, err := client.Get(ctx, "/v1/jobs", q, &stubs); err != nil {
		return nil, fmt.Errorf("Error querying child jobs: %w", err)
	}
	var kids []*structs.JobListStub
	for _, k := range stubs {
		if k.ParentID == job.ID {
			kids = append(kids, k)
		}
	}
	if len(kids) == 0 {
		kind := "periodic"
		if job.IsParameterized() {
			kind = "parameterized"
		}
		return append(sections, listTitle+"\nNo instances of "+kind+" job found"), nil
	}
	sort.SliceStable(kids, func(i, j int) bool { return kids[i].SubmitTime > kids[j].SubmitTime })
	rows := []string{"ID|Status"}
	for _, k := range kids {
		rows = append(rows, k.ID+"|"+k.Status)
	}
	return append(sections, listTitle+"\n"+cli.FormatList(rows)), nil
}
