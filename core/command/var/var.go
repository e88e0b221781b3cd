// Package varcmd holds the `drover var …` commands (Nomad Variables:
// get, put, list, purge, lock) and `drover operator keyring list|rotate`.
package varcmd

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// Commands returns the variable and keyring commands by name.
func Commands(ui *cli.UI) map[string]cli.Command {
	return map[string]cli.Command{
		"var get":                 &GetCommand{ui: ui},
		"var put":                 &PutCommand{ui: ui},
		"var list":                &ListCommand{ui: ui},
		"var purge":               &PurgeCommand{ui: ui},
		"var lock":                &LockCommand{ui: ui},
		"operator keyring list":   &KeyringListCommand{ui: ui},
		"operator keyring rotate": &KeyringRotateCommand{ui: ui},
	}
}

// maxSpecBytes bounds a variable spec or item file read by the CLI.
const maxSpecBytes = 1 << 20

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func varPath(p string) string { return "/v1/var/" + strings.Trim(p, " /") }

// conflictOf returns the current variable of a 409 answer.
func conflictOf(err error) (*structs.Variable, bool) {
	var ae *cli.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict {
		return nil, false
	}
	var v structs.Variable
	if json.Unmarshal([]byte(ae.Body), &v) != nil {
		return nil, false
	}
	return &v, true
}

func formatVar(v *structs.Variable, out string) string {
	switch out {
	case "json":
		return cli.ToJSON(v)
	case "none":
		return ""
	}
	rows := []string{
		"Namespace|" + v.Namespace,
		"Path|" + v.Path,
		"Create Time|" + cli.FormatUnixNano(v.CreateTime),
		"Check Index|" + strconv.FormatUint(v.ModifyIndex, 10),
	}
	if v.Lock != nil {
		rows = append(rows, "Lock TTL|"+v.Lock.TTL, "Lock Delay|"+v.Lock.LockDelay)
	}
	keys := make([]string, 0, len(v.Items))
	for k := range v.Items {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	items := make([]string, 0, len(keys))
	for _, k := range keys {
		items = append(items, k+"|"+v.Items[k])
	}
	return cli.FormatKV(rows) + "\n\nItems\n" + cli.FormatKV(items)
}

// GetCommand is `drover var get [-item <key>] [-out json|table] <path>`.
type GetCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *GetCommand) Synopsis() string { return "Read a variable" }

const getHelp = `
Usage: drover var get [options] <path>

  Reads the variable at path. Needs variables:read on the path.

Get Options:

  -item <key>
    Prints only the value of this item.

  -out (json|table)
    The output format. Default = json.`

func (c *GetCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("var get", getHelp)
	var item, out string
	fs.StringVar(&item, "item", "", "")
	fs.StringVar(&out, "out", "json", "")
	path, code, ok := c.ParseOne(fs, args, "<path>")
	if !ok {
		return code
	}
	if out != "json" && out != "table" {
		return c.UsageError(fs, "-out must be json or table")
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	var v structs.Variable
	if _, err := c.Client().Get(ctx, varPath(path), nil, &v); err != nil {
		if cli.IsNotFound(err) {
			return c.ui.Errorf("Variable not found")
		}
		return c.ui.Errorf("Error retrieving variable: %s", err)
	}
	if item != "" {
		val, ok := v.Items[item]
		if !ok {
			return c.ui.Errorf("Variable %q has no item %q", v.Path, item)
		}
		c.ui.Printf("%s\n", val)
		return cli.ExitOK
	}
	c.ui.Printf("%s\n", formatVar(&v, out))
	return cli.ExitOK
}

// PutCommand is `drover var put [-check-index n] [-out none|json|table]
// <path> [@spec.json] [key=value]...`.
type PutCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *PutCommand) Synopsis() string { return "Create or update a variable" }

const putHelp = `
Usage: drover var put [options] <path> [<@spec file>] [<key>=<value>]...

  Writes the variable at path: its items are exactly those given (a put
  replaces every item). A value of "@file" reads the value from the file,
  "-" from standard input. A "@spec.json" argument (or "-" with -in=json)
  is a variable as 'drover var get' prints it; items given as key=value
  override its items. Needs variables:write on the path.

Put Options:

  -check-index <index>
    Writes only if the variable's index is still this one (0: only if it
    does not exist). A conflict prints the current variable and fails.

  -in json
    The format of a spec read from standard input.

  -out (none|json|table)
    What to print of the written variable. Default = none.`

