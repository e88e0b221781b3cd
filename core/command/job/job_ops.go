package job

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// JobStopCommand is `drover job stop`.
type JobStopCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *JobStopCommand) Synopsis() string { return "Stop a running job" }

const jobStopHelp = `
Usage: drover job stop [options] <job>

  Stops the job's allocations and marks the job stopped, then monitors the
  evaluation. With -purge the job is removed from the state as well.

Stop Options:

  -purge
    Remove the job instead of keeping it as stopped.

  -detach
    Return right after the stop, printing the evaluation ID.

  -yes
    Do not ask for confirmation when <job> is a prefix of the job's ID.

  -verbose
    Show full IDs.`

func (c *JobStopCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("job stop", jobStopHelp)
	var purge, detach, yes, verbose bool
	fs.BoolVar(&purge, "purge", false, "")
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&yes, "yes", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	arg, code, ok := c.ParseOne(fs, args, "<job>")
	if !ok {
		return code
	}
	client := c.Client()
	ctx := context.Background()
	job, err := cli.ResolveJob(ctx, client, arg)
	if err != nil {
		return c.ui.Errorf("%s", cli.LookupError("job", err))
	}
	if job.ID != arg && !yes {
		if !cli.Confirm(c.ui, fmt.Sprintf("Are you sure you want to stop job %q? [y/N]", job.ID)) {
			c.ui.Printf("Cancelling job stop\n")
			return cli.ExitOK
		}
	}
	q := url.Values{}
	if purge {
		q.Set("purge", "true")
	}
	if job.Namespace != "" {
		q.Set("namespace", job.Namespace)
	}
	var resp structs.JobDeregisterResponse
	if err := client.Write(ctx, http.MethodDelete, "/v1/job/"+cli.EscapeID(job.ID), q, nil, &resp); err != nil {
		return c.ui.Errorf("Error deregistering job: %s", err)
	}
	if resp.EvalID == "" {
		return cli.ExitOK // periodic and parameterized parents have nothing to monitor
	}
	if detach {
		c.ui.Printf("%s\n", resp.EvalID)
		return cli.ExitOK
	}
	return (&cli.Monitor{UI: c.ui, Client: client, Verbose: verbose}).Run(ctx, resp.EvalID)
}

// JobDispatchCommand is `drover job dispatch`.
type JobDispatchCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *JobDispatchCommand) Synopsis() string { return "Dispatch an instance of a parameterized job" }

const jobDispatchHelp = `
Usage: drover job dispatch [options] <parameterized job> [input source]

  Dispatches a new instance of a parameterized job. The payload is read
  from the input source, a file path or "-" for standard input.

Dispatch Options:

  -meta <key>=<value>
    Metadata of the dispatched job; may be repeated.

  -id-prefix-template <text>
    Text put after "dispatch-" in the child's ID.

  -idempotency-token <token>
    Dispatch at most one child per token: a repeated dispatch with the
    same token returns the existing child.

  -detach
    Return right after dispatching, printing the evaluation ID.

  -verbose
    Show full IDs.`

func (c *JobDispatchCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("job dispatch", jobDispatchHelp)
	meta := cli.MetaFlags{}
	var detach, verbose bool
	var prefixTemplate, token string
	fs.Var(meta, "meta", "")
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	fs.StringVar(&prefixTemplate, "id-prefix-template", "", "")
	fs.StringVar(&token, "idempotency-token", "", "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return c.UsageError(fs, "This command takes one or two arguments: <parameterized job> [input source]")
	}
	var payload []byte
	if fs.NArg() == 2 {
		var err error
		if fs.Arg(1) == "-" {
			payload, err = io.ReadAll(c.ui.In)
		} else {
			payload, err = os.ReadFile(fs.Arg(1))
		}
		if err != nil {
			return c.ui.Errorf("Error reading input data: %s", err)
		}
	}
	client := c.Client()
	ctx := context.Background()
	q := url.Values{}
	if token != "" {
		q.Set("idempotency_token", token)
	}
	body := map[string]any{"Payload": payload, "Meta": map[string]string(meta), "IdPrefixTemplate": prefixTemplate}
	var resp structs.JobDispatchResponse
	if err := client.Write(ctx, http.MethodPut, "/v1/job/"+cli.EscapeID(fs.Arg(0))+"/dispatch", q, body, &resp); err != nil {
		return c.ui.Errorf("Failed to dispatch job: %s", err)
	}
	rows := []string{"Dispatched Job ID|" + resp.DispatchedJobID}
	if resp.EvalID != "" {
		rows = append(rows, "Evaluation ID|"+cli.LimitID(resp.EvalID, verbose || detach))
	}
	c.ui.Printf("%s\n", cli.FormatKV(rows))
	if detach || resp.EvalID == "" {
		return cli.ExitOK
	}
	c.ui.Printf("\n")
	return (&cli.Monitor{UI: c.ui, Client: client, Verbose: verbose}).Run(ctx, resp.EvalID)
}

// JobPeriodicForceCommand is `drover job periodic force`.
type JobPeriodicForceCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *JobPeriodicForceCommand) Synopsis() string {
	return "Force the launch of a periodic job now"
}

