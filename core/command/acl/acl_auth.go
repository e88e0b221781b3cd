package acl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// `drover acl auth-method …`, `drover acl binding-rule …` and `drover
// login`: Nomad's commands over /v1/acl/auth-method*, /v1/acl/binding-rule*
// and /v1/acl/login.

// maxAuthConfigBytes bounds an auth method's -config file.
const maxAuthConfigBytes = 256 << 10

// authMethodOptions are the flags of auth-method create and update. An
// update changes only what is given (a non-empty value, or -default set
// either way).
type authMethodOptions struct {
	name, typ, locality, config, nameFormat string
	maxTTL                                  time.Duration
	isDefault                               trackedBool
}

// trackedBool is a boolean flag that knows whether it was given, so that
// an update can set it to false.
type trackedBool struct{ v, set bool }

func (b *trackedBool) String() string   { return strconv.FormatBool(b.v) }
func (b *trackedBool) IsBoolFlag() bool { return true }
func (b *trackedBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.v, b.set = v, true
	return nil
}

func authMethodFlags(ao *authMethodOptions) func(fs *flag.FlagSet, o *aclOptions) {
	return func(fs *flag.FlagSet, o *aclOptions) {
		*ao = authMethodOptions{}
		jsonFlag(fs, o)
		fs.StringVar(&ao.name, "name", "", "")
		fs.StringVar(&ao.typ, "type", "", "")
		fs.StringVar(&ao.locality, "token-locality", "", "")
		fs.DurationVar(&ao.maxTTL, "max-token-ttl", 0, "")
		fs.Var(&ao.isDefault, "default", "")
		fs.StringVar(&ao.config, "config", "", "")
		fs.StringVar(&ao.nameFormat, "token-name-format", "", "")
	}
}

// readAuthConfig reads -config: JSON, or @path (a file, "-" for stdin) to
// read it from.
func readAuthConfig(c *aclCommand, raw string) (*structs.ACLAuthMethodConfig, error) {
	data := []byte(raw)
	if path, ok := strings.CutPrefix(raw, "@"); ok {
		var err error
		if data, err = cli.ReadInput(c.ui.In, path, maxAuthConfigBytes); err != nil {
			return nil, fmt.Errorf("reading -config: %w", err)
		}
	}
	var cfg structs.ACLAuthMethodConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("parsing -config: %w", err)
	}
	return &cfg, nil
}

func aclAuthCommands() []*aclCommand {
	create, update := &authMethodOptions{}, &authMethodOptions{}
	ruleCreate, ruleUpdate := &bindingRuleOptions{}, &bindingRuleOptions{}
	return []*aclCommand{
		{name: "acl auth-method create", synopsis: "Create an ACL auth method", help: aclAuthMethodCreateHelp, flags: authMethodFlags(create),
			run: func(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
				return runAuthMethodWrite(c, ctx, client, o, create, args, true)
			}},
		{name: "acl auth-method update", synopsis: "Update an ACL auth method", help: aclAuthMethodUpdateHelp, flags: authMethodFlags(update),
			run: func(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
				return runAuthMethodWrite(c, ctx, client, o, update, args, false)
			}},
		{name: "acl auth-method list", synopsis: "List ACL auth methods", help: aclAuthMethodListHelp, flags: jsonFlag, run: runAuthMethodList},
		{name: "acl auth-method info", synopsis: "Show an ACL auth method", help: aclAuthMethodInfoHelp, flags: jsonFlag, run: runAuthMethodInfo},
		{name: "acl auth-method delete", synopsis: "Delete an ACL auth method", help: aclAuthMethodDeleteHelp, run: runAuthMethodDelete},
		{name: "acl binding-rule create", synopsis: "Create an ACL binding rule", help: aclBindingRuleCreateHelp, flags: bindingRuleFlags(ruleCreate),
			run: func(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
				return runBindingRuleWrite(c, ctx, client, o, ruleCreate, args, true)
			}},
		{name: "acl binding-rule update", synopsis: "Update an ACL binding rule", help: aclBindingRuleUpdateHelp, flags: bindingRuleFlags(ruleUpdate),
			run: func(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
				return runBindingRuleWrite(c, ctx, client, o, ruleUpdate, args, false)
			}},
		{name: "acl binding-rule list", synopsis: "List ACL binding rules", help: aclBindingRuleListHelp, flags: jsonFlag, run: runBindingRuleList},
		{name: "acl binding-rule info", synopsis: "Show an ACL binding rule", help: aclBindingRuleInfoHelp, flags: jsonFlag, run: runBindingRuleInfo},
		{name: "acl binding-rule delete", synopsis: "Delete an ACL binding rule", help: aclBindingRuleDeleteHelp, run: runBindingRuleDelete},
	}
}

