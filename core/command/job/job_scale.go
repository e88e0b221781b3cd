package job

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// JobScaleCommand is `drover job scale`.
type JobScaleCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *JobScaleCommand) Synopsis() string { return "Change the count of a job's task group" }

const jobScaleHelp = `
Usage: drover job scale [options] <job> [<group>] <count>

  Sets the count of one of the job's task groups, as a new version of the
  job, then monitors the evaluation. <group> may be left out when the job
  has exactly one task group. Jobs whose type places each group on every
  node (system, sysbatch) have no count to scale.

Scale Options:

  -detach
    Return right after the change, printing the evaluation ID.

  -check-index=<index>
    Scale only while the job's modify index is <index>.

  -verbose
    Show full IDs.`

func (c *JobScaleCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("job scale", jobScaleHelp)
	var detach, verbose bool
	var checkIndex uint64
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	fs.Uint64Var(&checkIndex, "check-index", 0, "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if n := fs.NArg(); n < 2 || n > 3 {
		return c.UsageError(fs, "This command takes two or three arguments: <job> [<group>] <count>")
	}
	rest := fs.Args()
	countArg := rest[len(rest)-1]
	count, err := strconv.ParseInt(countArg, 10, 64)
	if err != nil || count < 0 {
		return c.UsageError(fs, "Count must be a non-negative whole number, got %q", countArg)
	}
	client := c.Client()
	ctx := context.Background()
	stub, err := cli.ResolveJob(ctx, client, rest[0])
	if err != nil {
		return c.ui.Errorf("%s", cli.LookupError("job", err))
	}
	q := url.Values{}
	if stub.Namespace != "" {
		q.Set("namespace", stub.Namespace)
	}
	group := ""
	if len(rest) == 3 {
		group = rest[1]
	} else {
		var job structs.Job
		if _, err := client.Get(ctx, "/v1/job/"+cli.EscapeID(stub.ID), q, &job); err != nil {
			return c.ui.Errorf("Error reading job %q: %s", stub.ID, err)
		}
		if len(job.TaskGroups) != 1 {
			return c.ui.Errorf("Job %q has %d task groups: name the one to scale (drover job scale %s <group> %d)", job.ID, len(job.TaskGroups), job.ID, count)
		}
		group = job.TaskGroups[0].Name
	}
	req := structs.ScalingRequest{
		Count:          &count,
		Target:         map[string]string{structs.ScalingTargetJob: stub.ID, structs.ScalingTargetGroup: group},
		Message:        "submitted using the drover CLI",
		JobModifyIndex: checkIndex,
	}
	var resp structs.JobRegisterResponse
	if err := client.Write(ctx, http.MethodPut, "/v1/job/"+cli.EscapeID(stub.ID)+"/scale", q, &req, &resp); err != nil {
		return c.ui.Errorf("Error scaling job: %s", err)
	}
	if resp.EvalID == "" {
		// A periodic or parameterized parent: its next children run the
		// new count; nothing is evaluated now.
		c.ui.Printf("Job scale successful\n")
		return cli.ExitOK
	}
	if detach {
		c.ui.Printf("Job scale successful\nEvaluation ID: %s\n", resp.EvalID)
		return cli.ExitOK
	}
	return (&cli.Monitor{UI: c.ui, Client: client, Verbose: verbose}).Run(ctx, resp.EvalID)
}

// JobRevertCommand is `drover job revert`.
type JobRevertCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *JobRevertCommand) Synopsis() string { return "Revert to a prior version of the job" }

const jobRevertHelp = `
Usage: drover job revert [options] <job> <version>

  Registers a kept prior version of the job again, as its newest version,
  then monitors the evaluation. The server keeps the latest versions of a
  job (GET /v1/job/<job>/versions lists them).

Revert Options:

  -detach
    Return right after the revert, printing the evaluation ID.

  -verbose
    Show full IDs.`

func (c *JobRevertCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("job revert", jobRevertHelp)
	var detach, verbose bool
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 2 {
		return c.UsageError(fs, "This command takes two arguments: <job> <version>")
	}
	version, err := strconv.ParseUint(fs.Arg(1), 10, 64)
	if err != nil {
		return c.UsageError(fs, "Version must be a non-negative whole number, got %q", fs.Arg(1))
	}
	client := c.Client()
	ctx := context.Background()
	stub, err := cli.ResolveJob(ctx, client, fs.Arg(0))
	if err != nil {
		return c.ui.Errorf("%s", cli.LookupError("job", err))
	}
	q := url.Values{}
	if stub.Namespace != "" {
		q.Set("namespace", stub.Namespace)
	}
	req := structs.JobRevertRequest{JobID: stub.ID, JobVersion: version}
	var resp structs.JobRegisterResponse
	if err := client.Write(ctx, http.MethodPut, "/v1/job/"+cli.EscapeID(stub.ID)+"/revert", q, &req, &resp); err != nil {
		return c.ui.Errorf("Error reverting job %q to version %d: %s", stub.ID, version, err)
	}
	if resp.EvalID == "" {
		return cli.ExitOK
	}
	if detach {
		c.ui.Printf("%s\n", resp.EvalID)
		return cli.ExitOK
	}
	return (&cli.Monitor{UI: c.ui, Client: client, Verbose: verbose}).Run(ctx, resp.EvalID)
}
