package node

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// Drain defaults, as Nomad's: an hour before remaining allocations are
// stopped, and a forced drain is a negative deadline.
const (
	defaultDrainDeadline = time.Hour
	forcedDrainDeadline  = -1 * time.Nanosecond
	// drainPollWait bounds one blocking read of the drain monitor; the
	// drain's end is a node write that an alloc watch does not see, so the
	// monitor looks at the node at least this often.
	drainPollWait = 2 * time.Second
)

// NodeDrainCommand is `drover node drain`.
type NodeDrainCommand struct {
	cli.Meta
	ui *cli.UI
	// pollWait overrides drainPollWait in tests.
	pollWait time.Duration
}

func (c *NodeDrainCommand) Synopsis() string { return "Toggle drain mode on a given node" }

const nodeDrainHelp = `
Usage: drover node drain [options] <node>

  Starts or ends the drain of a node: a draining node takes no new
  allocations and its allocations are migrated elsewhere, at the latest by
  the deadline. Unless -detach, the command follows the drain until it
  ends.

Drain Options:

  -enable
    Start draining the node.

  -disable
    End the drain; the node becomes eligible again unless -keep-ineligible.

  -deadline <duration>
    Time after which remaining allocations are stopped. Default 1h.

  -no-deadline
    Never force the remaining allocations off.

  -force
    Stop every allocation immediately.

  -ignore-system
    Leave system and sysbatch allocations running.

  -keep-ineligible
    With -disable, leave the node ineligible.

  -meta <key>=<value>
    Metadata recorded with the drain; may be repeated.

  -detach
    Return right after starting the drain.

  -self
    Act on the node of the agent the CLI talks to.

  -yes
    Do not ask for confirmation when <node> is a prefix of the node's ID.`

func (c *NodeDrainCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("node drain", nodeDrainHelp)
	var enable, disable, noDeadline, force, ignoreSystem, keepIneligible, detach, self, yes bool
	deadline := defaultDrainDeadline
	meta := cli.MetaFlags{}
	fs.BoolVar(&enable, "enable", false, "")
	fs.BoolVar(&disable, "disable", false, "")
	fs.DurationVar(&deadline, "deadline", defaultDrainDeadline, "")
	fs.BoolVar(&noDeadline, "no-deadline", false, "")
	fs.BoolVar(&force, "force", false, "")
	fs.BoolVar(&ignoreSystem, "ignore-system", false, "")
	fs.BoolVar(&keepIneligible, "keep-ineligible", false, "")
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&self, "self", false, "")
	fs.BoolVar(&yes, "yes", false, "")
	fs.Var(meta, "meta", "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	deadlineSet := false
	fs.Visit(func(f *flag.Flag) { deadlineSet = deadlineSet || f.Name == "deadline" })

	switch {
	case enable == disable:
		return c.UsageError(fs, "Either the '-enable' or '-disable' flag must be set")
	case (self && fs.NArg() != 0) || (!self && fs.NArg() != 1):
		return c.UsageError(fs, "This command takes one argument, <node>, or -self")
	case disable && (deadlineSet || noDeadline || force || ignoreSystem):
		return c.UsageError(fs, "-deadline, -no-deadline, -force and -ignore-system are only valid with -enable")
	case countTrue(deadlineSet, noDeadline, force) > 1:
		return c.UsageError(fs, "Only one of -deadline, -no-deadline and -force may be given")
	case deadlineSet && deadline <= 0:
		return c.UsageError(fs, "A positive -deadline is required; use -force to drain immediately")
	}

	client := c.Client()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	id, err := c.NodeArg(ctx, client, self, fs.Arg(0))
	if err != nil {
		return c.ui.Errorf("%s", err)
	}
	if !self && id != fs.Arg(0) && !yes {
		verb := "enable"
		if disable {
			verb = "disable"
		}
		if !cli.Confirm(c.ui, fmt.Sprintf("Are you sure you want to %s drain mode for node %q? [y/N]", verb, id)) {
			c.ui.Printf("Canceling drain toggle\n")
			return cli.ExitOK
		}
	}

	body := map[string]any{"DrainSpec": nil, "MarkEligible": !keepIneligible, "Meta": map[string]string(meta)}
	if enable {
		spec := structs.DrainSpec{Deadline: deadline, IgnoreSystemJobs: ignoreSystem}
		switch {
		case force:
			spec.Deadline = forcedDrainDeadline
		case noDeadline:
			spec.Deadline = 0
		}
		body = map[string]any{"DrainSpec": spec, "MarkEligible": false, "Meta": map[string]string(meta)}
	}
	var resp structs.NodeEligibilityUpdateResponse
	if err := client.Write(ctx, http.MethodPost, "/v1/node/"+id+"/drain", nil, body, &resp); err != nil {
		return c.ui.Errorf("Error updating drain specification: %s", err)
	}
	if disable {
		c.ui.Printf("Node %q drain strategy unset\n", id)
		return cli.ExitOK
	}
	c.ui.Printf("Node %q drain strategy set\n", id)
	if detach {
		return cli.ExitOK
	}
	return c.monitorDrain(ctx, client, id)
}

