package command

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/drover-org/drover/core/structs"
)

// deploymentCommands are `drover deployment …`.
func deploymentCommands(ui *UI) map[string]Command {
	return map[string]Command{
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
func resolveDeployment(ctx context.Context, c *APIClient, prefix string) (*structs.Deployment, error) {
	if len(prefix) < 2 {
		return nil, errors.New("Deployment ID must contain at least two characters")
	}
	var ds []*structs.Deployment
	if _, err := c.Get(ctx, "/v1/deployments", prefixQuery(prefix, true), &ds); err != nil {
		return nil, err
	}
	for _, d := range ds {
		if d.ID == prefix {
			return d, nil
		}
	}
	switch len(ds) {
	case 0:
		return nil, fmt.Errorf("No deployment(s) with prefix or id %q found: %w", prefix, errNoMatch)
	case 1:
		return ds[0], nil
	}
	return nil, &ambiguousError{msg: "Prefix matched multiple deployments\n\n" + formatDeploymentList(ds, true)}
}

func formatDeploymentList(ds []*structs.Deployment, verbose bool) string {
	rows := []string{"ID|Job ID|Job Version|Status|Description"}
	for _, d := range ds {
		rows = append(rows, fmt.Sprintf("%s|%s|%d|%s|%s", limitID(d.ID, verbose), d.JobID, d.JobVersion, d.Status, d.StatusDescription))
	}
	return formatList(rows)
}

// formatDeployment renders a deployment as `deployment status` and the
// "Latest Deployment" section of `job status` show it.
func formatDeployment(d *structs.Deployment, verbose bool, withJob bool) string {
	kv := []string{"ID|" + limitID(d.ID, verbose)}
	if withJob {
		kv = append(kv, "Job ID|"+d.JobID, fmt.Sprintf("Job Version|%d", d.JobVersion))
	}
	kv = append(kv, "Status|"+d.Status, "Description|"+d.StatusDescription)
	return formatKV(kv) + "\n\nDeployed\n" + formatDeploymentGroups(d)
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
			deadline = formatTime(s.RequireProgressBy)
		}
		row = append(row, fmt.Sprint(s.PlacedAllocs), fmt.Sprint(s.HealthyAllocs), fmt.Sprint(s.UnhealthyAllocs), deadline)
		rows = append(rows, strings.Join(row, "|"))
	}
	return formatList(rows)
}

// DeploymentListCommand is `drover deployment list`.
type DeploymentListCommand struct {
	meta
	ui *UI
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
	c.meta.ui = c.ui
	fs := c.flagSet("deployment list", deploymentListHelp)
	var asJSON, verbose bool
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return c.usageError(fs, "This command takes no arguments")
	}
	client := c.client()
	ctx := context.Background()
	if asJSON {
		return c.printJSON(ctx, client, "/v1/deployments", "deployments")
	}
	var ds []*structs.Deployment
	if _, err := client.Get(ctx, "/v1/deployments", nil, &ds); err != nil {
		return c.ui.errorf("Error retrieving deployments: %s", err)
	}
	if len(ds) == 0 {
		c.ui.printf("No deployments found\n")
		return exitOK
	}
	c.ui.printf("%s\n", formatDeploymentList(ds, verbose))
	return exitOK
}

// DeploymentStatusCommand is `drover deployment status`.
type DeploymentStatusCommand struct {
	meta
	ui *UI
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
	c.meta.ui = c.ui
	fs := c.flagSet("deployment status", deploymentStatusHelp)
	var asJSON, verbose bool
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	arg, code, ok := c.parseOne(fs, args, "<deployment>")
	if !ok {
		return code
	}
	client := c.client()
	ctx := context.Background()
	d, err := resolveDeployment(ctx, client, arg)
	if err != nil {
		return c.ui.errorf("%s", lookupError("deployment", err))
	}
	if asJSON {
		return c.printJSON(ctx, client, "/v1/deployment/"+d.ID, "deployment")
	}
	c.ui.printf("%s\n", formatDeployment(d, verbose, true))
	return exitOK
}

