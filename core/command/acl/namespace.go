package acl

import (
	"flag"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// The `drover namespace` commands over /v1/namespace(s).

// NamespaceListCommand is `drover namespace list [-json]`.
type NamespaceListCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *NamespaceListCommand) Synopsis() string { return "List namespaces" }

const namespaceListHelp = `
Usage: drover namespace list [options]

  Lists the namespaces.

List Options:

  -json
    Prints the namespaces as JSON.`

func (c *NamespaceListCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("namespace list", namespaceListHelp)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	if asJSON {
		return c.PrintJSON(ctx, client, "/v1/namespaces", "namespaces")
	}
	var list []*structs.Namespace
	if _, err := client.Get(ctx, "/v1/namespaces", nil, &list); err != nil {
		return c.ui.Errorf("Error retrieving namespaces: %s", err)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	rows := []string{"Name|Description"}
	for _, ns := range list {
		rows = append(rows, ns.Name+"|"+ns.Description)
	}
	c.ui.Printf("%s\n", cli.FormatList(rows))
	return cli.ExitOK
}

// NamespaceStatusCommand is `drover namespace status <name>`.
type NamespaceStatusCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *NamespaceStatusCommand) Synopsis() string { return "Display a namespace's status" }

const namespaceStatusHelp = `
Usage: drover namespace status [options] <name>

  Shows a namespace: its description and metadata.

Status Options:

  -json
    Prints the namespace as JSON.`

func (c *NamespaceStatusCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("namespace status", namespaceStatusHelp)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "")
	name, code, ok := c.ParseOne(fs, args, "<name>")
	if !ok {
		return code
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	path := "/v1/namespace/" + cli.EscapeID(name)
	if asJSON {
		return c.PrintJSON(ctx, client, path, "namespace")
	}
	var ns structs.Namespace
	if _, err := client.Get(ctx, path, nil, &ns); err != nil {
		return c.ui.Errorf("Error retrieving namespace %q: %s", name, err)
	}
	c.ui.Printf("%s\n", cli.FormatKV([]string{"Name|" + ns.Name, "Description|" + ns.Description}))
	if len(ns.Meta) > 0 {
		keys := make([]string, 0, len(ns.Meta))
		for k := range ns.Meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		rows := make([]string, 0, len(keys))
		for _, k := range keys {
			rows = append(rows, k+"|"+ns.Meta[k])
		}
		c.ui.Printf("\nMetadata\n%s\n", cli.FormatKV(rows))
	}
	return cli.ExitOK
}

// NamespaceApplyCommand is `drover namespace apply [-description d]
// [-meta k=v]... <name>` or `drover namespace apply <file>`.
type NamespaceApplyCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *NamespaceApplyCommand) Synopsis() string { return "Create or update a namespace" }

const namespaceApplyHelp = `
Usage: drover namespace apply [options] <name>
       drover namespace apply <file>

  Creates a namespace, or updates one. Given a name, fields not given keep
  their values. Given a specification file (HCL, or JSON as printed by
  'drover namespace status -json'; "-" reads standard input), the file is
  the whole namespace: a description or metadata it leaves out is removed.
  An argument that is an existing file, or that holds a '.' or '/', is a
  file. The HCL form:

    name        = "team-a"
    description = "Team A"
    meta {
      owner = "a@example.com"
    }

Apply Options:

  -description <text>
    The namespace's description.

  -meta <key>=<value>
    Metadata; may be repeated. Replaces the namespace's metadata when given.`

// namespaceArgIsFile reports whether the argument of namespace apply names
// a specification file rather than a namespace: "-", an existing regular
// file, or anything a namespace name cannot hold.
func namespaceArgIsFile(arg string) bool {
	if arg == "-" || strings.ContainsAny(arg, "./\\") {
		return true
	}
	fi, err := os.Stat(arg)
	return err == nil && fi.Mode().IsRegular()
}

func (c *NamespaceApplyCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("namespace apply", namespaceApplyHelp)
	description := fs.String("description", "", "")
	meta := cli.MetaFlags{}
	fs.Var(meta, "meta", "")
	arg, code, ok := c.ParseOne(fs, args, "<name>")
	if !ok {
		return code
	}
	described := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "description" {
			described = true
		}
	})
	if namespaceArgIsFile(arg) {
		if described || len(meta) > 0 {
			return c.UsageError(fs, "-description and -meta cannot be given with a namespace file")
		}
		return c.applyFile(arg)
	}
	name := arg
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	path := "/v1/namespace/" + cli.EscapeID(name)
	var ns structs.Namespace
	if _, err := client.Get(ctx, path, nil, &ns); err != nil && !cli.IsNotFound(err) {
		return c.ui.Errorf("Error retrieving namespace %q: %s", name, err)
	}
	ns.Name = name
	if described {
		ns.Description = *description
	}
	if len(meta) > 0 {
		ns.Meta = meta
	}
	if err := client.Write(ctx, "PUT", path, nil, &ns, nil); err != nil {
		return c.ui.Errorf("Error applying namespace %q: %s", name, err)
	}
	c.ui.Printf("Successfully applied namespace %q!\n", name)
	return cli.ExitOK
}

// applyFile writes the namespace a specification file describes, whole.
func (c *NamespaceApplyCommand) applyFile(path string) int {
	ns, err := readNamespaceFile(c.ui.In, path)
	if err != nil {
		return c.ui.Errorf("Error parsing namespace file:\n%s", err)
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	if err := c.Client().Write(ctx, "PUT", "/v1/namespace/"+cli.EscapeID(ns.Name), nil, ns, nil); err != nil {
		return c.ui.Errorf("Error applying namespace %q: %s", ns.Name, err)
	}
	c.ui.Printf("Successfully applied namespace %q!\n", ns.Name)
	return cli.ExitOK
}

// NamespaceDeleteCommand is `drover namespace delete <name>`.
type NamespaceDeleteCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *NamespaceDeleteCommand) Synopsis() string { return "Delete a namespace" }

const namespaceDeleteHelp = `
Usage: drover namespace delete [options] <name>

  Deletes a namespace. The default namespace and namespaces that still
  hold jobs cannot be deleted.`

func (c *NamespaceDeleteCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("namespace delete", namespaceDeleteHelp)
	name, code, ok := c.ParseOne(fs, args, "<name>")
	if !ok {
		return code
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	if err := c.Client().Write(ctx, "DELETE", "/v1/namespace/"+cli.EscapeID(name), url.Values{}, nil, nil); err != nil {
		return c.ui.Errorf("Error deleting namespace %q: %s", name, err)
	}
	c.ui.Printf("Successfully deleted namespace %q!\n", name)
	return cli.ExitOK
}
