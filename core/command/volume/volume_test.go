package volume

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

const volumeHCL = `
id          = "data"
name        = "Data"
type        = "csi"
plugin_id   = "hostpath"
external_id = "vol-0123"
capacity_min = "1GiB"
capacity_max = "10 G"

capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}
capability {
  access_mode     = "single-node-reader-only"
  attachment_mode = "file-system"
}

mount_options {
  fs_type     = "ext4"
  mount_flags = ["noatime", "nodiratime"]
}

secrets {
  password = "hunter2"
}
parameters = { "tier/class" = "fast" }
context {
  zone = "a"
}

topology_request {
  required {
    topology {
      segments {
        rack = "r1"
      }
    }
  }
  preferred {
    topology { segments = { zone = "a" } }
  }
}
`

func TestParseVolumeSpec(t *testing.T) {
	v, err := parseVolumeSpec("vol.hcl", []byte(volumeHCL))
	if err != nil {
		t.Fatal(err)
	}
	if v.ID != "data" || v.Name != "Data" || v.PluginID != "hostpath" || v.ExternalID != "vol-0123" {
		t.Errorf("identity: %+v", v)
	}
	if v.RequestedCapacityMin != 1<<30 || v.RequestedCapacityMax != 10e9 {
		t.Errorf("capacity: %d..%d", v.RequestedCapacityMin, v.RequestedCapacityMax)
	}
	if len(v.RequestedCapabilities) != 2 || v.RequestedCapabilities[1].AccessMode != structs.CSIVolumeAccessModeSingleNodeReader {
		t.Errorf("capabilities: %+v", v.RequestedCapabilities)
	}
	if v.MountOptions == nil || v.MountOptions.FSType != "ext4" || strings.Join(v.MountOptions.MountFlags, ",") != "noatime,nodiratime" {
		t.Errorf("mount options: %+v", v.MountOptions)
	}
	if v.Secrets["password"] != "hunter2" || v.Parameters["tier/class"] != "fast" || v.Context["zone"] != "a" {
		t.Errorf("maps: %v %v %v", v.Secrets, v.Parameters, v.Context)
	}
	tr := v.RequestedTopologies
	if tr == nil || len(tr.Required) != 1 || tr.Required[0].Segments["rack"] != "r1" || len(tr.Preferred) != 1 || tr.Preferred[0].Segments["zone"] != "a" {
		t.Errorf("topology request: %+v", tr)
	}
	v.Namespace = "default"
	if err := v.Validate(); err != nil {
		t.Errorf("parsed volume does not validate: %v", err)
	}

	bad := []struct{ name, src, want string }{
		{"host volume", "id = \"x\"\ntype = \"host\"\nplugin_id = \"p\"\ncapability {\n access_mode = \"single-node-writer\"\n attachment_mode = \"file-system\"\n}\n",
			`f.hcl:2:8: Unsupported volume type`},
		{"no capability", "id = \"x\"\ntype = \"csi\"\nplugin_id = \"p\"\n", "Missing capability block"},
		{"bad access mode", "id = \"x\"\ntype = \"csi\"\nplugin_id = \"p\"\ncapability {\n  access_mode = \"often\"\n  attachment_mode = \"file-system\"\n}\n",
			`f.hcl:5:17: Invalid access_mode: "often"`},
		{"bad capacity", "id = \"x\"\ntype = \"csi\"\nplugin_id = \"p\"\ncapacity_min = \"ten\"\ncapability {\n access_mode = \"single-node-writer\"\n attachment_mode = \"file-system\"\n}\n",
			`f.hcl:4:16: Invalid capacity`},
		{"unknown key", "id = \"x\"\ntype = \"csi\"\nplugin_id = \"p\"\nsize = 3\n", `f.hcl:4:1: Unsupported argument`},
		{"missing id", "type = \"csi\"\nplugin_id = \"p\"\n", `Missing required argument`},
		{"two mount_options", "id = \"x\"\ntype = \"csi\"\nplugin_id = \"p\"\nmount_options {}\nmount_options {}\n", "f.hcl:5:1: Duplicate mount_options block"},
		{"secrets twice", "id = \"x\"\ntype = \"csi\"\nplugin_id = \"p\"\nsecrets = {}\nsecrets {}\n", "f.hcl:5:1: Duplicate secrets"},
		{"syntax", "id = \n", "f.hcl:1:"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseVolumeSpec("f.hcl", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}

	// JSON: the API object.
	j, err := parseVolumeSpec("v.json", []byte(`{"ID":"data","PluginID":"hostpath","RequestedCapabilities":[{"AccessMode":"single-node-writer","AttachmentMode":"file-system"}]}`))
	if err != nil || j.ID != "data" || len(j.RequestedCapabilities) != 1 {
		t.Errorf("JSON: %+v %v", j, err)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512": 512, "1k": 1000, "1KiB": 1024, "1.5 GB": 1.5e9, "2gib": 2 << 30, "1TiB": 1 << 40} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-1", "1 parsec", "1e400"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) accepted", in)
		}
	}
}

