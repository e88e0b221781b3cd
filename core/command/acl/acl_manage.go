package acl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// maxPolicyFileBytes bounds a policy's rules file; the server refuses
// larger rules anyway.
const maxPolicyFileBytes = 64 << 10

// aclCommand is one of `drover acl policy|token …`: they share the
// flags, the client and a run function.
type aclCommand struct {
	cli.Meta
	ui       *cli.UI
	name     string // "acl policy list"
	synopsis string
	help     string
	// flags adds the command's own flags; run does the work with the
	// remaining arguments.
	flags func(fs *flag.FlagSet, o *aclOptions)
	run   func(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int
}

// aclOptions are the flags of the ACL commands (each uses some).
type aclOptions struct {
	asJSON      bool
	description string
	tokenName   string
	tokenType   string
	policies    cli.StringsFlag
	roleNames   cli.StringsFlag
	ttl         time.Duration
}

func (c *aclCommand) Synopsis() string { return c.synopsis }

func (c *aclCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet(c.name, c.help)
	var o aclOptions
	if c.flags != nil {
		c.flags(fs, &o)
	}
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.run(c, ctx, c.Client(), &o, fs.Args())
}

func (c *aclCommand) printOut(v any, text func() string, asJSON bool) int {
	if asJSON {
		out, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return c.ui.Errorf("Error encoding JSON: %s", err)
		}
		c.ui.Printf("%s\n", out)
		return cli.ExitOK
	}
	c.ui.Printf("%s\n", text())
	return cli.ExitOK
}

func jsonFlag(fs *flag.FlagSet, o *aclOptions) { fs.BoolVar(&o.asJSON, "json", false, "") }

func tokenFlags(fs *flag.FlagSet, o *aclOptions) {
	jsonFlag(fs, o)
	fs.StringVar(&o.tokenName, "name", "", "")
	fs.StringVar(&o.tokenType, "type", "", "")
	fs.Var(&o.policies, "policy", "")
	fs.Var(&o.roleNames, "role-name", "")
	fs.DurationVar(&o.ttl, "ttl", 0, "")
}

// wantArgs checks the number of arguments.
func (c *aclCommand) wantArgs(args []string, n int, names string) bool {
	if len(args) == n {
		return true
	}
	if n == 0 {
		fmt.Fprintf(c.ui.Err, "This command takes no arguments\n")
	} else {
		fmt.Fprintf(c.ui.Err, "This command takes %d argument(s): %s\n", n, names)
	}
	return false
}

func aclManageCommands(ui *cli.UI) map[string]cli.Command {
	cmds := []*aclCommand{
		{name: "acl policy apply", synopsis: "Create or update an ACL policy", help: aclPolicyApplyHelp,
			flags: func(fs *flag.FlagSet, o *aclOptions) { fs.StringVar(&o.description, "description", "", "") },
			run:   runACLPolicyApply},
		{name: "acl policy list", synopsis: "List ACL policies", help: aclPolicyListHelp, flags: jsonFlag, run: runACLPolicyList},
		{name: "acl policy info", synopsis: "Show an ACL policy", help: aclPolicyInfoHelp, flags: jsonFlag, run: runACLPolicyInfo},
		{name: "acl policy delete", synopsis: "Delete an ACL policy", help: aclPolicyDeleteHelp, run: runACLPolicyDelete},
		{name: "acl token create", synopsis: "Create an ACL token", help: aclTokenCreateHelp, flags: tokenFlags, run: runACLTokenCreate},
		{name: "acl token update", synopsis: "Update an ACL token", help: aclTokenUpdateHelp, flags: tokenFlags, run: runACLTokenUpdate},
		{name: "acl token list", synopsis: "List ACL tokens", help: aclTokenListHelp, flags: jsonFlag, run: runACLTokenList},
		{name: "acl token info", synopsis: "Show an ACL token", help: aclTokenInfoHelp, flags: jsonFlag, run: runACLTokenInfo},
		{name: "acl token self", synopsis: "Show the token in use", help: aclTokenSelfHelp, flags: jsonFlag, run: runACLTokenSelf},
		{name: "acl token delete", synopsis: "Delete an ACL token", help: aclTokenDeleteHelp, run: runACLTokenDelete},
	}
	cmds = append(cmds, aclRoleCommands()...)
	cmds = append(cmds, aclAuthCommands()...)
	cmds = append(cmds, loginCommand())
	out := make(map[string]cli.Command, len(cmds))
	for _, c := range cmds {
		c.ui = ui
		out[c.name] = c
	}
	return out
}

