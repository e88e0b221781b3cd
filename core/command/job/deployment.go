package job

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// deploymentCommands are `drover deployment …`.
func deploymentCommands(ui *cli.UI) map[string]cli.Command {
	return map[string]cli.Command{
		"deployment list":    &DeploymentListCommand{ui: ui},
		"deployment status":  &DeploymentStatusCommand{ui: ui},
		"deployment promote": &DeploymentPromoteCommand{ui: ui},
		"deployment fail":    &DeploymentWriteCommand{ui: ui, verb: "fail"},
		"deployment pause":   &DeploymentWriteCommand{ui: ui, verb: "pause"},
		"deployment resume":  &DeploymentWriteCommand{ui: ui, verb: "resume"},
	}
}

// resolveDeployment finds the deployment an ID or ID prefix names, in any
// namespace the caller reads.
func resolveDeployment(ctx context.Context, c *cli.APIClient, prefix string) (*structs.Deployment, error) {
	if len(prefix) < 2 {
		return nil, errors.New("Deployment ID must contain at least two characters")
	}
	var ds []*structs.Deployment
	if _, err := c.Get(ctx, "/v1/deployments", cli.PrefixQuery(prefix, true), &ds); err != nil {
		return nil, err
	}
	for _, d := range ds {
		if d.ID == prefix {
			return d, nil
		}
	}
	switch len(ds) {
	case 0:
		return nil, fmt.Errorf("No deployment(s) with prefix or id %q found: %w", prefix, cli.ErrNoMatch)
	case 1:
		return ds[0], nil
	}
	return nil, &cli.AmbiguousError{Msg: "Prefix matched multiple deployments\n\n" + formatDeploymentList(ds, true)}
}

func formatDeploymentList(ds []*structs.Deployment, verbose bool) string {
	rows := []string{"ID|Job ID|Job Version|Status|Description"}
	for _, d := range ds {
		rows = append(rows, fmt.Sprintf("%s|%s|%d|%s|%s", cli.LimitID(d.ID, verbose), d.JobID, d.JobVersion, d.Status, d.StatusDescription))
	}
	return cli.FormatList(rows)
}

// formatDeployment renders a deployment as `deployment status` and the
// "Latest Deployment" section of `job status` show it.
func formatDeployment(d *structs.Deployment, verbose bool, withJob bool) string {
	kv := []string{"ID|" + cli.LimitID(d.ID, verbose)}
	if withJob {
		kv = append(kv, "Job ID|"+d.JobID, fmt.Sprintf("Job Version|%d", d.JobVersion))
	}
	kv = append(kv, "Status|"+d.Status, "Description|"+d.StatusDescription)
	return cli.FormatKV(kv) + "\n\nDeployed\n" + formatDeploymentGroups(d)
}

// formatDeploymentGroups is the per-group table; the revert, promotion and
// canary columns show only when a group uses them, as in Nomad.
func formatDeploymentGroups(d *structs.Deployment) string {
	var revert, canaries bool
	for _, s := range d.TaskGroups {
		revert = revert || s.AutoRevert
		canaries = canaries || s.DesiredCanaries > 0
	}
	header := []string{"Task Group"}
	if revert {
		header = append(header, "Auto Revert")
	}
	if canaries {
		header = append(header, "Promoted")
	}
	header = append(header, "Desired")
	if canaries {
		header = append(header, "Canaries")
	}
	header = append(header, "Placed", "Healthy", "Unhealthy", "Progress Deadline")
	rows := []string{strings.Join(header, "|")}
	for _, name := range d.SortedGroups() {
		s := d.TaskGroups[name]
		row := []string{name}
		if revert {
			row = append(row, fmt.Sprint(s.AutoRevert))
		}
		if canaries {
			if s.DesiredCanaries > 0 {
				row = append(row, fmt.Sprint(s.Promoted))
			} else {
				row = append(row, "N/A")
			}
		}
		row = append(row, fmt.Sprint(s.DesiredTotal))
		if canaries {
			row = append(row, fmt.Sprint(s.DesiredCanaries))
		}
		deadline := "N/A"
		if !s.RequireProgressBy.IsZero() {
			deadline = cli.FormatTime(s.RequireProgressBy)
		}
		row = append(row, fmt.Sprint(s.PlacedAllocs), fmt.Sprint(s.HealthyAllocs), fmt.Sprint(s.UnhealthyAllocs), deadline)
		rows = append(rows, strings.Join(row, "|"))
	}
	return cli.FormatList(rows)
}

// DeploymentListCommand is `drover deployment list`.
type DeploymentListCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *DeploymentListCommand) Synopsis() string { return "List all deployments" }

const deploymentListHelp = `
Usage: drover deployment list [options]

  Lists the deployments, newest first.

Deployment List Options:

  -json
    Print the API's JSON instead.

  -verbose
    Show full IDs.`

func (c *DeploymentListCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("deployment list", deploymentListHelp)
	var asJSON, verbose bool
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	client := c.Client()
	ctx := context.Background()
	if asJSON {
		return c.PrintJSON(ctx, client, "/v1/deployments", "deployments")
	}
	var ds []*structs.Deployment
	if _, err := client.Get(ctx, "/v1/deployments", nil, &ds); err != nil {
		return c.ui.Errorf("Error retrieving deployments: %s", err)
	}
	if len(ds) == 0 {
		c.ui.Printf("No deployments found\n")
		return cli.ExitOK
	}
	c.ui.Printf("%s\n", formatDeploymentList(ds, verbose))
	return cli.ExitOK
}

