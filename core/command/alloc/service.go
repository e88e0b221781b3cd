package alloc

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// The `drover service` commands over /v1/services and /v1/service/<name>:
// Nomad's native service discovery.

func serviceCommands(ui *cli.UI) map[string]cli.Command {
	return map[string]cli.Command{
		"service list":   &ServiceListCommand{ui: ui},
		"service info":   &ServiceInfoCommand{ui: ui},
		"service delete": &ServiceDeleteCommand{ui: ui},
	}
}

// ServiceListCommand is `drover service list [-json]`.
type ServiceListCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *ServiceListCommand) Synopsis() string { return "List service registrations" }

const serviceListHelp = `
Usage: drover service list [options]

  Lists the services registered with provider "nomad" in the namespace
  (-namespace, NOMAD_NAMESPACE; "*" lists every namespace the token may
  read), with the tags of their registrations.

List Options:

  -json
    Prints the services as JSON.`

// serviceListStub is an entry of /v1/services.
type serviceListStub struct {
	Namespace string
	Services  []struct {
		ServiceName string
		Tags        []string
	}
}

func (c *ServiceListCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("service list", serviceListHelp)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "")
	if code, ok := c.ParseNone(fs, args); !ok {
		return code
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	if asJSON {
		return c.PrintJSON(ctx, client, "/v1/services", "services")
	}
	var list []serviceListStub
	if _, err := client.Get(ctx, "/v1/services", nil, &list); err != nil {
		return c.ui.Errorf("Error listing service registrations: %s", err)
	}
	allNS := client.Namespace == "*"
	rows := []string{"Service Name|Tags"}
	if allNS {
		rows = []string{"Service Name|Namespace|Tags"}
	}
	for _, ns := range list {
		for _, s := range ns.Services {
			tags := "[" + strings.Join(s.Tags, ",") + "]"
			if allNS {
				rows = append(rows, s.ServiceName+"|"+ns.Namespace+"|"+tags)
			} else {
				rows = append(rows, s.ServiceName+"|"+tags)
			}
		}
	}
	if len(rows) == 1 {
		c.ui.Printf("No service registrations found\n")
		return cli.ExitOK
	}
	c.ui.Printf("%s\n", cli.FormatList(rows))
	return cli.ExitOK
}

// ServiceInfoCommand is `drover service info [-verbose] [-json] <name>`.
type ServiceInfoCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *ServiceInfoCommand) Synopsis() string {
	return "Display an individual service's registrations"
}

const serviceInfoHelp = `
Usage: drover service info [options] <service_name>

  Shows the registrations of a service: one per allocation that runs it,
  with the address and port it is reached at.

Info Options:

  -json
    Prints the registrations as JSON.

  -verbose
    Prints every field of each registration and full IDs.`

func (c *ServiceInfoCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("service info", serviceInfoHelp)
	var asJSON, verbose bool
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	name, code, ok := c.ParseOne(fs, args, "<service_name>")
	if !ok {
		return code
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	path := "/v1/service/" + url.PathEscape(name)
	if asJSON {
		return c.PrintJSON(ctx, client, path, "service")
	}
	var regs []*structs.ServiceRegistration
	if _, err := client.Get(ctx, path, nil, &regs); err != nil {
		return c.ui.Errorf("Error listing service registrations: %s", err)
	}
	if len(regs) == 0 {
		return c.ui.Errorf("No service registrations found for %q", name)
	}
	if verbose {
		for i, r := range regs {
			if i > 0 {
				c.ui.Printf("\n")
			}
			c.ui.Printf("%s\n", cli.FormatKV([]string{
				"ID|" + r.ID,
				"Service Name|" + r.ServiceName,
				"Namespace|" + r.Namespace,
				"Job ID|" + r.JobID,
				"Alloc ID|" + r.AllocID,
				"Node ID|" + r.NodeID,
				"Datacenter|" + r.Datacenter,
				"Address|" + serviceAddress(r),
				"Tags|[" + strings.Join(r.Tags, ",") + "]",
				"Create Index|" + strconv.FormatUint(r.CreateIndex, 10),
				"Modify Index|" + strconv.FormatUint(r.ModifyIndex, 10),
			}))
			if len(r.Checks) > 0 {
				rows := []string{"Check|Status|Output"}
				for _, ch := range r.Checks {
					out := strings.ReplaceAll(strings.TrimSpace(ch.Output), "\n", " ")
					rows = append(rows, ch.Check+"|"+ch.Status+"|"+strings.ReplaceAll(out, "|", "/"))
				}
				c.ui.Printf("\nChecks\n%s\n", cli.FormatList(rows))
			}
		}
		return cli.ExitOK
	}
	rows := []string{"Job ID|Address|Tags|Node ID|Alloc ID"}
	for _, r := range regs {
		rows = append(rows, fmt.Sprintf("%s|%s|[%s]|%s|%s", r.JobID, serviceAddress(r), strings.Join(r.Tags, ","),
			cli.LimitID(r.NodeID, false), cli.LimitID(r.AllocID, false)))
	}
	c.ui.Printf("%s\n", cli.FormatList(rows))
	return cli.ExitOK
}

// serviceAddress is "address:port", IPv6 addresses in brackets.
func serviceAddress(r *structs.ServiceRegistration) string {
	addr := r.Address
	if strings.Contains(addr, ":") {
		addr = "[" + addr + "]"
	}
	return addr + ":" + strconv.Itoa(r.Port)
}

// ServiceDeleteCommand is `drover service delete <name> <id>`.
type ServiceDeleteCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *ServiceDeleteCommand) Synopsis() string { return "Deregister a service registration" }

const serviceDeleteHelp = `
Usage: drover service delete [options] <service_name> <service_id>

  Deletes one registration of a service (its ID from 'drover service info
  -verbose'). The client that registered it registers it again while the
  allocation runs; this removes what a lost client left behind.`

func (c *ServiceDeleteCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("service delete", serviceDeleteHelp)
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 2 {
		return c.UsageError(fs, "This command takes two arguments: <service_name> and <service_id>")
	}
	name, id := fs.Arg(0), fs.Arg(1)
	ctx, cancel := cli.NSContext()
	defer cancel()
	path := "/v1/service/" + url.PathEscape(name) + "/" + url.PathEscape(id)
	if err := c.Client().Write(ctx, "DELETE", path, url.Values{}, nil, nil); err != nil {
		return c.ui.Errorf("Error deleting service registration: %s", err)
	}
	c.ui.Printf("Successfully deleted service registration\n")
	return cli.ExitOK
}