const aclAuthMethodCreateHelp = `
Usage: drover acl auth-method create [options]

  Creates an auth method, with which a JWT signed by a key of its
  configuration is exchanged for an ACL token (drover login). Needs a
  management token.

Create Options:

  -name
    The method's name (required).

  -type
    The method's type: JWT (required; OIDC is not supported).

  -max-token-ttl
    How long the tokens of a login live (default 1h; at most 24h).

  -token-locality
    "local" (default) or "global".

  -default
    Makes it the method drover login uses without -method.

  -token-name-format
    The name of a login's token: may read ${auth_method_type},
    ${auth_method_name} and ${value.<claim>} (default "token created via
    login: <name>").

  -config
    The method's configuration as JSON, or @<path> to read it from a file
    ("@-" for stdin): JWTValidationPubKeys or JWKSURL (and JWKSCACert),
    BoundAudiences, BoundIssuer, ClaimMappings, ListClaimMappings,
    SigningAlgs, ExpirationLeeway, NotBeforeLeeway, ClockSkewLeeway.

  -json
    Prints the method as JSON.`

const aclAuthMethodUpdateHelp = `
Usage: drover acl auth-method update [options] <name>

  Changes an auth method: only the given flags change it (-config
  replaces the whole configuration). Needs a management token.

Update Options: -type, -max-token-ttl, -token-locality, -default,
-token-name-format, -config and -json, as for create.`

func runAuthMethodWrite(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, ao *authMethodOptions, args []string, create bool) int {
	var m structs.ACLAuthMethod
	path := "/v1/acl/auth-method"
	if create {
		if !c.wantArgs(args, 0, "") {
			return cli.ExitError
		}
		if ao.name == "" || ao.typ == "" || ao.config == "" {
			return c.ui.Errorf("ACL auth method create: -name, -type and -config are required")
		}
		m.Name = ao.name
	} else {
		if !c.wantArgs(args, 1, "<name>") {
			return cli.ExitError
		}
		path += "/" + url.PathEscape(args[0])
		if _, err := client.Get(ctx, path, nil, &m); err != nil {
			return c.ui.Errorf("Error reading ACL auth method: %s", err)
		}
	}
	if create || ao.typ != "" {
		m.Type = strings.ToUpper(ao.typ)
	}
	if create || ao.locality != "" {
		m.TokenLocality = ao.locality
	}
	if create || ao.nameFormat != "" {
		m.TokenNameFormat = ao.nameFormat
	}
	if create || ao.maxTTL != 0 {
		m.MaxTokenTTL = ao.maxTTL
	}
	if create || ao.isDefault.set {
		m.Default = ao.isDefault.v
	}
	if ao.config != "" {
		cfg, err := readAuthConfig(c, ao.config)
		if err != nil {
			return c.ui.Errorf("Error: %s", err)
		}
		m.Config = cfg
	}
	var out structs.ACLAuthMethod
	if err := client.Write(ctx, "PUT", path, nil, &m, &out); err != nil {
		verb := "updating"
		if create {
			verb = "creating"
		}
		return c.ui.Errorf("Error %s ACL auth method: %s", verb, err)
	}
	return c.printOut(&out, func() string { return formatAuthMethod(&out) }, o.asJSON)
}

