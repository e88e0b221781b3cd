package volume

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// VolumeCreateCommand is `drover volume create <file>`.
type VolumeCreateCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *VolumeCreateCommand) Synopsis() string {
	return "Create an external volume through a CSI controller"
}

const volumeCreateHelp = `
Usage: drover volume create [options] <file>

  Creates a volume with the storage provider, through a CSI controller
  plugin that a job runs, and registers it. The file is a volume
  specification in HCL or JSON ("-" reads standard input), as for
  "drover volume register"; its external_id is the driver's answer.`

func (c *VolumeCreateCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("volume create", volumeCreateHelp)
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
	var out struct{ Volumes []*structs.CSIVolume }
	body := map[string]any{"Volumes": []*structs.CSIVolume{v}}
	if err := c.Client().Write(ctx, "PUT", "/v1/volume/csi/"+cli.EscapeID(v.ID)+"/create", nil, body, &out); err != nil {
		return c.ui.Errorf("Error creating volume: %s", err)
	}
	for _, got := range out.Volumes {
		c.ui.Printf("Created external volume %s with ID %s\n", got.ExternalID, got.ID)
	}
	return cli.ExitOK
}

// VolumeDeleteCommand is `drover volume delete [-secret k=v] <id>`.
type VolumeDeleteCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *VolumeDeleteCommand) Synopsis() string {
	return "Delete an external volume through a CSI controller"
}

const volumeDeleteHelp = `
Usage: drover volume delete [options] <id>

  Deletes a volume with the storage provider, through a CSI controller
  plugin, and deregisters it. A volume with claims is refused.

Delete Options:

  -secret key=value
    A secret for the DeleteVolume call, instead of the volume's own;
    repeatable.`

func (c *VolumeDeleteCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("volume delete", volumeDeleteHelp)
	var secrets kvFlag
	fs.Var(&secrets, "secret", "")
	id, code, ok := c.ParseOne(fs, args, "<id>")
	if !ok {
		return code
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	if len(secrets) > 0 {
		client.Headers = map[string]string{"X-Nomad-CSI-Secrets": secrets.header()}
	}
	if err := client.Write(ctx, "DELETE", "/v1/volume/csi/"+cli.EscapeID(id)+"/delete", nil, nil, nil); err != nil {
		return c.ui.Errorf("Error deleting volume: %s", err)
	}
	c.ui.Printf("Successfully deleted volume %q!\n", id)
	return cli.ExitOK
}

// VolumeDetachCommand is `drover volume detach <volume> <node>`.
type VolumeDetachCommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *VolumeDetachCommand) Synopsis() string { return "Detach a CSI volume from a node" }

const volumeDetachHelp = `
Usage: drover volume detach [options] <volume> <node>

  Releases every claim of the volume on the node: a live node's client
  unpublishes the volume (an allocation still running loses its mount),
  then the controller plugin detaches it. <node> is a node ID or a unique
  prefix of one.`

func (c *VolumeDetachCommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("volume detach", volumeDetachHelp)
	if code, ok := c.Parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 2 {
		return c.UsageError(fs, "This command takes two arguments: <volume> <node>")
	}
	ctx, cancel := cli.NSContext()
	defer cancel()
	client := c.Client()
	node, err := c.NodeArg(ctx, client, false, fs.Arg(1))
	if err != nil {
		return c.ui.Errorf("%s", err)
	}
	q := url.Values{"node": {node}}
	if err := client.Write(ctx, "DELETE", "/v1/volume/csi/"+cli.EscapeID(fs.Arg(0))+"/detach", q, nil, nil); err != nil {
		return c.ui.Errorf("Error detaching volume: %s", err)
	}
	c.ui.Printf("Successfully detached volume %q from node %q\n", fs.Arg(0), node)
	return cli.ExitOK
}

// kvFlag is a repeatable key=value flag.
type kvFlag map[string]string

func (f *kvFlag) String() string { return "" }

func (f *kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || strings.Contains(s, ",") {
		return fmt.Errorf("%q: want key=value without commas", s)
	}
	if *f == nil {
		*f = kvFlag{}
	}
	(*f)[k] = v
	return nil
}

func (f kvFlag) header() string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+f[k])
	}
	return strings.Join(parts, ",")
}
