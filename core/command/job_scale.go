package command

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/drover-org/drover/core/structs"
)

// JobScaleCommand is `drover job scale`.
type JobScaleCommand struct {
	meta
	ui *UI
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
	c.meta.ui = c.ui
	fs := c.flagSet("job scale", jobScaleHelp)
	var detach, verbose bool
	var checkIndex uint64
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	fs.Uint64Var(&checkIndex, "check-index", 0, "")
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	if n := fs.NArg(); n < 2 || n > 3 {
		return c.usageError(fs, "This command takes two or three arguments: <job> [<group>] <count>")
	}
	rest := fs.Args()
	countArg := rest[len(rest)-1]
	count, err := strconv.ParseInt(countArg, 10, 64)
	if err != nil || count < 0 {
		return c.usageError(fs, "Count must be a non-negative whole number, got %q", countArg)
	}
	client := c.client()
	ctx := context.Background()
	stub, err := resolveJob(ctx, client, rest[0])
	if err != nil {
		return c.ui.errorf("%s", lookupError("job", err))
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
		if _, err := client.Get(ctx, "/v1/job/"+escapeID(stub.ID), q, &job); err != nil {
			return c.ui.errorf("Error reading job %q: %s", stub.ID, err)
		}
		if len(job.TaskGroups) != 1 {
			return c.ui.errorf("Job %q has %d task groups: name the one to scale (drover job scale %s <group> %d)", job.ID, len(job.TaskGroups), job.ID, count)
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
	if err := client.Write(ctx, http.MethodPut, "/v1/job/"+escapeID(stub.ID)+"/scale", q, &req, &resp); err != nil {
		return c.ui.errorf("Error scaling job: %s", err)
	}
	if resp.EvalID == "" {
		// A periodic or parameterized parent: its next children run the
		// new count; nothing is evaluated now.
		c.ui.printf("Job scale successful\n")
		return exitOK
	}
	if detach {
		c.ui.printf("Job scale successful\nEvaluation ID: %s\n", resp.EvalID)
		return exitOK
	}
	return (&monitor{ui: c.ui, client: client, verbose: verbose}).run(ctx, resp.EvalID)
}

// JobRevertCommand is `drover job revert`.
type JobRevertCommand struct {
	meta
	ui *UI
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
	c.meta.ui = c.ui
	fs := c.flagSet("job revert", jobRevertHelp)
	var detach, verbose bool
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 2 {
		return c.usageError(fs, "This command takes two arguments: <job> <version>")
	}
	version, err := strconv.ParseUint(fs.Arg(1), 10, 64)
	if err != nil {
		return c.usageError(fs, "Version must be a non-negative whole number, got %q", fs.Arg(1))
	}
	client := c.client()
	ctx := context.Background()
	stub, err := resolveJob(ctx, client, fs.Arg(0))
	if err != nil {
		return c.ui.errorf("%s", lookupError("job", err))
	}
	q := url.Values{}
	if stub.Namespace != "" {
		q.Set("namespace", stub.Namespace)
	}
	req := structs.JobRevertRequest{JobID: stub.ID, JobVersion: version}
	var resp structs.JobRegisterResponse
	if err := client.Write(ctx, http.MethodPut, "/v1/job/"+escapeID(stub.ID)+"/revert", q, &req, &resp); err != nil {
		return c.ui.errorf("Error reverting job %q to version %d: %s", stub.ID, version, err)
	}
	if resp.EvalID == "" {
		return exitOK
	}
	if detach {
		c.ui.printf("%s\n", resp.EvalID)
		return exitOK
	}
	return (&monitor{ui: c.ui, client: client, verbose: verbose}).run(ctx, resp.EvalID)
}
