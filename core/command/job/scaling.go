package job

import (
	"encoding/json"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// The `drover scaling policy` commands over /v1/scaling/policies and
// /v1/scaling/policy/<id>: the groups' scaling blocks, as Nomad's.

func scalingCommands(ui *cli.UI) map[string]cli.Command {
	return map[string]cli.Command{
		"scaling policy list": &ScalingPolicyListCommand{ui: ui},
		"scaling policy info": &ScalingPolicyInfoCommand{ui: ui},
	}
}

// ScalingPolicyListCommand is `drover scaling policy list [-job] [-type] [-json]`.
type ScalingPolicyListCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *ScalingPolicyListCommand) Synopsis() string { return "List scaling policies" }

const scalingPolicyListHelp = `
Usage: drover scaling policy list [options]

  Lists the scaling policies of the namespace's jobs (-namespace,
  NOMAD_NAMESPACE; "*" lists every namespace the token may read): one
  per group with a scaling block.

List Options:

  -job <job_id>
    Lists only the policies of this job.

  -type <type>
    Lists only the policies whose type starts with this ("horizontal").

  -json
    Prints the policies as JSON.`

// scalingPolicyStub is an entry of /v1/scaling/policies.
type scalingPolicyStub struct {
	ID      string
	Enabled bool
	Type    string
	Target  map[string]string
}

func (c *ScalingPolicyListCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("scaling policy list", scalingPolicyListHelp)
	var asJSON bool
	var job, typ string
	fs.BoolVar(&asJSON, "json", false, "")
	fs.StringVar(&job, "job", "", "")
	fs.StringVar(&typ, "type", "", "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	q := url.Values{}
	if job != "" {
		q.Set("job", job)
	}
	if typ != "" {
		q.Set("type", typ)
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	if asJSON {
		raw, err := client.GetRaw(ctx, "/v1/scaling/policies", q)
		if err != nil {
			return c.ui.Errorf("Error listing scaling policies: %s", err)
		}
		c.ui.Printf("%s\n", cli.PrettyJSON(raw))
		return cli.ExitOK
	}
	var list []scalingPolicyStub
	if _, err := client.Get(ctx, "/v1/scaling/policies", q, &list); err != nil {
		return c.ui.Errorf("Error listing scaling policies: %s", err)
	}
	if len(list) == 0 {
		c.ui.Printf("No policies found\n")
		return cli.ExitOK
	}
	rows := []string{"ID|Enabled|Type|Target"}
	for _, p := range list {
		rows = append(rows, p.ID+"|"+strconv.FormatBool(p.Enabled)+"|"+p.Type+"|"+formatTarget(p.Target))
	}
	c.ui.Printf("%s\n", cli.FormatList(rows))
	return cli.ExitOK
}

// formatTarget renders a policy's target as Nomad's CLI does: key:value
// pairs, sorted by key.
func formatTarget(t map[string]string) string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+":"+t[k])
	}
	return strings.Join(parts, ",")
}

// ScalingPolicyInfoCommand is `drover scaling policy info [-json] <id>`.
type ScalingPolicyInfoCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *ScalingPolicyInfoCommand) Synopsis() string { return "Display an individual scaling policy" }

const scalingPolicyInfoHelp = `
Usage: drover scaling policy info [options] <policy_id>

  Shows a scaling policy: its target, its bounds and the policy an
  autoscaler reads.

Info Options:

  -json
    Prints the policy as JSON.`

func (c *ScalingPolicyInfoCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("scaling policy info", scalingPolicyInfoHelp)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "")
	id, code, ok := c.ParseOne(fs, args, "<policy_id>")
	if !ok {
		return code
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	path := "/v1/scaling/policy/" + url.PathEscape(id)
	if asJSON {
		return c.PrintJSON(ctx, client, path, "scaling policy")
	}
	var p structs.ScalingPolicy
	if _, err := client.Get(ctx, path, nil, &p); err != nil {
		return c.ui.Errorf("Error querying scaling policy: %s", err)
	}
	c.ui.Printf("%s\n", cli.FormatKV([]string{
		"ID|" + p.ID,
		"Enabled|" + strconv.FormatBool(p.Enabled),
		"Target|" + formatTarget(p.Target),
		"Min|" + strconv.FormatInt(p.Min, 10),
		"Max|" + strconv.FormatInt(p.Max, 10),
	}))
	policy := "No policy found"
	if len(p.Policy) > 0 {
		b, err := json.MarshalIndent(p.Policy, "", "  ")
		if err != nil {
			return c.ui.Errorf("Error formatting the policy: %s", err)
		}
		policy = string(b)
	}
	c.ui.Printf("\nPolicy:\n%s\n", policy)
	return cli.ExitOK
}
