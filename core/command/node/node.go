package node

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// NodeStatusCommand is `drover node status`.
type NodeStatusCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *NodeStatusCommand) Synopsis() string { return "Display status information about nodes" }

const nodeStatusHelp = `
Usage: drover node status [options] [node]

  Without a node, lists the client nodes. With a node ID or ID prefix (or
  -self), shows the node, its events, its allocated resources and its
  allocations.

Node Status Options:

  -self
    Show the node of the agent the CLI talks to.

  -json
    Print the API's JSON instead.

  -verbose
    Show full IDs.`

func (c *NodeStatusCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("node status", nodeStatusHelp)
	var self, asJSON, verbose bool
	fs.BoolVar(&self, "self", false, "")
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 || (self && fs.NArg() > 0) {
		return c.UsageError(fs, "This command takes either no arguments, one <node>, or -self")
	}
	client := c.Client()
	ctx := context.Background()

	if fs.NArg() == 0 && !self {
		if asJSON {
			return c.PrintJSON(ctx, client, "/v1/nodes", "node status")
		}
		var nodes []*structs.NodeListStub
		if _, err := client.Get(ctx, "/v1/nodes", nil, &nodes); err != nil {
			return c.ui.Errorf("Error querying node status: %s", err)
		}
		if len(nodes) == 0 {
			c.ui.Printf("No nodes registered\n")
			return cli.ExitOK
		}
		c.ui.Printf("%s\n", cli.FormatNodeStubs(nodes, verbose))
		return cli.ExitOK
	}

	id, err := c.NodeArg(ctx, client, self, fs.Arg(0))
	if err != nil {
		return c.ui.Errorf("%s", err)
	}
	if asJSON {
		return c.PrintJSON(ctx, client, "/v1/node/"+id, "node info")
	}
	var node structs.Node
	if _, err := client.Get(ctx, "/v1/node/"+id, nil, &node); err != nil {
		return c.ui.Errorf("Error querying node info: %s", err)
	}
	var allocs []*structs.Allocation
	if _, err := client.Get(ctx, "/v1/node/"+id+"/allocations", nil, &allocs); err != nil {
		return c.ui.Errorf("Error querying node allocations: %s", err)
	}
	c.ui.Printf("%s\n", formatNodeStatus(&node, allocs, verbose, c.Now()))
	return cli.ExitOK
}

func formatNodeStatus(n *structs.Node, allocs []*structs.Allocation, verbose bool, now time.Time) string {
	var drivers []string
	for name, d := range n.Drivers {
		if d != nil && d.Detected && d.Healthy {
			drivers = append(drivers, name)
		}
	}
	sort.Strings(drivers)
	info := []string{
		"ID|" + cli.LimitID(n.ID, verbose),
		"Name|" + n.Name,
		"Node Pool|" + n.NodePool,
		"Class|" + cli.OrNone(n.NodeClass),
		"DC|" + n.Datacenter,
		fmt.Sprintf("Drain|%t", n.DrainStrategy != nil),
	}
	if d := n.DrainStrategy; d != nil {
		deadline := "none"
		switch {
		case d.Deadline < 0:
			deadline = "forced"
		case !d.ForceDeadline.IsZero():
			deadline = fmt.Sprintf("%s (%s)", cli.FormatTime(d.ForceDeadline), cli.PrettyTimeDiff(d.ForceDeadline, now))
		}
		info = append(info, "Drain Deadline|"+deadline, fmt.Sprintf("Drain Ignore System Jobs|%t", d.IgnoreSystemJobs))
	}
	info = append(info,
		"Eligibility|"+n.SchedulingEligibility,
		"Status|"+n.Status,
		"Host Volumes|"+hostVolumeNames(n),
		"Driver Status|"+cli.OrNone(strings.Join(drivers, ",")),
	)
	sections := []string{cli.FormatKV(info)}
	if hv := hostVolumesSection(n); verbose && hv != "" {
		sections = append(sections, hv)
	}

	if len(n.Events) > 0 {
		events := append([]*structs.NodeEvent(nil), n.Events...)
		sort.SliceStable(events, func(i, j int) bool { return events[i].Timestamp.After(events[j].Timestamp) })
		rows := []string{"Time|Subsystem|Message"}
		for _, e := range events {
			rows = append(rows, fmt.Sprintf("%s|%s|%s", cli.FormatTime(e.Timestamp), e.Subsystem, strings.ReplaceAll(e.Message, "|", "/")))
		}
		sections = append(sections, "Node Events\n"+cli.FormatList(rows))
	}

	var used structs.Resources
	stubs := make([]*structs.AllocListStub, 0, len(allocs))
	for _, a := range allocs {
		stubs = append(stubs, a.Stub())
		if !a.TerminalStatus() {
			r := a.ComparableResources()
			used.CPU += r.CPU
			used.MemoryMB += r.MemoryMB
			used.DiskMB += r.DiskMB
		}
	}
	capacity := n.Capacity()
	sections = append(sections, "Allocated Resources\n"+cli.FormatList([]string{
		"CPU|Memory|Disk",
		fmt.Sprintf("%d/%d MHz|%s/%s|%s/%s", used.CPU, capacity.CPU,
			cli.HumanMiB(int64(used.MemoryMB)), cli.HumanMiB(int64(capacity.MemoryMB)),
			cli.HumanMiB(int64(used.DiskMB)), cli.HumanMiB(int64(capacity.DiskMB))),
	}))
	if len(stubs) == 0 {
		sections = append(sections, "Allocations\nNo allocations placed")
	} else {
		sections = append(sections, "Allocations\n"+cli.FormatAllocStubs(stubs, verbose, now))
	}
	return strings.Join(sections, "\n\n")
}

// NodeEligibilityCommand is `drover node eligibility`.
type NodeEligibilityCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *NodeEligibilityCommand) Synopsis() string {
	return "Toggle a node's eligibility for new allocations"
}

const nodeEligibilityHelp = `
Usage: drover node eligibility [options] <node>

  Marks a node eligible or ineligible for new allocations. Allocations
  already on the node keep running.

Eligibility Options:

  -enable
    Make the node eligible.

  -disable
    Make the node ineligible.

  -self
    Act on the node of the agent the CLI talks to.`

func (c *NodeEligibilityCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("node eligibility", nodeEligibilityHelp)
	var enable, disable, self bool
	fs.BoolVar(&enable, "enable", false, "")
	fs.BoolVar(&disable, "disable", false, "")
	fs.BoolVar(&self, "self", false, "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if enable == disable {
		return c.UsageError(fs, "Either the '-enable' or '-disable' flag must be set")
	}
	if (self && fs.NArg() != 0) || (!self && fs.NArg() != 1) {
		return c.UsageError(fs, "This command takes one argument, <node>, or -self")
	}
	client := c.Client()
	ctx := context.Background()
	id, err := c.NodeArg(ctx, client, self, fs.Arg(0))
	if err != nil {
		return c.ui.Errorf("%s", err)
	}
	elig := structs.NodeSchedulingEligible
	if disable {
		elig = structs.NodeSchedulingIneligible
	}
	var resp structs.NodeEligibilityUpdateResponse
	if err := client.Write(ctx, http.MethodPost, "/v1/node/"+id+"/eligibility", nil, map[string]string{"Eligibility": elig}, &resp); err != nil {
		return c.ui.Errorf("Error updating scheduling eligibility: %s", err)
	}
	c.ui.Printf("Node %q scheduling eligibility set: %s for scheduling\n", id, elig)
	return cli.ExitOK
}
