package node

import (
	"net/url"
	"sort"
	"strconv"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// The `drover node pool` commands over /v1/node/pool(s).

func nodePoolCommands(ui *cli.UI) map[string]cli.Command {
	return map[string]cli.Command{
		"node pool apply":  &NodePoolApplyCommand{ui: ui},
		"node pool list":   &NodePoolListCommand{ui: ui},
		"node pool info":   &NodePoolInfoCommand{ui: ui},
		"node pool delete": &NodePoolDeleteCommand{ui: ui},
		"node pool nodes":  &NodePoolNodesCommand{ui: ui},
		"node pool jobs":   &NodePoolJobsCommand{ui: ui},
	}
}

func nodePoolPath(name string) string { return "/v1/node/pool/" + cli.EscapeID(name) }

// NodePoolApplyCommand is `drover node pool apply <file>`.
type NodePoolApplyCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *NodePoolApplyCommand) Synopsis() string { return "Create or update a node pool" }

const nodePoolApplyHelp = `
Usage: drover node pool apply [options] <file>

  Creates a node pool, or updates one, from a specification file ("-"
  reads standard input): Nomad's HCL form, or the JSON API object as
  'drover node pool info -json' prints it. The file is the whole pool: a
  description or metadata it leaves out is removed.

    node_pool "prod" {
      description = "Production nodes"
      meta {
        owner = "ops"
      }
    }

  The built-in pools "default" and "all" cannot be modified.`

func (c *NodePoolApplyCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("node pool apply", nodePoolApplyHelp)
	path, code, ok := c.ParseOne(fs, args, "<file>")
	if !ok {
		return code
	}
	p, err := readNodePoolFile(c.ui.In, path)
	if err != nil {
		return c.ui.Errorf("Error parsing node pool file:\n%s", err)
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	if err := c.Client().Write(ctx, "PUT", "/v1/node/pools", nil, p, nil); err != nil {
		return c.ui.Errorf("Error applying node pool %q: %s", p.Name, err)
	}
	c.ui.Printf("Successfully applied node pool %q!\n", p.Name)
	return cli.ExitOK
}

// NodePoolListCommand is `drover node pool list [-json] [-prefix p]`.
type NodePoolListCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *NodePoolListCommand) Synopsis() string { return "List node pools" }

const nodePoolListHelp = `
Usage: drover node pool list [options]

  Lists the node pools, the built-in "all" and "default" included.

List Options:

  -json
    Prints the node pools as JSON.

  -prefix <prefix>
    Lists only the node pools whose name starts with prefix.`

func (c *NodePoolListCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("node pool list", nodePoolListHelp)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "")
	prefix := fs.String("prefix", "", "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	q := url.Values{}
	if *prefix != "" {
		q.Set("prefix", *prefix)
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	if asJSON {
		raw, err := client.GetRaw(ctx, "/v1/node/pools", q)
		if err != nil {
			return c.ui.Errorf("Error querying node pools: %s", err)
		}
		c.ui.Printf("%s\n", cli.PrettyJSON(raw))
		return cli.ExitOK
	}
	var list []*structs.NodePool
	if _, err := client.Get(ctx, "/v1/node/pools", q, &list); err != nil {
		return c.ui.Errorf("Error querying node pools: %s", err)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	rows := []string{"Name|Description"}
	for _, p := range list {
		rows = append(rows, p.Name+"|"+p.Description)
	}
	c.ui.Printf("%s\n", cli.FormatList(rows))
	return cli.ExitOK
}

// NodePoolInfoCommand is `drover node pool info [-json] <name>`.
type NodePoolInfoCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *NodePoolInfoCommand) Synopsis() string { return "Fetch information on a node pool" }

const nodePoolInfoHelp = `
Usage: drover node pool info [options] <name>

  Shows a node pool: its description, metadata and scheduler
  configuration.

Info Options:

  -json
    Prints the node pool as JSON.`

func (c *NodePoolInfoCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("node pool info", nodePoolInfoHelp)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "")
	name, code, ok := c.ParseOne(fs, args, "<name>")
	if !ok {
		return code
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	if asJSON {
		return c.PrintJSON(ctx, client, nodePoolPath(name), "node pool")
	}
	var p structs.NodePool
	if _, err := client.Get(ctx, nodePoolPath(name), nil, &p); err != nil {
		return c.ui.Errorf("Error reading node pool %q: %s", name, err)
	}
	c.ui.Printf("%s\n", formatNodePool(&p))
	return cli.ExitOK
}

func formatNodePool(p *structs.NodePool) string {
	out := cli.FormatKV([]string{"Name|" + p.Name, "Description|" + p.Description})
	if len(p.Meta) > 0 {
		keys := make([]string, 0, len(p.Meta))
		for k := range p.Meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		rows := make([]string, 0, len(keys))
		for _, k := range keys {
			rows = append(rows, k+"|"+p.Meta[k])
		}
		out += "\n\nMetadata\n" + cli.FormatKV(rows)
	}
	if sc := p.SchedulerConfiguration; sc != nil {
		var rows []string
		if sc.SchedulerAlgorithm != "" {
			rows = append(rows, "Scheduler Algorithm|"+sc.SchedulerAlgorithm)
		}
		if sc.MemoryOversubscriptionEnabled != nil {
			rows = append(rows, "Memory Oversubscription Enabled|"+strconv.FormatBool(*sc.MemoryOversubscriptionEnabled))
		}
		if len(rows) > 0 {
			out += "\n\nScheduler Configuration\n" + cli.FormatKV(rows)
		}
	}
	return out
}

// NodePoolDeleteCommand is `drover node pool delete <name>`.
type NodePoolDeleteCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *NodePoolDeleteCommand) Synopsis() string { return "Delete a node pool" }

