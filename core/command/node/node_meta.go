package node

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/drover-org/drover/core/client/clientapi"
	"github.com/drover-org/drover/core/command/cli"
)

// metaCommands are `drover node meta read|apply`.
func metaCommands(ui *cli.UI) map[string]cli.Command {
	return map[string]cli.Command{
		"node meta read":  &NodeMetaReadCommand{ui: ui},
		"node meta apply": &NodeMetaApplyCommand{ui: ui},
	}
}

// nodeMetaTarget resolves -node-id (an ID prefix), or the agent's own
// node when it is empty.
func nodeMetaTarget(ctx context.Context, m *cli.Meta, client *cli.APIClient, nodeID string) (string, error) {
	return m.NodeArg(ctx, client, nodeID == "", nodeID)
}

// NodeMetaReadCommand is `drover node meta read`.
type NodeMetaReadCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *NodeMetaReadCommand) Synopsis() string { return "Read node metadata" }

const nodeMetaReadHelp = `
Usage: drover node meta read [-node-id <id>] [-json]

  Prints a node's metadata: all of it, the keys set dynamically (node meta
  apply), and those of its agent's configuration. Without -node-id, the
  node of the agent the command talks to.

Read Options:

  -node-id <id>
    The node (an ID prefix).

  -json
    Print the metadata as JSON.`

func (c *NodeMetaReadCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("node meta read", nodeMetaReadHelp)
	var nodeID string
	var asJSON bool
	fs.StringVar(&nodeID, "node-id", "", "")
	fs.BoolVar(&asJSON, "json", false, "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return c.UsageError(fs, "This command takes no arguments")
	}
	client := c.Client()
	ctx := context.Background()
	id, err := nodeMetaTarget(ctx, &c.Meta, client, nodeID)
	if err != nil {
		return c.ui.Errorf("%s", err)
	}
	var resp clientapi.NodeMetaResponse
	if _, err := client.Get(ctx, "/v1/client/metadata", url.Values{"node_id": {id}}, &resp); err != nil {
		return c.ui.Errorf("Error reading dynamic node metadata: %s", err)
	}
	if asJSON {
		c.ui.Printf("%s\n", cli.ToJSON(resp))
		return cli.ExitOK
	}
	dyn := map[string]string{}
	for k, v := range resp.Dynamic {
		if v == nil {
			dyn[k] = "<unset>"
		} else {
			dyn[k] = *v
		}
	}
	c.ui.Printf("All Meta\n%s\n\nDynamic Meta\n%s\n\nStatic Meta\n%s\n", metaKV(resp.Meta), metaKV(dyn), metaKV(resp.Static))
	return cli.ExitOK
}

func metaKV(m map[string]string) string {
	if len(m) == 0 {
		return "<none>"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rows := make([]string, 0, len(keys))
	for _, k := range keys {
		rows = append(rows, k+"|"+m[k])
	}
	return cli.FormatKV(rows)
}

// NodeMetaApplyCommand is `drover node meta apply`.
type NodeMetaApplyCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *NodeMetaApplyCommand) Synopsis() string { return "Modify node metadata" }

const nodeMetaApplyHelp = `
Usage: drover node meta apply [-node-id <id>] [-unset <key>,...] <key>=<value>...

  Sets (and with -unset removes) dynamic metadata of a node. The node keeps
  it across restarts and the scheduler sees it at once. Without -node-id,
  the node of the agent the command talks to.

Apply Options:

  -node-id <id>
    The node (an ID prefix).

  -unset <key>,...
    Keys to remove; a key of the agent's configuration is hidden.`

func (c *NodeMetaApplyCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("node meta apply", nodeMetaApplyHelp)
	var nodeID, unset string
	fs.StringVar(&nodeID, "node-id", "", "")
	fs.StringVar(&unset, "unset", "", "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	meta := map[string]*string{}
	for _, kv := range fs.Args() {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return c.UsageError(fs, "Metadata must be given as key=value, not %q", kv)
		}
		meta[k] = &v
	}
	for _, k := range strings.Split(unset, ",") {
		if k = strings.TrimSpace(k); k != "" {
			if _, set := meta[k]; set {
				return c.UsageError(fs, "Key %q is both set and unset", k)
			}
			meta[k] = nil
		}
	}
	if len(meta) == 0 {
		return c.UsageError(fs, "Nothing to apply: give key=value pairs or -unset")
	}
	client := c.Client()
	ctx := context.Background()
	id, err := nodeMetaTarget(ctx, &c.Meta, client, nodeID)
	if err != nil {
		return c.ui.Errorf("%s", err)
	}
	req := clientapi.NodeMetaApplyRequest{NodeID: id, Meta: meta}
	if err := client.Write(ctx, http.MethodPost, "/v1/client/metadata", url.Values{"node_id": {id}}, req, nil); err != nil {
		return c.ui.Errorf("Error applying dynamic node metadata: %s", err)
	}
	return cli.ExitOK
}
