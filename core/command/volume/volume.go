package volume

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// The `drover volume` and `drover plugin` commands over /v1/volume(s) and
// /v1/plugin(s): CSI volumes and the CSI plugins that serve them, as in
// Nomad.

// VolumeRegisterCommand is `drover volume register <file>`.
type VolumeRegisterCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *VolumeRegisterCommand) Synopsis() string { return "Register a CSI volume" }

const volumeRegisterHelp = `
Usage: drover volume register [options] <file>

  Registers an existing CSI volume from a volume specification (HCL, or
  JSON as 'drover volume status -json' prints it; "-" reads standard
  input), or updates a registered one. The volume's plugin must be running
  on at least one node.

  The file names the volume:

    id          = "data"
    type        = "csi"
    plugin_id   = "hostpath"
    external_id = "vol-0123"
    capability {
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
    }`

func (c *VolumeRegisterCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("volume register", volumeRegisterHelp)
	path, code, ok := c.ParseOne(fs, args, "<file>")
	if !ok {
		return code
	}
	v, err := readVolumeFile(c.ui.In, path)
	if err != nil {
		return c.ui.Errorf("Error parsing the volume specification: %s", err)
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	body := map[string]any{"Volumes": []*structs.CSIVolume{v}}
	if err := c.Client().Write(ctx, "PUT", "/v1/volume/csi/"+cli.EscapeID(v.ID), nil, body, nil); err != nil {
		return c.ui.Errorf("Error registering volume: %s", err)
	}
	c.ui.Printf("Volume %q registered\n", v.ID)
	return cli.ExitOK
}

// VolumeDeregisterCommand is `drover volume deregister [-force] <id>`.
type VolumeDeregisterCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *VolumeDeregisterCommand) Synopsis() string { return "Deregister a CSI volume" }

const volumeDeregisterHelp = `
Usage: drover volume deregister [options] <id>

  Removes a CSI volume from drover; the storage provider keeps it. A
  volume in use is refused.

Deregister Options:

  -force
    Deregisters a volume whose claims all belong to stopped allocations.`

func (c *VolumeDeregisterCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("volume deregister", volumeDeregisterHelp)
	var force bool
	fs.BoolVar(&force, "force", false, "")
	id, code, ok := c.ParseOne(fs, args, "<id>")
	if !ok {
		return code
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	q := url.Values{"force": {strconv.FormatBool(force)}}
	if err := c.Client().Write(ctx, "DELETE", "/v1/volume/csi/"+cli.EscapeID(id), q, nil, nil); err != nil {
		return c.ui.Errorf("Error deregistering volume: %s", err)
	}
	c.ui.Printf("Successfully deregistered volume %q!\n", id)
	return cli.ExitOK
}

// VolumeStatusCommand is `drover volume status [-type csi] [-json] [id]`.
type VolumeStatusCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *VolumeStatusCommand) Synopsis() string {
	return "Display status information about CSI volumes"
}

const volumeStatusHelp = `
Usage: drover volume status [options] [id]

  Lists the CSI volumes, or shows one volume (an ID prefix is enough when
  it matches one volume): its plugin's health, its mode and the
  allocations that claim it.

Status Options:

  -type <type>
    The volume type; only "csi" is served.

  -plugin_id <id>
    Lists the volumes of one plugin.

  -json
    Prints the API's answer as JSON.`

