package command

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/drover-org/drover/core/structs"
)

// The `drover service` commands over /v1/services and /v1/service/<name>:
// Nomad's native service discovery.

func serviceCommands(ui *UI) map[string]Command {
	return map[string]Command{
		"service list":   &ServiceListCommand{ui: ui},
		"service info":   &ServiceInfoCommand{ui: ui},
		"service delete": &ServiceDeleteCommand{ui: ui},
	}
}

// ServiceListCommand is `drover service list [-json]`.
type ServiceListCommand struct {
	meta
	ui *UI
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
	c.meta.ui = c.ui
	fs := c.flagSet("service list", serviceListHelp)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "")
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return c.usageError(fs, "This command takes no arguments")
	}
	ctx, cancel := nsContext()
	defer cancel()
	client := c.client()
	if asJSON {
		return c.printJSON(ctx, client, "/v1/services", "services")
	}
	var list []serviceListStub
	if _, err := client.Get(ctx, "/v1/services", nil, &list); err != nil {
		return c.ui.errorf("Error listing service registrations: %s", err)
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
		c.ui.printf("No service registrations found\n")
		return exitOK
	}
	c.ui.printf("%s\n", formatList(rows))
	return exitOK
}

// ServiceInfoCommand is `drover service info [-verbose] [-json] <name>`.
type ServiceInfoCommand struct {
	meta
	ui *UI
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
	c.meta.ui = c.ui
	fs := c.flagSet("service info", serviceInfoHelp)
	var asJSON, verbose bool
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&verbose, "verbose", false, "")
	name, code, ok := c.parseOne(fs, args, "<service_name>")
	if !ok {
		return code
	}
	ctx, cancel := nsContext()
	defer cancel()
	client := c.client()
	path := "/v1/service/" + url.PathEscape(name)
	if asJSON {
		return c.printJSON(ctx, client, path, "service")
	}
	var regs []*structs.ServiceRegistration
	if _, err := client.Get(ctx, path, nil, &regs); err != nil {
		return c.ui.errorf("Error listing service registrations: %s", err)
	}
	if len(regs) == 0 {
		return c.ui.errorf("No service registrations found for %q", name)
	}
	if verbose {
		for i, r := range regs {
			if i > 0 {
				c.ui.printf("\n")
			}
			c.ui.printf("%s\n", formatKV([]string{
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
				c.ui.printf("\nChecks\n%s\n", formatList(rows))
			}
		}
		return exitOK
	}
	rows := []string{"Job ID|Address|Tags|Node ID|Alloc ID"}
	for _, r := range regs {
		rows = append(rows, fmt.Sprintf("%s|%s|[%s]|%s|%s", r.JobID, serviceAddress(r), strings.Join(r.Tags, ","),
			limitID(r.NodeID, false), limitID(r.AllocID, false)))
	}
	c.ui.printf("%s\n", formatList(rows))
	return exitOK
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
	meta
	ui *UI
}

func (c *ServiceDeleteCommand) Synopsis() string { return "Deregister a service registration" }

const serviceDeleteHelp = `
Usage: drover service delete [options] <service_name> <service_id>

  Deletes one registration of a service (its ID from 'drover service info
  -verbose'). The client that registered it registers it again while the
  allocation runs; this removes what a lost client left behind.`

func (c *ServiceDeleteCommand) Run(args []string) int {
	c.meta.ui = c.ui
	fs := c.flagSet("service delete", serviceDeleteHelp)
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 2 {
		return c.usageError(fs, "This command takes two arguments: <service_name> and <service_id>")
	}
	name, id := fs.Arg(0), fs.Arg(1)
	ctx, cancel := nsContext()
	defer cancel()
	path := "/v1/service/" + url.PathEscape(name) + "/" + url.PathEscape(id)
	if err := c.client().Write(ctx, "DELETE", path, url.Values{}, nil, nil); err != nil {
		return c.ui.errorf("Error deleting service registration: %s", err)
	}
	c.ui.printf("Successfully deleted service registration\n")
	return exitOK
}