const aclPolicyApplyHelp = `
Usage: drover acl policy apply [options] <name> <path>

  Creates or replaces the ACL policy <name> with the rules in <path> ("-"
  reads standard input), in Nomad's policy language. Needs a management
  token.

Apply Options:

  -description
    A description of the policy.`

func runACLPolicyApply(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
	if !c.wantArgs(args, 2, "<name> <path>") {
		return cli.ExitError
	}
	rules, err := cli.ReadInput(c.ui.In, args[1], maxPolicyFileBytes)
	if err != nil {
		return c.ui.Errorf("Error reading the policy rules: %s", err)
	}
	body := structs.ACLPolicy{Name: args[0], Description: o.description, Rules: string(rules)}
	if err := client.Write(ctx, "PUT", "/v1/acl/policy/"+url.PathEscape(args[0]), nil, &body, nil); err != nil {
		return c.ui.Errorf("Error writing ACL policy: %s", err)
	}
	c.ui.Printf("Successfully wrote %q ACL policy!\n", args[0])
	return cli.ExitOK
}

const aclPolicyListHelp = `
Usage: drover acl policy list [-json]

  Lists the ACL policies the token may see (all of them for a management
  token).`

func runACLPolicyList(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
	if !c.wantArgs(args, 0, "") {
		return cli.ExitError
	}
	var list []*structs.ACLPolicyListStub
	if _, err := client.Get(ctx, "/v1/acl/policies", nil, &list); err != nil {
		return c.ui.Errorf("Error listing ACL policies: %s", err)
	}
	return c.printOut(list, func() string {
		if len(list) == 0 {
			return "No policies found"
		}
		rows := []string{"Name|Description"}
		for _, p := range list {
			rows = append(rows, p.Name+"|"+p.Description)
		}
		return cli.FormatList(rows)
	}, o.asJSON)
}

const aclPolicyInfoHelp = `
Usage: drover acl policy info [-json] <name>

  Shows an ACL policy and its rules.`

func runACLPolicyInfo(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
	if !c.wantArgs(args, 1, "<name>") {
		return cli.ExitError
	}
	var p structs.ACLPolicy
	if _, err := client.Get(ctx, "/v1/acl/policy/"+url.PathEscape(args[0]), nil, &p); err != nil {
		return c.ui.Errorf("Error reading ACL policy: %s", err)
	}
	return c.printOut(&p, func() string {
		return cli.FormatKV([]string{
			"Name|" + p.Name,
			"Description|" + p.Description,
			fmt.Sprintf("CreateIndex|%d", p.CreateIndex),
			fmt.Sprintf("ModifyIndex|%d", p.ModifyIndex),
		}) + "\n\nRules\n\n" + strings.TrimRight(p.Rules, "\n")
	}, o.asJSON)
}

const aclPolicyDeleteHelp = `
Usage: drover acl policy delete <name>

  Deletes an ACL policy. Tokens that name it keep the name and get nothing
  from it. Needs a management token.`

func runACLPolicyDelete(c *aclCommand, ctx context.Context, client *cli.APIClient, _ *aclOptions, args []string) int {
	if !c.wantArgs(args, 1, "<name>") {
		return cli.ExitError
	}
	if err := client.Write(ctx, "DELETE", "/v1/acl/policy/"+url.PathEscape(args[0]), nil, nil, nil); err != nil {
		return c.ui.Errorf("Error deleting ACL policy: %s", err)
	}
	c.ui.Printf("Successfully deleted %q ACL policy!\n", args[0])
	return cli.ExitOK
}

const aclTokenCreateHelp = `
Usage: drover acl token create [options]

  Creates an ACL token and prints it, secret included. Needs a management
  token.

Create Options:

  -name
    A name for the token.

  -type
    "client" (the default) or "management".

  -policy
    A policy the token holds; repeat for more. A client token needs a
    policy or a role.

  -role-name
    A role the token holds, by name; repeat for more.

  -ttl
    The token's lifetime ("1h"); without it the token does not expire.

  -json
    Prints the token as JSON.`

func runACLTokenCreate(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
	if !c.wantArgs(args, 0, "") {
		return cli.ExitError
	}
	tok := structs.ACLToken{Name: o.tokenName, Type: o.tokenType, Policies: o.policies, ExpirationTTL: o.ttl}
	for _, n := range o.roleNames {
		tok.Roles = append(tok.Roles, &structs.ACLTokenRoleLink{Name: n})
	}
	if tok.Type == "" {
		tok.Type = structs.ACLClientToken
	}
	var out structs.ACLToken
	if err := client.Write(ctx, "PUT", "/v1/acl/token", nil, &tok, &out); err != nil {
		return c.ui.Errorf("Error creating ACL token: %s", err)
	}
	return c.printOut(&out, func() string { return formatACLToken(&out) }, o.asJSON)
}

