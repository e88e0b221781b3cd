package command

import "context"

// SystemGCCommand is `drover system gc`.
type SystemGCCommand struct {
	meta
	ui *UI
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
	c.meta.ui = c.ui
	fs := c.flagSet("system gc", systemGCHelp)
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return c.usageError(fs, "This command takes no arguments")
	}
	// No deadline: a large cluster's collection takes what it takes, and
	// the caller can interrupt it.
	if err := c.client().Write(context.Background(), "PUT", "/v1/system/gc", nil, struct{}{}, nil); err != nil {
		return c.ui.errorf("Error running system garbage collection: %s", err)
	}
	return exitOK
}
