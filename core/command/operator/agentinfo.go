package operator

import (
	"context"
	"sort"
	"strings"

	"github.com/drover-org/drover/core/command/cli"
)

// AgentInfoCommand is `drover agent-info`: the stats sections of
// /v1/agent/self, as Nomad's `nomad agent-info` prints them.
type AgentInfoCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *AgentInfoCommand) Synopsis() string {
	return "Display status information about the local agent"
}

const agentInfoHelp = `
Usage: drover agent-info [options]

  Displays status information about the agent the CLI talks to: its
  client, the server's leadership, Raft and the Go runtime, one section
  each. Needs agent:read with ACLs on.

Agent Info Options:

  -json
    Print the API's JSON instead.`

// agentSelf is the part of GET /v1/agent/self this command reads.
type agentSelf struct {
	Stats map[string]map[string]string `json:"stats"`
}

func (c *AgentInfoCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("agent-info", agentInfoHelp)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	client := c.Client()
	ctx := context.Background()
	if asJSON {
		return c.PrintJSON(ctx, client, "/v1/agent/self", "agent info")
	}
	var self agentSelf
	if _, err := client.Get(ctx, "/v1/agent/self", nil, &self); err != nil {
		return c.ui.Errorf("Error querying agent info: %s", err)
	}
	c.ui.Printf("%s", formatAgentStats(self.Stats))
	return cli.ExitOK
}

// formatAgentStats prints each section by name, then its "key = value"
// lines, both sorted, as Nomad's agent-info does.
func formatAgentStats(stats map[string]map[string]string) string {
	var b strings.Builder
	sections := make([]string, 0, len(stats))
	for name := range stats {
		sections = append(sections, name)
	}
	sort.Strings(sections)
	for _, name := range sections {
		b.WriteString(name + "\n")
		keys := make([]string, 0, len(stats[name]))
		for k := range stats[name] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			b.WriteString("  " + k + " = " + stats[name][k] + "\n")
		}
	}
	return b.String()
}