const aclTokenUpdateHelp = `
Usage: drover acl token update [options] <accessor>

  Changes a token's name, type or policies (given -policy flags replace
  its policies). Its secret and expiry stay. Needs a management token.

Update Options: -name, -type, -policy and -json, as for create.`

func runACLTokenUpdate(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
	if !c.wantArgs(args, 1, "<accessor>") {
		return cli.ExitError
	}
	path := "/v1/acl/token/" + url.PathEscape(args[0])
	var tok structs.ACLToken
	if _, err := client.Get(ctx, path, nil, &tok); err != nil {
		return c.ui.Errorf("Error reading ACL token: %s", err)
	}
	if o.tokenName != "" {
		tok.Name = o.tokenName
	}
	if o.tokenType != "" {
		tok.Type = o.tokenType
	}
	if len(o.policies) > 0 {
		tok.Policies = o.policies
	}
	if tok.Type == structs.ACLManagementToken {
		tok.Policies = nil
	}
	tok.ExpirationTTL = 0
	var out structs.ACLToken
	if err := client.Write(ctx, "PUT", path, nil, &tok, &out); err != nil {
		return c.ui.Errorf("Error updating ACL token: %s", err)
	}
	return c.printOut(&out, func() string { return formatACLToken(&out) }, o.asJSON)
}

const aclTokenListHelp = `
Usage: drover acl token list [-json]

  Lists the ACL tokens, without their secrets. Needs a management token.`

func runACLTokenList(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
	if !c.wantArgs(args, 0, "") {
		return cli.ExitError
	}
	var list []*structs.ACLTokenListStub
	if _, err := client.Get(ctx, "/v1/acl/tokens", nil, &list); err != nil {
		return c.ui.Errorf("Error listing ACL tokens: %s", err)
	}
	now := c.Now()
	return c.printOut(list, func() string {
		if len(list) == 0 {
			return "No tokens found"
		}
		rows := []string{"Name|Type|Global|Accessor ID|Expired"}
		for _, t := range list {
			expired := t.ExpirationTime != nil && !t.ExpirationTime.After(now)
			rows = append(rows, fmt.Sprintf("%s|%s|%t|%s|%t", t.Name, t.Type, t.Global, t.AccessorID, expired))
		}
		return cli.FormatList(rows)
	}, o.asJSON)
}

const aclTokenInfoHelp = `
Usage: drover acl token info [-json] <accessor>

  Shows a token, secret included: a management token may read any, a
  client token itself.`

func runACLTokenInfo(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
	if !c.wantArgs(args, 1, "<accessor>") {
		return cli.ExitError
	}
	return c.showToken(ctx, client, "/v1/acl/token/"+url.PathEscape(args[0]), o.asJSON)
}

const aclTokenSelfHelp = `
Usage: drover acl token self [-json]

  Shows the token this command runs with (-token, DROVER_TOKEN or
  NOMAD_TOKEN).`

func runACLTokenSelf(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
	if !c.wantArgs(args, 0, "") {
		return cli.ExitError
	}
	return c.showToken(ctx, client, "/v1/acl/token/self", o.asJSON)
}

func (c *aclCommand) showToken(ctx context.Context, client *cli.APIClient, path string, asJSON bool) int {
	var tok structs.ACLToken
	if _, err := client.Get(ctx, path, nil, &tok); err != nil {
		return c.ui.Errorf("Error reading ACL token: %s", err)
	}
	return c.printOut(&tok, func() string { return formatACLToken(&tok) }, asJSON)
}

const aclTokenDeleteHelp = `
Usage: drover acl token delete <accessor>

  Deletes a token and its one-time token. Needs a management token.`

func runACLTokenDelete(c *aclCommand, ctx context.Context, client *cli.APIClient, _ *aclOptions, args []string) int {
	if !c.wantArgs(args, 1, "<accessor>") {
		return cli.ExitError
	}
	if err := client.Write(ctx, "DELETE", "/v1/acl/token/"+url.PathEscape(args[0]), nil, nil, nil); err != nil {
		return c.ui.Errorf("Error deleting ACL token: %s", err)
	}
	c.ui.Printf("Token %s successfully deleted\n", args[0])
	return cli.ExitOK
}