// DeploymentStatusCommand is `drover deployment status`.
type DeploymentStatusCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *DeploymentStatusCommand) Synopsis() string { return "Display the status of a deployment" }

const deploymentStatusHelp = `
Usage: drover deployment status [options] <deployment>

  Shows a deployment (by ID or ID prefix): its status and the progress of
  each task group.

Deployment Status Options:

  -json
    Print the API's JSON instead.

  -verbose
    Show full IDs.`

func (c *DeploymentStatusCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("deployment status", deploymentStatusHelp)
	var asJSON, verbose bool
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	arg, code, ok := c.ParseOne(fs, args, "<deployment>")
	if !ok {
		return code
	}
	client := c.Client()
	ctx := context.Background()
	d, err := resolveDeployment(ctx, client, arg)
	if err != nil {
		return c.ui.Errorf("%s", cli.LookupError("deployment", err))
	}
	if asJSON {
		return c.PrintJSON(ctx, client, "/v1/deployment/"+d.ID, "deployment")
	}
	c.ui.Printf("%s\n", formatDeployment(d, verbose, true))
	return cli.ExitOK
}

// DeploymentPromoteCommand is `drover deployment promote`.
type DeploymentPromoteCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *DeploymentPromoteCommand) Synopsis() string { return "Promote canaries in a deployment" }

const deploymentPromoteHelp = `
Usage: drover deployment promote [options] <deployment>

  Promotes the canaries of a deployment, of every task group or of the
  groups named with -group, so that the rest of the allocations roll out.

Promote Options:

  -group
    A task group to promote; repeat for several. Default: every group.`

func (c *DeploymentPromoteCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("deployment promote", deploymentPromoteHelp)
	var groups cli.StringList
	fs.Var(&groups, "group", "")
	arg, code, ok := c.ParseOne(fs, args, "<deployment>")
	if !ok {
		return code
	}
	body := map[string]any{"All": len(groups) == 0, "Groups": []string(groups)}
	return deploymentWrite(c.ui, c.Client(), arg, "promote", body)
}

// DeploymentWriteCommand is `drover deployment fail|pause|resume`.
type DeploymentWriteCommand struct {
	cli.Meta
	ui   *cli.UI
	verb string
}

func (c *DeploymentWriteCommand) Synopsis() string {
	return map[string]string{"fail": "Manually fail a deployment", "pause": "Pause a deployment",
		"resume": "Resume a paused deployment"}[c.verb]
}

func (c *DeploymentWriteCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("deployment "+c.verb, fmt.Sprintf(`
Usage: drover deployment %s [options] <deployment>

  %s (by ID or ID prefix).`, c.verb, c.Synopsis()))
	arg, code, ok := c.ParseOne(fs, args, "<deployment>")
	if !ok {
		return code
	}
	switch c.verb {
	case "pause":
		return deploymentWrite(c.ui, c.Client(), arg, "pause", map[string]any{"Pause": true})
	case "resume":
		return deploymentWrite(c.ui, c.Client(), arg, "pause", map[string]any{"Pause": false})
	}
	return deploymentWrite(c.ui, c.Client(), arg, "fail", map[string]any{})
}

// deploymentWrite sends one deployment write and reports its outcome as
// Nomad's CLI does.
func deploymentWrite(ui *cli.UI, client *cli.APIClient, arg, action string, body map[string]any) int {
	ctx := context.Background()
	d, err := resolveDeployment(ctx, client, arg)
	if err != nil {
		return ui.Errorf("%s", cli.LookupError("deployment", err))
	}
	body["DeploymentID"] = d.ID
	var resp structs.DeploymentUpdateResponse
	if err := client.Write(ctx, "PUT", "/v1/deployment/"+action+"/"+d.ID, nil, body, &resp); err != nil {
		return ui.Errorf("Error %s deployment: %s", map[string]string{"promote": "promoting", "fail": "failing", "pause": "pausing"}[action], err)
	}
	switch {
	case action == "fail" && resp.RevertedJobVersion != nil:
		ui.Printf("Deployment %q failed. Auto-reverted to job version %d.\n", cli.LimitID(d.ID, false), *resp.RevertedJobVersion)
	case action == "fail":
		ui.Printf("Deployment %q failed\n", cli.LimitID(d.ID, false))
	case action == "pause" && body["Pause"] == true:
		ui.Printf("Deployment %q paused\n", cli.LimitID(d.ID, false))
	case action == "pause":
		ui.Printf("Deployment %q resumed\n", cli.LimitID(d.ID, false))
	default:
		ui.Printf("Deployment %q promoted\n", cli.LimitID(d.ID, false))
	}
	if resp.EvalID != "" {
		ui.Printf("Evaluation ID: %s\n", cli.LimitID(resp.EvalID, false))
	}
	return cli.ExitOK
}

// latestDeploymentSection is the "Latest Deployment" section of `job
// status`, for a job whose type rolls out through deployments; "" when it
// has none.
func latestDeploymentSection(ctx context.Context, client *cli.APIClient, job *structs.Job, verbose bool) (string, error) {
	if job.TypeBehavior == nil || !job.TypeBehavior.Deployments {
		return "", nil
	}
	var d *structs.Deployment
	if _, err := client.Get(ctx, "/v1/job/"+cli.EscapeID(job.ID)+"/deployment", nil, &d); err != nil {
		return "", fmt.Errorf("Error querying latest job deployment: %w", err)
	}
	if d == nil {
		return "", nil
	}
	return "Latest Deployment\n" + formatDeployment(d, verbose, false), nil
}