const aclAuthMethodListHelp = `
Usage: drover acl auth-method list [-json]

  Lists the auth methods (anyone may; the configurations are shown to
  management tokens by info).`

func runAuthMethodList(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
	if !c.wantArgs(args, 0, "") {
		return cli.ExitError
	}
	var list []*structs.ACLAuthMethodListStub
	if _, err := client.Get(ctx, "/v1/acl/auth-methods", nil, &list); err != nil {
		return c.ui.Errorf("Error listing ACL auth methods: %s", err)
	}
	return c.printOut(list, func() string {
		if len(list) == 0 {
			return "No ACL auth methods found"
		}
		rows := []string{"Name|Type|Default"}
		for _, m := range list {
			rows = append(rows, m.Name+"|"+m.Type+"|"+strconv.FormatBool(m.Default))
		}
		return cli.FormatList(rows)
	}, o.asJSON)
}

const aclAuthMethodInfoHelp = `
Usage: drover acl auth-method info [-json] <name>

  Shows an auth method with its configuration. Needs a management token.`

func runAuthMethodInfo(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
	if !c.wantArgs(args, 1, "<name>") {
		return cli.ExitError
	}
	var m structs.ACLAuthMethod
	if _, err := client.Get(ctx, "/v1/acl/auth-method/"+url.PathEscape(args[0]), nil, &m); err != nil {
		return c.ui.Errorf("Error reading ACL auth method: %s", err)
	}
	return c.printOut(&m, func() string { return formatAuthMethod(&m) }, o.asJSON)
}

const aclAuthMethodDeleteHelp = `
Usage: drover acl auth-method delete <name>

  Deletes an auth method and its binding rules. Tokens made by its logins
  stay valid until they expire. Needs a management token.`

func runAuthMethodDelete(c *aclCommand, ctx context.Context, client *cli.APIClient, _ *aclOptions, args []string) int {
	if !c.wantArgs(args, 1, "<name>") {
		return cli.ExitError
	}
	if err := client.Write(ctx, "DELETE", "/v1/acl/auth-method/"+url.PathEscape(args[0]), nil, nil, nil); err != nil {
		return c.ui.Errorf("Error deleting ACL auth method: %s", err)
	}
	c.ui.Printf("ACL auth method %s successfully deleted\n", args[0])
	return cli.ExitOK
}

func formatAuthMethod(m *structs.ACLAuthMethod) string {
	rows := []string{
		"Name|" + m.Name,
		"Type|" + m.Type,
		"Locality|" + m.TokenLocality,
		"Max Token TTL|" + m.MaxTokenTTL.String(),
		"Default|" + strconv.FormatBool(m.Default),
		"Create Index|" + strconv.FormatUint(m.CreateIndex, 10),
		"Modify Index|" + strconv.FormatUint(m.ModifyIndex, 10),
	}
	out := cli.FormatKV(rows)
	if m.Config != nil {
		b, _ := json.MarshalIndent(m.Config, "", "  ")
		out += "\n\nAuth Method Config\n" + string(b)
	}
	return out
}

// bindingRuleOptions are the flags of binding-rule create and update.
type bindingRuleOptions struct {
	description, authMethod, bindType, bindName, selector string
}

func bindingRuleFlags(bo *bindingRuleOptions) func(fs *flag.FlagSet, o *aclOptions) {
	return func(fs *flag.FlagSet, o *aclOptions) {
		*bo = bindingRuleOptions{}
		jsonFlag(fs, o)
		fs.StringVar(&bo.description, "description", "", "")
		fs.StringVar(&bo.authMethod, "auth-method", "", "")
		fs.StringVar(&bo.bindType, "bind-type", "", "")
		fs.StringVar(&bo.bindName, "bind-name", "", "")
		fs.StringVar(&bo.selector, "selector", "", "")
	}
}

