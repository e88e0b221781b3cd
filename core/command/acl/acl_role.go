package acl

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// `drover acl role …`: Nomad's `nomad acl role` commands over
// /v1/acl/role*.

// roleOptions are the flags of the role commands.
type roleOptions struct {
	name   string
	byName bool
}

func roleFlags(ro *roleOptions) func(fs *flag.FlagSet, o *aclOptions) {
	return func(fs *flag.FlagSet, o *aclOptions) {
		*ro = roleOptions{} // each run starts from the defaults
		jsonFlag(fs, o)
		fs.StringVar(&ro.name, "name", "", "")
		fs.StringVar(&o.description, "description", "", "")
		fs.Var(&o.policies, "policy", "")
	}
}

func aclRoleCommands() []*aclCommand {
	create, update, info := &roleOptions{}, &roleOptions{}, &roleOptions{}
	return []*aclCommand{
		{name: "acl role create", synopsis: "Create an ACL role", help: aclRoleCreateHelp, flags: roleFlags(create),
			run: func(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
				return runACLRoleCreate(c, ctx, client, o, create, args)
			}},
		{name: "acl role update", synopsis: "Update an ACL role", help: aclRoleUpdateHelp, flags: roleFlags(update),
			run: func(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
				return runACLRoleUpdate(c, ctx, client, o, update, args)
			}},
		{name: "acl role list", synopsis: "List ACL roles", help: aclRoleListHelp, flags: jsonFlag, run: runACLRoleList},
		{name: "acl role info", synopsis: "Show an ACL role", help: aclRoleInfoHelp,
			flags: func(fs *flag.FlagSet, o *aclOptions) {
				*info = roleOptions{}
				jsonFlag(fs, o)
				fs.BoolVar(&info.byName, "by-name", false, "")
			},
			run: func(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
				return runACLRoleInfo(c, ctx, client, o, info, args)
			}},
		{name: "acl role delete", synopsis: "Delete an ACL role", help: aclRoleDeleteHelp, run: runACLRoleDelete},
	}
}

func policyLinks(names []string) []*structs.ACLRolePolicyLink {
	out := make([]*structs.ACLRolePolicyLink, 0, len(names))
	for _, n := range names {
		out = append(out, &structs.ACLRolePolicyLink{Name: n})
	}
	return out
}

const aclRoleCreateHelp = `
Usage: drover acl role create -name <name> -policy <policy>... [options]

  Creates an ACL role linking the given policies (which need not exist
  yet). Needs a management token.

Create Options:

  -name
    The role's name (required).

  -description
    A description of the role.

  -policy
    A policy the role links; repeat for more (at least one).

  -json
    Prints the role as JSON.`

func runACLRoleCreate(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, ro *roleOptions, args []string) int {
	if !c.wantArgs(args, 0, "") {
		return cli.ExitError
	}
	if ro.name == "" || len(o.policies) == 0 {
		return c.ui.Errorf("ACL role create: -name and at least one -policy are required")
	}
	role := structs.ACLRole{Name: ro.name, Description: o.description, Policies: policyLinks(o.policies)}
	var out structs.ACLRole
	if err := client.Write(ctx, "PUT", "/v1/acl/role", nil, &role, &out); err != nil {
		return c.ui.Errorf("Error creating ACL role: %s", err)
	}
	return c.printOut(&out, func() string { return formatACLRole(&out) }, o.asJSON)
}

const aclRoleUpdateHelp = `
Usage: drover acl role update [options] <id>

  Changes a role's name, description or policies (given -policy flags
  replace its links). Needs a management token.

Update Options: -name, -description, -policy and -json, as for create.`

func runACLRoleUpdate(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, ro *roleOptions, args []string) int {
	if !c.wantArgs(args, 1, "<id>") {
		return cli.ExitError
	}
	path := "/v1/acl/role/" + url.PathEscape(args[0])
	var role structs.ACLRole
	if _, err := client.Get(ctx, path, nil, &role); err != nil {
		return c.ui.Errorf("Error reading ACL role: %s", err)
	}
	if ro.name != "" {
		role.Name = ro.name
	}
	if o.description != "" {
		role.Description = o.description
	}
	if len(o.policies) > 0 {
		role.Policies = policyLinks(o.policies)
	}
	var out structs.ACLRole
	if err := client.Write(ctx, "PUT", path, nil, &role, &out); err != nil {
		return c.ui.Errorf("Error updating ACL role: %s", err)
	}
	return c.printOut(&out, func() string { return formatACLRole(&out) }, o.asJSON)
}

const aclRoleListHelp = `
Usage: drover acl role list [-json]

  Lists the ACL roles the token may see (all of them for a management
  token, the ones it holds for any other).`

func runACLRoleList(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
	if !c.wantArgs(args, 0, "") {
		return cli.ExitError
	}
	var list []*structs.ACLRoleListStub
	if _, err := client.Get(ctx, "/v1/acl/roles", nil, &list); err != nil {
		return c.ui.Errorf("Error listing ACL roles: %s", err)
	}
	return c.printOut(list, func() string {
		if len(list) == 0 {
			return "No ACL roles found"
		}
		rows := []string{"ID|Name|Description|Policies"}
		for _, r := range list {
			rows = append(rows, r.ID+"|"+r.Name+"|"+r.Description+"|"+strings.Join(linkNames(r.Policies), ","))
		}
		return cli.FormatList(rows)
	}, o.asJSON)
}

const aclRoleInfoHelp = `
Usage: drover acl role info [-json] [-by-name] <id or name>

  Shows an ACL role, by ID (or by name with -by-name).`

func runACLRoleInfo(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, ro *roleOptions, args []string) int {
	if !c.wantArgs(args, 1, "<id>") {
		return cli.ExitError
	}
	path := "/v1/acl/role/" + url.PathEscape(args[0])
	if ro.byName {
		path = "/v1/acl/role/name/" + url.PathEscape(args[0])
	}
	var role structs.ACLRole
	if _, err := client.Get(ctx, path, nil, &role); err != nil {
		return c.ui.Errorf("Error reading ACL role: %s", err)
	}
	return c.printOut(&role, func() string { return formatACLRole(&role) }, o.asJSON)
}

const aclRoleDeleteHelp = `
Usage: drover acl role delete <id>

  Deletes an ACL role. Tokens holding it keep the link and get nothing
  from it. Needs a management token.`

func runACLRoleDelete(c *aclCommand, ctx context.Context, client *cli.APIClient, _ *aclOptions, args []string) int {
	if !c.wantArgs(args, 1, "<id>") {
		return cli.ExitError
	}
	if err := client.Write(ctx, "DELETE", "/v1/acl/role/"+url.PathEscape(args[0]), nil, nil, nil); err != nil {
		return c.ui.Errorf("Error deleting ACL role: %s", err)
	}
	c.ui.Printf("ACL role %s successfully deleted\n", args[0])
	return cli.ExitOK
}

func linkNames(links []*structs.ACLRolePolicyLink) []string {
	out := make([]string, 0, len(links))
	for _, l := range links {
		if l != nil {
			out = append(out, l.Name)
		}
	}
	return out
}

func formatACLRole(r *structs.ACLRole) string {
	return cli.FormatKV([]string{
		"ID|" + r.ID,
		"Name|" + r.Name,
		"Description|" + r.Description,
		"Policies|" + strings.Join(linkNames(r.Policies), ","),
		fmt.Sprintf("Create Index|%d", r.CreateIndex),
		fmt.Sprintf("Modify Index|%d", r.ModifyIndex),
	})
}