const nodePoolDeleteHelp = `
Usage: drover node pool delete [options] <name>

  Deletes a node pool. The built-in pools, and pools that still have nodes
  or non-terminal jobs, cannot be deleted.`

func (c *NodePoolDeleteCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("node pool delete", nodePoolDeleteHelp)
	name, code, ok := c.ParseOne(fs, args, "<name>")
	if !ok {
		return code
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	if err := c.Client().Write(ctx, "DELETE", nodePoolPath(name), nil, nil, nil); err != nil {
		return c.ui.Errorf("Error deleting node pool %q: %s", name, err)
	}
	c.ui.Printf("Successfully deleted node pool %q!\n", name)
	return cli.ExitOK
}

// NodePoolNodesCommand is `drover node pool nodes [-json] [-verbose] <name>`.
type NodePoolNodesCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *NodePoolNodesCommand) Synopsis() string { return "Fetch a list of nodes in a node pool" }

const nodePoolNodesHelp = `
Usage: drover node pool nodes [options] <name>

  Lists the nodes of a node pool ("all": every node).

Nodes Options:

  -json
    Prints the nodes as JSON.

  -verbose
    Shows full node IDs.`

func (c *NodePoolNodesCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("node pool nodes", nodePoolNodesHelp)
	var asJSON, verbose bool
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	name, code, ok := c.ParseOne(fs, args, "<name>")
	if !ok {
		return code
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	path := nodePoolPath(name) + "/nodes"
	if asJSON {
		return c.PrintJSON(ctx, client, path, "node pool nodes")
	}
	var nodes []*structs.NodeListStub
	if _, err := client.Get(ctx, path, nil, &nodes); err != nil {
		return c.ui.Errorf("Error querying nodes of node pool %q: %s", name, err)
	}
	if len(nodes) == 0 {
		c.ui.Printf("No nodes in node pool %q\n", name)
		return cli.ExitOK
	}
	c.ui.Printf("%s\n", cli.FormatNodeStubs(nodes, verbose))
	return cli.ExitOK
}

// NodePoolJobsCommand is `drover node pool jobs [-json] <name>`.
type NodePoolJobsCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *NodePoolJobsCommand) Synopsis() string { return "Fetch a list of jobs in a node pool" }

const nodePoolJobsHelp = `
Usage: drover node pool jobs [options] <name>

  Lists the jobs that run in a node pool ("all": every job), of every
  namespace the token may list jobs in unless -namespace is given.

Jobs Options:

  -json
    Prints the jobs as JSON.`

func (c *NodePoolJobsCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("node pool jobs", nodePoolJobsHelp)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "")
	name, code, ok := c.ParseOne(fs, args, "<name>")
	if !ok {
		return code
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	if client.Namespace == "" {
		client.Namespace = "*"
	}
	path := nodePoolPath(name) + "/jobs"
	if asJSON {
		return c.PrintJSON(ctx, client, path, "node pool jobs")
	}
	var jobs []*structs.JobListStub
	if _, err := client.Get(ctx, path, nil, &jobs); err != nil {
		return c.ui.Errorf("Error querying jobs of node pool %q: %s", name, err)
	}
	if len(jobs) == 0 {
		c.ui.Printf("No jobs in node pool %q\n", name)
		return cli.ExitOK
	}
	c.ui.Printf("%s\n", cli.FormatJobList(jobs, true))
	return cli.ExitOK
}
