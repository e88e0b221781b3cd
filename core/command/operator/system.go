package operator

import (
	"context"

	"github.com/drover-org/drover/core/command/cli"
)

// SystemGCCommand is `drover system gc`.
type SystemGCCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *SystemGCCommand) Synopsis() string { return "Run the garbage collector now" }

const systemGCHelp = `
Usage: drover system gc [options]

  Runs every garbage collection job of the cluster now, with a threshold of
  a millisecond: terminal evaluations and allocations, dead jobs, finished
  deployments, released volume claims, unused CSI plugins, expired tokens,
  and down nodes last. The leader runs them; the command waits until they
  are done and prints nothing on success.

  With ACLs enabled, this needs a management token.`

func (c *SystemGCCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("system gc", systemGCHelp)
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	// No deadline: a large cluster's collection takes what it takes, and
	// the caller can interrupt it.
	if err := c.Client().Write(context.Background(), "PUT", "/v1/system/gc", nil, struct{}{}, nil); err != nil {
		return c.ui.Errorf("Error running system garbage collection: %s", err)
	}
	return cli.ExitOK
}