// DeploymentPromoteCommand is `drover deployment promote`.
type DeploymentPromoteCommand struct {
	meta
	ui *UI
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
	c.meta.ui = c.ui
	fs := c.flagSet("deployment promote", deploymentPromoteHelp)
	var groups stringList
	fs.Var(&groups, "group", "")
	arg, code, ok := c.parseOne(fs, args, "<deployment>")
	if !ok {
		return code
	}
	body := map[string]any{"All": len(groups) == 0, "Groups": []string(groups)}
	return deploymentWrite(c.ui, c.client(), arg, "promote", body)
}

// DeploymentWriteCommand is `drover deployment fail|pause|resume`.
type DeploymentWriteCommand struct {
	meta
	ui   *UI
	verb string
}

func (c *DeploymentWriteCommand) Synopsis() string {
	return map[string]string{"fail": "Manually fail a deployment", "pause": "Pause a deployment",
		"resume": "Resume a paused deployment"}[c.verb]
}

func (c *DeploymentWriteCommand) Run(args []string) int {
	c.meta.ui = c.ui
	fs := c.flagSet("deployment "+c.verb, fmt.Sprintf(`
Usage: drover deployment %s [options] <deployment>

  %s (by ID or ID prefix).`, c.verb, c.Synopsis()))
	arg, code, ok := c.parseOne(fs, args, "<deployment>")
	if !ok {
		return code
	}
	switch c.verb {
	case "pause":
		return deploymentWrite(c.ui, c.client(), arg, "pause", map[string]any{"Pause": true})
	case "resume":
		return deploymentWrite(c.ui, c.client(), arg, "pause", map[string]any{"Pause": false})
	}
	return deploymentWrite(c.ui, c.client(), arg, "fail", map[string]any{})
}

// deploymentWrite sends one deployment write and reports its outcome as
// Nomad's CLI does.
func deploymentWrite(ui *UI, client *APIClient, arg, action string, body map[string]any) int {
	ctx := context.Background()
	d, err := resolveDeployment(ctx, client, arg)
	if err != nil {
		return ui.errorf("%s", lookupError("deployment", err))
	}
	body["DeploymentID"] = d.ID
	var resp structs.DeploymentUpdateResponse
	if err := client.Write(ctx, "PUT", "/v1/deployment/"+action+"/"+d.ID, nil, body, &resp); err != nil {
		return ui.errorf("Error %s deployment: %s", map[string]string{"promote": "promoting", "fail": "failing", "pause": "pausing"}[action], err)
	}
	switch {
	case action == "fail" && resp.RevertedJobVersion != nil:
		ui.printf("Deployment %q failed. Auto-reverted to job version %d.\n", limitID(d.ID, false), *resp.RevertedJobVersion)
	case action == "fail":
		ui.printf("Deployment %q failed\n", limitID(d.ID, false))
	case action == "pause" && body["Pause"] == true:
		ui.printf("Deployment %q paused\n", limitID(d.ID, false))
	case action == "pause":
		ui.printf("Deployment %q resumed\n", limitID(d.ID, false))
	default:
		ui.printf("Deployment %q promoted\n", limitID(d.ID, false))
	}
	if resp.EvalID != "" {
		ui.printf("Evaluation ID: %s\n", limitID(resp.EvalID, false))
	}
	return exitOK
}

// latestDeploymentSection is the "Latest Deployment" section of `job
// status`, for a job whose type rolls out through deployments; "" when it
// has none.
func latestDeploymentSection(ctx context.Context, client *APIClient, job *structs.Job, verbose bool) (string, error) {
	if job.TypeBehavior == nil || !job.TypeBehavior.Deployments {
		return "", nil
	}
	var d *structs.Deployment
	if _, err := client.Get(ctx, "/v1/job/"+escapeID(job.ID)+"/deployment", nil, &d); err != nil {
		return "", fmt.Errorf("Error querying latest job deployment: %w", err)
	}
	if d == nil {
		return "", nil
	}
	return "Latest Deployment\n" + formatDeployment(d, verbose, false), nil
}