func (c *PutCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("var put", putHelp)
	var checkIndex, out, in string
	fs.StringVar(&checkIndex, "check-index", "", "")
	fs.StringVar(&out, "out", "none", "")
	fs.StringVar(&in, "in", "json", "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() < 1 {
		return c.UsageError(fs, "This command takes a path and items")
	}
	if out != "none" && out != "json" && out != "table" {
		return c.UsageError(fs, "-out must be none, json or table")
	}
	if in != "json" {
		return c.UsageError(fs, "-in: only json is supported")
	}
	path := fs.Arg(0)
	v := structs.Variable{Path: strings.Trim(path, " /"), Items: structs.VariableItems{}}
	for _, a := range fs.Args()[1:] {
		if strings.HasPrefix(a, "@") || a == "-" {
			src := strings.TrimPrefix(a, "@")
			b, err := cli.ReadInput(c.ui.In, src, maxSpecBytes)
			if err != nil {
				return c.ui.Errorf("Error reading the variable spec: %s", err)
			}
			var spec structs.Variable
			if err := json.Unmarshal(b, &spec); err != nil {
				return c.ui.Errorf("Error parsing the variable spec %s: %s", src, err)
			}
			for k, val := range spec.Items {
				v.Items[k] = val
			}
			continue
		}
		k, val, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return c.UsageError(fs, "Item %q: must be <key>=<value>", a)
		}
		if strings.HasPrefix(val, "@") || val == "-" {
			b, err := cli.ReadInput(c.ui.In, strings.TrimPrefix(val, "@"), structs.MaxVariableSize)
			if err != nil {
				return c.ui.Errorf("Error reading item %q: %s", k, err)
			}
			val = string(b)
		}
		v.Items[k] = val
	}
	if len(v.Items) == 0 {
		return c.UsageError(fs, "A variable needs at least one item")
	}
	q := url.Values{}
	if checkIndex != "" {
		if _, err := strconv.ParseUint(checkIndex, 10, 64); err != nil {
			return c.UsageError(fs, "-check-index: %q is not an index", checkIndex)
		}
		q.Set("cas", checkIndex)
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	var got structs.Variable
	if err := c.Client().Write(ctx, http.MethodPut, varPath(v.Path), q, &v, &got); err != nil {
		if cur, ok := conflictOf(err); ok {
			c.ui.Printf("%s\n", formatVar(cur, "table"))
			return c.ui.Errorf("Check-index conflict: the variable is at index %d", cur.ModifyIndex)
		}
		return c.ui.Errorf("Error writing variable: %s", err)
	}
	c.ui.Printf("Wrote variable %q at index %d\n", got.Path, got.ModifyIndex)
	if s := formatVar(&got, out); s != "" {
		c.ui.Printf("%s\n", s)
	}
	return cli.ExitOK
}

// ListCommand is `drover var list [-json] [-per-page n] [-page-token t] [<prefix>]`.
type ListCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *ListCommand) Synopsis() string { return "List variables" }

const listHelp = `
Usage: drover var list [options] [<prefix>]

  Lists the variables (their metadata, never their items) whose path
  starts with prefix, those the token may list. -namespace=* lists every
  namespace.

List Options:

  -json
    Prints the list as JSON.

  -per-page <n>, -page-token <token>
    Pages the list; the next page's token is printed after a page.`

func (c *ListCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("var list", listHelp)
	var asJSON bool
	var perPage int
	var token string
	fs.BoolVar(&asJSON, "json", false, "")
	fs.IntVar(&perPage, "per-page", 0, "")
	fs.StringVar(&token, "page-token", "", "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		return c.UsageError(fs, "This command takes at most one argument: <prefix>")
	}
	q := url.Values{}
	if fs.NArg() == 1 {
		q.Set("prefix", fs.Arg(0))
	}
	if perPage > 0 {
		// One more row than the page: the first of the next page, whose
		// "<namespace>.<path>" is the next page's token.
		q.Set("per_page", strconv.Itoa(perPage+1))
	}
	if token != "" {
		q.Set("next_token", token)
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	if asJSON {
		raw, err := client.GetRaw(ctx, "/v1/vars", q)
		if err != nil {
			return c.ui.Errorf("Error listing variables: %s", err)
		}
		c.ui.Printf("%s\n", cli.PrettyJSON(raw))
		return cli.ExitOK
	}
	var list []*structs.VariableMetadata
	if _, err := client.Get(ctx, "/v1/vars", q, &list); err != nil {
		return c.ui.Errorf("Error listing variables: %s", err)
	}
	next := ""
	if perPage > 0 && len(list) > perPage {
		next = list[perPage].Namespace + "." + list[perPage].Path
		list = list[:perPage]
	}
	if len(list) == 0 {
		c.ui.Printf("No variables found\n")
		return cli.ExitOK
	}
	rows := []string{"Namespace|Path|Last Updated"}
	for _, m := range list {
		rows = append(rows, m.Namespace+"|"+m.Path+"|"+cli.FormatUnixNano(m.ModifyTime))
	}
	c.ui.Printf("%s\n", cli.FormatList(rows))
	if next != "" {
		c.ui.Printf("\nNext page: -page-token=%s\n", next)
	}
	return cli.ExitOK
}

// PurgeCommand is `drover var purge [-check-index n] <path>`.
type PurgeCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *PurgeCommand) Synopsis() string { return "Delete a variable" }