const aclBindingRuleCreateHelp = `
Usage: drover acl binding-rule create [options]

  Creates a binding rule: the logins through -auth-method whose mapped
  claims match -selector get the role, the policy or management. Needs a
  management token.

Create Options:

  -auth-method
    The auth method the rule belongs to (required).

  -bind-type
    "role", "policy" or "management" (required).

  -bind-name
    The role or policy name; ${value.<claim>} is replaced by the mapped
    claim (required for role and policy).

  -selector
    Which logins the rule applies to (empty: all), e.g.
    "deployers" in list.groups and value.project == "web"

  -description
    A description of the rule.

  -json
    Prints the rule as JSON.`

const aclBindingRuleUpdateHelp = `
Usage: drover acl binding-rule update [options] <id>

  Changes a binding rule: only the given flags change it. Needs a
  management token.

Update Options: -description, -bind-type, -bind-name, -selector and
-json, as for create.`

func runBindingRuleWrite(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, bo *bindingRuleOptions, args []string, create bool) int {
	var r structs.ACLBindingRule
	path := "/v1/acl/binding-rule"
	if create {
		if !c.wantArgs(args, 0, "") {
			return cli.ExitError
		}
		if bo.authMethod == "" || bo.bindType == "" {
			return c.ui.Errorf("ACL binding rule create: -auth-method and -bind-type are required")
		}
	} else {
		if !c.wantArgs(args, 1, "<id>") {
			return cli.ExitError
		}
		path += "/" + url.PathEscape(args[0])
		if _, err := client.Get(ctx, path, nil, &r); err != nil {
			return c.ui.Errorf("Error reading ACL binding rule: %s", err)
		}
	}
	for _, f := range []struct {
		v   string
		dst *string
	}{{bo.description, &r.Description}, {bo.authMethod, &r.AuthMethod}, {bo.bindType, &r.BindType}, {bo.bindName, &r.BindName}, {bo.selector, &r.Selector}} {
		if f.v != "" {
			*f.dst = f.v
		}
	}
	var out structs.ACLBindingRule
	if err := client.Write(ctx, "PUT", path, nil, &r, &out); err != nil {
		verb := "updating"
		if create {
			verb = "creating"
		}
		return c.ui.Errorf("Error %s ACL binding rule: %s", verb, err)
	}
	return c.printOut(&out, func() string { return formatBindingRule(&out) }, o.asJSON)
}

const aclBindingRuleListHelp = `
Usage: drover acl binding-rule list [-json]

  Lists the binding rules. Needs a management token.`

func runBindingRuleList(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
	if !c.wantArgs(args, 0, "") {
		return cli.ExitError
	}
	var list []*structs.ACLBindingRuleListStub
	if _, err := client.Get(ctx, "/v1/acl/binding-rules", nil, &list); err != nil {
		return c.ui.Errorf("Error listing ACL binding rules: %s", err)
	}
	return c.printOut(list, func() string {
		if len(list) == 0 {
			return "No ACL binding rules found"
		}
		rows := []string{"ID|Description|Auth Method"}
		for _, r := range list {
			rows = append(rows, r.ID+"|"+r.Description+"|"+r.AuthMethod)
		}
		return cli.FormatList(rows)
	}, o.asJSON)
}

const aclBindingRuleInfoHelp = `
Usage: drover acl binding-rule info [-json] <id>

  Shows a binding rule. Needs a management token.`

func runBindingRuleInfo(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
	if !c.wantArgs(args, 1, "<id>") {
		return cli.ExitError
	}
	var r structs.ACLBindingRule
	if _, err := client.Get(ctx, "/v1/acl/binding-rule/"+url.PathEscape(args[0]), nil, &r); err != nil {
		return c.ui.Errorf("Error reading ACL binding rule: %s", err)
	}
	return c.printOut(&r, func() string { return formatBindingRule(&r) }, o.asJSON)
}

