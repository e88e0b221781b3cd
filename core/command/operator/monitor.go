package operator

import (
	"context"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"

	"github.com/drover-org/drover/core/command/cli"
)

// MonitorCommand is `drover monitor`: the agent's log lines as they are
// written (GET /v1/agent/monitor?plain=true), until interrupted.
type MonitorCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *MonitorCommand) Synopsis() string { return "Stream logs from a drover agent" }

const monitorHelp = `
Usage: drover monitor [options]

  Streams the log lines of the agent the CLI talks to, from now on, until
  interrupted. A reader too slow for the agent loses lines, and the stream
  says how many. Needs agent:read with ACLs on.

Monitor Options:

  -log-level=<level>
    The lowest level shown: trace, debug, info (the default), warn, error.

  -json
    Each line as a JSON object.`

func (c *MonitorCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("monitor", monitorHelp)
	var level string
	var asJSON bool
	fs.StringVar(&level, "log-level", "info", "")
	fs.BoolVar(&asJSON, "json", false, "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	q := url.Values{"plain": {"true"}, "log_level": {strings.ToLower(level)}}
	if asJSON {
		q.Set("log_json", "true")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	body, err := c.Client().Stream(ctx, "/v1/agent/monitor", q)
	if err != nil {
		return c.ui.Errorf("Error starting monitor: %s", err)
	}
	defer body.Close()
	if _, err := io.Copy(c.ui.Out, body); err != nil && ctx.Err() == nil {
		return c.ui.Errorf("Monitor ended: %s", err)
	}
	return cli.ExitOK
}
