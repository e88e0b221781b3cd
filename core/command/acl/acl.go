package acl

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// ACLBootstrapCommand is `drover acl bootstrap [-json] [<secret file>]`.
type ACLBootstrapCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *ACLBootstrapCommand) Synopsis() string { return "Bootstrap the ACL system for initial token" }

const aclBootstrapHelp = `
Usage: drover acl bootstrap [options] [<path>]

  Creates the cluster's first management token, once. With a path (or "-"
  for standard input) the token's secret is the UUID read from it, so that
  an operator can bootstrap with a secret of their own; without one the
  secret is random. A second bootstrap is refused unless the data dir of
  the leader holds acl-bootstrap-reset with the reset index the refusal
  names.

Bootstrap Options:

  -json
    Prints the token as JSON.`

func (c *ACLBootstrapCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("acl bootstrap", aclBootstrapHelp)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	var body struct {
		BootstrapSecret string `json:",omitempty"`
	}
	switch fs.NArg() {
	case 0:
	case 1:
		raw, err := c.readSecret(fs.Arg(0))
		if err != nil {
			return c.ui.Errorf("Error reading the bootstrap secret: %s", err)
		}
		body.BootstrapSecret = raw
	default:
		return c.UsageError(fs, "This command takes at most one argument: <path>")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var tok structs.ACLToken
	var in any
	if body.BootstrapSecret != "" {
		in = body
	}
	if err := c.Client().Write(ctx, "PUT", "/v1/acl/bootstrap", nil, in, &tok); err != nil {
		return c.ui.Errorf("Error bootstrapping: %s", err)
	}
	if asJSON {
		out, err := json.MarshalIndent(&tok, "", "    ")
		if err != nil {
			return c.ui.Errorf("Error encoding the token: %s", err)
		}
		c.ui.Printf("%s\n", out)
		return cli.ExitOK
	}
	c.ui.Printf("%s\n", formatACLToken(&tok))
	return cli.ExitOK
}

// readSecret reads a bootstrap secret from a file or standard input,
// bounded: a UUID is 36 bytes.
func (c *ACLBootstrapCommand) readSecret(path string) (string, error) {
	raw, err := cli.ReadInput(c.ui.In, path, 256)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(raw))
	if !structs.IsUUID(s) {
		return "", fmt.Errorf("the secret must be a UUID (got %d bytes)", len(s))
	}
	return s, nil
}

// formatACLToken prints a token the way Nomad's CLI does.
func formatACLToken(t *structs.ACLToken) string {
	expiry := "<none>"
	if t.ExpirationTime != nil {
		expiry = cli.FormatTime(*t.ExpirationTime)
	}
	policies := "n/a"
	if len(t.Policies) > 0 {
		policies = strings.Join(t.Policies, ", ")
	}
	return cli.FormatKV([]string{
		"Accessor ID|" + t.AccessorID,
		"Secret ID|" + t.SecretID,
		"Name|" + t.Name,
		"Type|" + t.Type,
		fmt.Sprintf("Global|%v", t.Global),
		"Create Time|" + cli.FormatTime(t.CreateTime),
		"Expiry Time|" + expiry,
		fmt.Sprintf("Create Index|%d", t.CreateIndex),
		fmt.Sprintf("Modify Index|%d", t.ModifyIndex),
		"Policies|" + policies,
	})
}