func TestVolumeCommands(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("PUT /v1/volume/csi/data", map[string]any{"Index": 5})
	stub := map[string]any{"ID": "data", "Name": "Data", "Namespace": "default", "PluginID": "hostpath", "Schedulable": true,
		"AccessMode": "single-node-writer"}
	f.JSON("GET /v1/volumes", []any{stub})
	f.JSON("GET /v1/volume/csi/data", map[string]any{"ID": "data", "Name": "Data", "Namespace": "default", "PluginID": "hostpath",
		"Provider": "hostpath.csi.drover.dev", "Schedulable": true, "NodesHealthy": 2, "AccessMode": "single-node-writer",
		"AttachmentMode": "file-system", "MountOptions": map[string]any{"FSType": "ext4", "MountFlags": []string{"[REDACTED]"}},
		"Allocations": []any{map[string]any{"ID": "0123456789abcdef", "NodeID": "fedcba9876543210", "TaskGroup": "g",
			"DesiredStatus": "run", "ClientStatus": "running", "CreateTime": clitest.TestNow.Add(-2 * 60e9).UnixNano(), "ModifyTime": clitest.TestNow.UnixNano()}}})
	f.JSON("DELETE /v1/volume/csi/data", map[string]any{"Index": 6})
	f.Fail("DELETE /v1/volume/csi/busy", http.StatusConflict, "volume in use: busy")

	r := f.Run(t, volumeHCL, "volume", "register", "-")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "register", r.Out, `Volume "data" registered`)
	var body struct{ Volumes []*structs.CSIVolume }
	if err := json.Unmarshal(f.Request("PUT /v1/volume/csi/data").Body, &body); err != nil || len(body.Volumes) != 1 ||
		body.Volumes[0].Secrets["password"] != "hunter2" {
		t.Errorf("register sent %s (%v)", f.Request("PUT /v1/volume/csi/data").Body, err)
	}
	r = f.Run(t, "id = \"x\"\n", "volume", "register", "-")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "bad file", r.ErrOut, "<stdin>:")

	r = f.Run(t, "", "volume", "status")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "list", r.Out, "Container Storage Interface", "ID    Name  Namespace  Plugin ID  Schedulable  Access Mode",
		"data  Data  default    hostpath   true         single-node-writer")
	if q := f.Request("GET /v1/volumes").Query; !strings.Contains(q, "type=csi") {
		t.Errorf("list query %q lacks type=csi", q)
	}

	r = f.Run(t, "", "volume", "status", "da")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "status", r.Out, "ID                   = data", "Nodes Healthy        = 2", "Access Mode          = single-node-writer",
		"Mount Options        = fs_type: ext4 flags: [REDACTED]", "Allocations", "01234567  fedcba98  g", "running  2m ago")

	r = f.Run(t, "", "volume", "status", "-type", "host")
	clitest.WantCode(t, r, 1)

	r = f.Run(t, "", "volume", "deregister", "-force", "data")
	clitest.WantCode(t, r, 0)
	if q := f.Request("DELETE /v1/volume/csi/data").Query; q != "force=true" {
		t.Errorf("deregister query %q", q)
	}
	r = f.Run(t, "", "volume", "deregister", "busy")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "in use", r.ErrOut, "volume in use: busy")
}

func TestPluginStatusCommand(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/plugins", []any{map[string]any{"ID": "hostpath", "Provider": "hostpath.csi.drover.dev",
		"ControllersHealthy": 1, "ControllersExpected": 1, "NodesHealthy": 2, "NodesExpected": 3}})
	f.JSON("GET /v1/plugin/csi/hostpath", map[string]any{"ID": "hostpath", "Provider": "hostpath.csi.drover.dev", "Version": "1.0",
		"NodesHealthy": 2, "NodesExpected": 3})

	r := f.Run(t, "", "plugin", "status")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "list", r.Out, "Container Storage Interface", "hostpath  hostpath.csi.drover.dev  1/1", "2/3")
	r = f.Run(t, "", "plugin", "status", "host")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "status", r.Out, "ID                   = hostpath", "Version              = 1.0", "Nodes Expected       = 3", "No allocations placed")
	r = f.Run(t, "", "plugin", "status", "-type", "docker")
	clitest.WantCode(t, r, 1)
}