const jobPeriodicForceHelp = `
Usage: drover job periodic force [options] <job>

  Launches a child of the periodic job now, whatever its schedule, and
  monitors the child's evaluation.

Periodic Force Options:

  -detach
    Return right after the launch, printing the evaluation ID.

  -verbose
    Show full IDs.`

func (c *JobPeriodicForceCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("job periodic force", jobPeriodicForceHelp)
	var detach, verbose bool
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	arg, code, ok := c.ParseOne(fs, args, "<job>")
	if !ok {
		return code
	}
	client := c.Client()
	ctx := context.Background()
	job, err := cli.ResolveJob(ctx, client, arg)
	if err != nil {
		return c.ui.Errorf("%s", cli.LookupError("job", err))
	}
	if !job.Periodic {
		return c.ui.Errorf("Job %q is not periodic", job.ID)
	}
	var resp structs.PeriodicForceResponse
	q := url.Values{"namespace": {job.Namespace}}
	if err := client.Write(ctx, http.MethodPut, "/v1/job/"+cli.EscapeID(job.ID)+"/periodic/force", q, nil, &resp); err != nil {
		return c.ui.Errorf("Error forcing periodic job %q: %s", job.ID, err)
	}
	return c.FollowEval(ctx, client, resp.EvalID, "Force periodic successful", detach, verbose)
}

// JobEvalCommand is `drover job eval`.
type JobEvalCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *JobEvalCommand) Synopsis() string { return "Force an evaluation of a job" }

const jobEvalHelp = `
Usage: drover job eval [options] <job>

  Creates a new evaluation of the job, so its scheduler runs again, and
  monitors it.

Eval Options:

  -force-reschedule
    Reschedule the job's failed allocations now, whatever their reschedule
    policy and the attempts they used.

  -detach
    Return right after the evaluation is created, printing its ID.

  -verbose
    Show full IDs.`

func (c *JobEvalCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("job eval", jobEvalHelp)
	var force, detach, verbose bool
	fs.BoolVar(&force, "force-reschedule", false, "")
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	arg, code, ok := c.ParseOne(fs, args, "<job>")
	if !ok {
		return code
	}
	client := c.Client()
	ctx := context.Background()
	job, err := cli.ResolveJob(ctx, client, arg)
	if err != nil {
		return c.ui.Errorf("%s", cli.LookupError("job", err))
	}
	body := map[string]any{"JobID": job.ID, "EvalOptions": structs.EvalOptions{ForceReschedule: force}}
	var resp structs.JobRegisterResponse
	q := url.Values{"namespace": {job.Namespace}}
	if err := client.Write(ctx, http.MethodPut, "/v1/job/"+cli.EscapeID(job.ID)+"/evaluate", q, body, &resp); err != nil {
		return c.ui.Errorf("Error evaluating job %q: %s", job.ID, err)
	}
	return c.FollowEval(ctx, client, resp.EvalID, "Evaluation created", detach, verbose)
}

// JobInspectCommand is `drover job inspect`.
type JobInspectCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *JobInspectCommand) Synopsis() string { return "Inspect a submitted job" }

const jobInspectHelp = `
Usage: drover job inspect [options] <job>

  Prints the registered job as JSON, wrapped as {"Job": …} so that the
  output can be submitted to PUT /v1/jobs as it is.

Inspect Options:

  -version <n>
    Print version <n> of the job instead of the latest.

  -json
    Accepted for symmetry; the output is always JSON.`

func (c *JobInspectCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("job inspect", jobInspectHelp)
	version := fs.String("version", "", "")
	fs.Bool("json", true, "")
	arg, code, ok := c.ParseOne(fs, args, "<job>")
	if !ok {
		return code
	}
	client := c.Client()
	ctx := context.Background()
	stub, err := cli.ResolveJob(ctx, client, arg)
	if err != nil {
		return c.ui.Errorf("%s", cli.LookupError("job", err))
	}
	path := "/v1/job/" + cli.EscapeID(stub.ID)
	if *version == "" {
		var job json.RawMessage
		if _, err := client.Get(ctx, path, nil, &job); err != nil {
			return c.ui.Errorf("Error inspecting job: %s", err)
		}
		c.ui.Printf("%s\n", cli.ToJSON(map[string]any{"Job": job}))
		return cli.ExitOK
	}
	want, err := strconv.ParseUint(*version, 10, 64)
	if err != nil {
		return c.ui.Errorf("Error parsing version value %q: %s", *version, err)
	}
	var versions struct{ Versions []json.RawMessage }
	if _, err := client.Get(ctx, path+"/versions", nil, &versions); err != nil {
		return c.ui.Errorf("Error inspecting job: %s", err)
	}
	for _, raw := range versions.Versions {
		var v struct{ Version uint64 }
		if json.Unmarshal(raw, &v) == nil && v.Version == want {
			c.ui.Printf("%s\n", cli.ToJSON(map[string]any{"Job": raw}))
			return cli.ExitOK
		}
	}
	return c.ui.Errorf("Job %q has no version %d", stub.ID, want)
}