const purgeHelp = `
Usage: drover var purge [options] <path>

  Deletes the variable at path. Needs variables:destroy on the path.

Purge Options:

  -check-index <index>
    Deletes only if the variable's index is still this one.`

func (c *PurgeCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("var purge", purgeHelp)
	var checkIndex string
	fs.StringVar(&checkIndex, "check-index", "", "")
	path, code, ok := c.ParseOne(fs, args, "<path>")
	if !ok {
		return code
	}
	q := url.Values{}
	if checkIndex != "" {
		if _, err := strconv.ParseUint(checkIndex, 10, 64); err != nil {
			return c.UsageError(fs, "-check-index: %q is not an index", checkIndex)
		}
		q.Set("cas", checkIndex)
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	if err := c.Client().Write(ctx, http.MethodDelete, varPath(path), q, nil, nil); err != nil {
		if cur, ok := conflictOf(err); ok {
			return c.ui.Errorf("Check-index conflict: the variable is at index %d", cur.ModifyIndex)
		}
		return c.ui.Errorf("Error purging variable: %s", err)
	}
	c.ui.Printf("Successfully purged variable %q!\n", strings.Trim(path, " /"))
	return cli.ExitOK
}

// KeyringListCommand is `drover operator keyring list [-json]`.
type KeyringListCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *KeyringListCommand) Synopsis() string { return "List the variables keyring's root keys" }

const keyringListHelp = `
Usage: drover operator keyring list [options]

  Lists the root keys that seal variables. Needs a management token.

List Options:

  -json
    Prints the keys as JSON.`

func (c *KeyringListCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator keyring list", keyringListHelp)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	if asJSON {
		return c.PrintJSON(ctx, client, "/v1/operator/keyring/keys", "keyring")
	}
	var keys []*structs.RootKeyMeta
	if _, err := client.Get(ctx, "/v1/operator/keyring/keys", nil, &keys); err != nil {
		return c.ui.Errorf("Error listing the keyring: %s", err)
	}
	rows := []string{"Key|State|Create Time"}
	for _, k := range keys {
		rows = append(rows, k.KeyID+"|"+k.State+"|"+cli.FormatUnixNano(k.CreateTime))
	}
	c.ui.Printf("%s\n", cli.FormatList(rows))
	return cli.ExitOK
}

// KeyringRotateCommand is `drover operator keyring rotate [-full]`.
type KeyringRotateCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *KeyringRotateCommand) Synopsis() string { return "Rotate the variables keyring's root key" }

const keyringRotateHelp = `
Usage: drover operator keyring rotate [options]

  Makes a new root key the active one: new writes are sealed under it.
  Needs a management token.

Rotate Options:

  -full
    Also re-seals every variable under the new key before returning.`

func (c *KeyringRotateCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator keyring rotate", keyringRotateHelp)
	var full bool
	fs.BoolVar(&full, "full", false, "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	q := url.Values{}
	if full {
		q.Set("full", "true")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out struct{ Key *structs.RootKeyMeta }
	if err := c.Client().Write(ctx, http.MethodPut, "/v1/operator/keyring/rotate", q, nil, &out); err != nil {
		return c.ui.Errorf("Error rotating the keyring: %s", err)
	}
	if out.Key == nil {
		return c.ui.Errorf("Error rotating the keyring: no key in the answer")
	}
	c.ui.Printf("%s\n", cli.FormatList([]string{"Key|State|Create Time", out.Key.KeyID + "|" + out.Key.State + "|" + cli.FormatUnixNano(out.Key.CreateTime)}))
	return cli.ExitOK
}