const aclBindingRuleDeleteHelp = `
Usage: drover acl binding-rule delete <id>

  Deletes a binding rule. Needs a management token.`

func runBindingRuleDelete(c *aclCommand, ctx context.Context, client *cli.APIClient, _ *aclOptions, args []string) int {
	if !c.wantArgs(args, 1, "<id>") {
		return cli.ExitError
	}
	if err := client.Write(ctx, "DELETE", "/v1/acl/binding-rule/"+url.PathEscape(args[0]), nil, nil, nil); err != nil {
		return c.ui.Errorf("Error deleting ACL binding rule: %s", err)
	}
	c.ui.Printf("ACL binding rule %s successfully deleted\n", args[0])
	return cli.ExitOK
}

func formatBindingRule(r *structs.ACLBindingRule) string {
	return cli.FormatKV([]string{
		"ID|" + r.ID,
		"Description|" + r.Description,
		"Auth Method|" + r.AuthMethod,
		"Selector|" + strconv.Quote(r.Selector),
		"Bind Type|" + r.BindType,
		"Bind Name|" + r.BindName,
		"Create Index|" + strconv.FormatUint(r.CreateIndex, 10),
		"Modify Index|" + strconv.FormatUint(r.ModifyIndex, 10),
	})
}

// loginOptions are the flags of `drover login`.
type loginOptions struct {
	method, loginToken string
}

const loginHelp = `
Usage: drover login [options]

  Exchanges a JWT for an ACL token through an auth method, and prints the
  token. Without -method the cluster's default auth method is used.

Login Options:

  -method
    The auth method to log in through.

  -type
    The method's type: JWT (the only one).

  -login-token
    The JWT to log in with (required).

  -json
    Prints the token as JSON.`

func loginCommand() *aclCommand {
	lo := &loginOptions{}
	var typ string
	return &aclCommand{name: "login", synopsis: "Log in to the cluster with a JWT", help: loginHelp,
		flags: func(fs *flag.FlagSet, o *aclOptions) {
			*lo = loginOptions{}
			jsonFlag(fs, o)
			fs.StringVar(&lo.method, "method", "", "")
			fs.StringVar(&typ, "type", "", "")
			fs.StringVar(&lo.loginToken, "login-token", "", "")
		},
		run: func(c *aclCommand, ctx context.Context, client *cli.APIClient, o *aclOptions, args []string) int {
			if !c.wantArgs(args, 0, "") {
				return cli.ExitError
			}
			if typ != "" && !strings.EqualFold(typ, structs.ACLAuthMethodTypeJWT) {
				return c.ui.Errorf("Error: -type %q is not supported (only JWT)", typ)
			}
			if lo.loginToken == "" {
				return c.ui.Errorf("Error: -login-token is required")
			}
			method := lo.method
			if method == "" {
				var list []*structs.ACLAuthMethodListStub
				if _, err := client.Get(ctx, "/v1/acl/auth-methods", nil, &list); err != nil {
					return c.ui.Errorf("Error listing ACL auth methods: %s", err)
				}
				for _, m := range list {
					if m.Default {
						method = m.Name
					}
				}
				if method == "" {
					return c.ui.Errorf("Error: no -method given and no auth method is the default")
				}
			}
			var tok structs.ACLToken
			req := structs.ACLLoginRequest{AuthMethodName: method, LoginToken: lo.loginToken}
			if err := client.Write(ctx, "PUT", "/v1/acl/login", nil, &req, &tok); err != nil {
				return c.ui.Errorf("Error performing login: %s", err)
			}
			if o.asJSON {
				return c.printOut(&tok, nil, true)
			}
			c.ui.Printf("Successfully logged in via JWT and %s\n\n%s\n", method, formatACLToken(&tok))
			return cli.ExitOK
		}}
}