func (c *VolumeStatusCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("volume status", volumeStatusHelp)
	var asJSON bool
	var typ, pluginID string
	fs.BoolVar(&asJSON, "json", false, "")
	fs.StringVar(&typ, "type", "csi", "")
	fs.StringVar(&pluginID, "plugin_id", "", "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		return c.UsageError(fs, "This command takes at most one argument: [id]")
	}
	if typ != "csi" {
		return c.ui.Errorf("Error: volume type %q is not served; drover has CSI volumes (-type csi)", typ)
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	q := url.Values{"type": {"csi"}}
	if pluginID != "" {
		q.Set("plugin_id", pluginID)
	}
	if fs.NArg() == 0 {
		if asJSON {
			return c.PrintJSON(ctx, client, "/v1/volumes?"+q.Encode(), "volumes")
		}
		var list []*structs.CSIVolListStub
		if _, err := client.Get(ctx, "/v1/volumes", q, &list); err != nil {
			return c.ui.Errorf("Error querying volumes: %s", err)
		}
		if len(list) == 0 {
			c.ui.Printf("No CSI volumes\n")
			return cli.ExitOK
		}
		c.ui.Printf("Container Storage Interface\n%s\n", cli.FormatList(volumeRows(list)))
		return cli.ExitOK
	}
	id := fs.Arg(0)
	var list []*structs.CSIVolListStub
	q.Set("prefix", id)
	if _, err := client.Get(ctx, "/v1/volumes", q, &list); err != nil {
		return c.ui.Errorf("Error querying volumes: %s", err)
	}
	exact := false
	for _, v := range list {
		exact = exact || v.ID == id
	}
	switch {
	case len(list) == 0:
		return c.ui.Errorf("No volume(s) with prefix or ID %q found", id)
	case len(list) > 1 && !exact:
		c.ui.Printf("Prefix matched multiple volumes\n\n%s\n", cli.FormatList(volumeRows(list)))
		return cli.ExitOK
	case !exact:
		id = list[0].ID
	}
	path := "/v1/volume/csi/" + cli.EscapeID(id)
	if asJSON {
		return c.PrintJSON(ctx, client, path, "volume")
	}
	var v struct {
		structs.CSIVolume
		Allocations []*structs.AllocListStub
	}
	if _, err := client.Get(ctx, path, nil, &v); err != nil {
		return c.ui.Errorf("Error querying volume: %s", err)
	}
	mount := "<none>"
	if mo := v.MountOptions; mo != nil {
		mount = fmt.Sprintf("fs_type: %s flags: %s", cli.OrNone(mo.FSType), cli.OrNone(strings.Join(mo.MountFlags, ",")))
	}
	c.ui.Printf("%s\n", cli.FormatKV([]string{
		"ID|" + v.ID, "Name|" + v.Name, "Namespace|" + v.Namespace, "External ID|" + v.ExternalID,
		"Plugin ID|" + v.PluginID, "Provider|" + v.Provider, "Version|" + v.ProviderVersion,
		"Schedulable|" + strconv.FormatBool(v.Schedulable),
		"Controllers Healthy|" + strconv.Itoa(v.ControllersHealthy), "Controllers Expected|" + strconv.Itoa(v.ControllersExpected),
		"Nodes Healthy|" + strconv.Itoa(v.NodesHealthy), "Nodes Expected|" + strconv.Itoa(v.NodesExpected),
		"Access Mode|" + cli.OrNone(string(v.AccessMode)), "Attachment Mode|" + cli.OrNone(string(v.AttachmentMode)),
		"Mount Options|" + mount,
	}))
	c.printAllocs(v.Allocations)
	return cli.ExitOK
}

func (c *VolumeStatusCommand) printAllocs(allocs []*structs.AllocListStub) {
	c.ui.Printf("\nAllocations\n")
	if len(allocs) == 0 {
		c.ui.Printf("No allocations placed\n")
		return
	}
	c.ui.Printf("%s\n", cli.FormatList(allocRows(allocs, c.Now())))
}

func allocRows(allocs []*structs.AllocListStub, now time.Time) []string {
	rows := []string{"ID|Node ID|Task Group|Version|Desired|Status|Created|Modified"}
	for _, a := range allocs {
		rows = append(rows, fmt.Sprintf("%s|%s|%s|%d|%s|%s|%s|%s", cli.LimitID(a.ID, false), cli.LimitID(a.NodeID, false),
			a.TaskGroup, a.JobVersion, a.DesiredStatus, a.ClientStatus,
			cli.PrettyTimeDiff(time.Unix(0, a.CreateTime), now), cli.PrettyTimeDiff(time.Unix(0, a.ModifyTime), now)))
	}
	return rows
}

func volumeRows(list []*structs.CSIVolListStub) []string {
	rows := []string{"ID|Name|Namespace|Plugin ID|Schedulable|Access Mode"}
	for _, v := range list {
		rows = append(rows, fmt.Sprintf("%s|%s|%s|%s|%t|%s", v.ID, v.Name, v.Namespace, v.PluginID, v.Schedulable,
			cli.OrNone(string(v.AccessMode))))
	}
	return rows
}

// PluginStatusCommand is `drover plugin status [-type csi] [-json] [id]`:
// the CSI plugins, as in Nomad. The agent's own plugins are `drover
// operator plugin`.
type PluginStatusCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *PluginStatusCommand) Synopsis() string {
	return "Display status information about CSI plugins"
}