// monitorDrain follows a drain until the node's drain strategy is gone,
// printing what happens to the node's allocations.
func (c *NodeDrainCommand) monitorDrain(ctx context.Context, client *cli.APIClient, nodeID string) int {
	c.ui.Printf("==> Monitoring node %q: Ctrl-C to stop monitoring; it will not cancel the drain\n", nodeID)
	wait := c.pollWait
	if wait <= 0 {
		wait = drainPollWait
	}
	seen := map[string]string{}
	migrating := map[string]bool{}
	// Allocs already finished when first seen are not part of this drain,
	// even if an earlier drain marked them: they are never reported.
	finished := map[string]bool{}
	allStopped := false
	var index uint64
	// A drain outlives leader elections: their 503s, and an agent that
	// refuses connections for a moment, are retried with backoff.
	retry := cli.NewRetrier()
	for {
		var (
			allocs []*structs.Allocation
			meta   cli.QueryMeta
		)
		err := retry.Do(ctx, func() (err error) {
			allocs = nil
			meta, err = client.BlockingGet(ctx, "/v1/node/"+nodeID+"/allocations", index, wait, &allocs)
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return cli.ExitOK
			}
			return c.ui.Errorf("Error monitoring node: %s", err)
		}
		index = meta.LastIndex
		live := 0
		for _, a := range allocs {
			if _, known := seen[a.ID]; !known && a.ClientTerminalStatus() {
				finished[a.ID] = true
			}
			if finished[a.ID] {
				seen[a.ID] = a.ClientStatus
				continue
			}
			// A mark that lands on an alloc that had already finished by
			// itself (the drainer raced its client) migrates nothing.
			if a.DesiredTransition.ShouldMigrate() && !migrating[a.ID] && !a.ClientTerminalStatus() {
				migrating[a.ID] = true
				c.ui.Printf("    Alloc %q marked for migration\n", cli.LimitID(a.ID, false))
			}
			if prev, ok := seen[a.ID]; ok && prev != a.ClientStatus {
				c.ui.Printf("    Alloc %q status %s -> %s\n", cli.LimitID(a.ID, false), prev, a.ClientStatus)
			}
			seen[a.ID] = a.ClientStatus
			if !a.ClientTerminalStatus() {
				live++
			}
		}
		if live == 0 && !allStopped && len(migrating) > 0 {
			allStopped = true
			c.ui.Printf("    All allocations on node %q have stopped\n", nodeID)
		}

		var node structs.Node
		err = retry.Do(ctx, func() error {
			node = structs.Node{}
			_, err := client.Get(ctx, "/v1/node/"+nodeID, nil, &node)
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return cli.ExitOK
			}
			return c.ui.Errorf("Error monitoring node: %s", err)
		}
		if node.DrainStrategy == nil {
			c.ui.Printf("==> Drain complete for node %q\n", nodeID)
			return cli.ExitOK
		}
	}
}

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