const pluginStatusHelp = `
Usage: drover plugin status [options] [id]

  Lists the CSI plugins the cluster's nodes run, or shows one plugin (an ID
  prefix is enough when it matches one plugin): its controller and node
  instances, healthy and expected. The agent's own plugins (schedulers,
  task drivers, the CSI bridge) are 'drover operator plugin list'.

Status Options:

  -type <type>
    The plugin type; only "csi" is served.

  -json
    Prints the API's answer as JSON.`

func (c *PluginStatusCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("plugin status", pluginStatusHelp)
	var asJSON bool
	var typ string
	fs.BoolVar(&asJSON, "json", false, "")
	fs.StringVar(&typ, "type", "csi", "")
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 1 {
		return c.UsageError(fs, "This command takes at most one argument: [id]")
	}
	if typ != "csi" {
		return c.ui.Errorf("Error: plugin type %q is not served; drover lists CSI plugins (-type csi)", typ)
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	q := url.Values{"type": {"csi"}}
	if fs.NArg() == 1 {
		q.Set("prefix", fs.Arg(0))
	}
	if fs.NArg() == 0 && asJSON {
		return c.PrintJSON(ctx, client, "/v1/plugins?type=csi", "plugins")
	}
	var list []*structs.CSIPluginListStub
	if _, err := client.Get(ctx, "/v1/plugins", q, &list); err != nil {
		return c.ui.Errorf("Error querying CSI plugins: %s", err)
	}
	rows := []string{"ID|Provider|Controllers Healthy/Expected|Nodes Healthy/Expected"}
	exact := false
	for _, p := range list {
		exact = exact || (fs.NArg() == 1 && p.ID == fs.Arg(0))
		rows = append(rows, fmt.Sprintf("%s|%s|%d/%d|%d/%d", p.ID, p.Provider,
			p.ControllersHealthy, p.ControllersExpected, p.NodesHealthy, p.NodesExpected))
	}
	switch {
	case fs.NArg() == 0 && len(list) == 0:
		c.ui.Printf("No CSI plugins\n")
		return cli.ExitOK
	case fs.NArg() == 0:
		c.ui.Printf("Container Storage Interface\n%s\n", cli.FormatList(rows))
		return cli.ExitOK
	case len(list) == 0:
		return c.ui.Errorf("No plugin(s) with prefix or ID %q found", fs.Arg(0))
	case len(list) > 1 && !exact:
		c.ui.Printf("Prefix matched multiple plugins\n\n%s\n", cli.FormatList(rows))
		return cli.ExitOK
	}
	id := list[0].ID
	if exact {
		id = fs.Arg(0)
	}
	path := "/v1/plugin/csi/" + cli.EscapeID(id)
	if asJSON {
		return c.PrintJSON(ctx, client, path, "plugin")
	}
	var p structs.CSIPlugin
	if _, err := client.Get(ctx, path, nil, &p); err != nil {
		return c.ui.Errorf("Error querying CSI plugin: %s", err)
	}
	c.ui.Printf("%s\n", cli.FormatKV([]string{
		"ID|" + p.ID, "Provider|" + p.Provider, "Version|" + p.Version,
		"Controllers Healthy|" + strconv.Itoa(p.ControllersHealthy), "Controllers Expected|" + strconv.Itoa(p.ControllersExpected),
		"Nodes Healthy|" + strconv.Itoa(p.NodesHealthy), "Nodes Expected|" + strconv.Itoa(p.NodesExpected),
	}))
	c.ui.Printf("\nAllocations\n")
	if len(p.Allocations) == 0 {
		c.ui.Printf("No allocations placed\n")
	} else {
		c.ui.Printf("%s\n", cli.FormatList(allocRows(p.Allocations, c.Now())))
	}
	return cli.ExitOK
}
