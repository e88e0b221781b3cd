package structs

import (
	"strings"
	"testing"
	"time"
)

func TestValidateVolumes(t *testing.T) {
	csi := func(mut func(*VolumeRequest)) map[string]*VolumeRequest {
		v := &VolumeRequest{Name: "data", Type: "csi", Source: "data", AccessMode: CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: CSIVolumeAttachmentModeFilesystem}
		if mut != nil {
			mut(v)
		}
		return map[string]*VolumeRequest{"data": v}
	}
	host := func(mut func(*VolumeRequest)) map[string]*VolumeRequest {
		v := &VolumeRequest{Name: "data", Type: "host", Source: "shared_data"}
		if mut != nil {
			mut(v)
		}
		return map[string]*VolumeRequest{"data": v}
	}
	mount := func(mut func(*VolumeMount)) []*VolumeMount {
		m := &VolumeMount{Volume: "data", Destination: "/data"}
		if mut != nil {
			mut(m)
		}
		return []*VolumeMount{m}
	}
	for _, tc := range []struct {
		name    string
		volumes map[string]*VolumeRequest
		mounts  []*VolumeMount
		plugin  *TaskCSIPluginConfig
		want    string // "" when valid
	}{
		{"valid", csi(nil), mount(nil), nil, ""},
		{"valid reader", csi(func(v *VolumeRequest) { v.AccessMode, v.ReadOnly = CSIVolumeAccessModeMultiNodeReader, true }),
			mount(func(m *VolumeMount) { m.ReadOnly = true }), nil, ""},
		{"unknown type", csi(func(v *VolumeRequest) { v.Type = "nfs" }), nil, nil, `volume "data": type "nfs" is not one of csi, host`},
		{"host volume", host(nil), mount(nil), nil, ""},
		{"host volume read-only", host(func(v *VolumeRequest) { v.ReadOnly = true }), mount(func(m *VolumeMount) { m.ReadOnly = true }), nil, ""},
		{"host volume per_alloc", host(func(v *VolumeRequest) { v.PerAlloc = true }), mount(nil), nil, ""},
		{"host volume no source", host(func(v *VolumeRequest) { v.Source = "" }), nil, nil, `volume "data": source is required`},
		{"host volume bad source", host(func(v *VolumeRequest) { v.Source = "../etc" }), nil, nil, `source "../etc" must be a host volume name`},
		{"host volume access mode", host(func(v *VolumeRequest) { v.AccessMode = CSIVolumeAccessModeSingleNodeWriter }), nil, nil,
			`host volumes cannot have an access_mode`},
		{"host volume attachment mode", host(func(v *VolumeRequest) { v.AttachmentMode = CSIVolumeAttachmentModeFilesystem }), nil, nil,
			`host volumes cannot have an attachment_mode`},
		{"host volume mount options", host(func(v *VolumeRequest) { v.MountOptions = &CSIMountOptions{FSType: "ext4"} }), nil, nil,
			`host volumes cannot have mount_options`},
		{"host volume writable mount of read-only", host(func(v *VolumeRequest) { v.ReadOnly = true }), mount(nil), nil,
			"the mount must be read_only too"},
		{"no source", csi(func(v *VolumeRequest) { v.Source = "" }), nil, nil, `volume "data": source is required`},
		{"bad source", csi(func(v *VolumeRequest) { v.Source = "a/b" }), nil, nil, `source "a/b" must be a volume ID`},
		{"no access mode", csi(func(v *VolumeRequest) { v.AccessMode = "" }), nil, nil, `access_mode "" is not one of`},
		{"no attachment mode", csi(func(v *VolumeRequest) { v.AttachmentMode = "tape" }), nil, nil, `attachment_mode "tape"`},
		{"reader mode writable", csi(func(v *VolumeRequest) { v.AccessMode = CSIVolumeAccessModeSingleNodeReader }), nil, nil,
			`access_mode "single-node-reader-only" is read-only; set read_only = true`},
		{"label mismatch", csi(func(v *VolumeRequest) { v.Name = "other" }), nil, nil, `name "other" does not match`},
		{"mount of no volume", csi(nil), mount(func(m *VolumeMount) { m.Volume = "nope" }), nil, `volume "nope" is not a volume of the group`},
		{"mount without destination", csi(nil), mount(func(m *VolumeMount) { m.Destination = "" }), nil, "destination is required"},
		{"writable mount of read-only volume", csi(func(v *VolumeRequest) { v.ReadOnly = true }), mount(nil), nil,
			"the mount must be read_only too"},
		{"root destination", host(nil), mount(func(m *VolumeMount) { m.Destination = "/" }), nil, `destination "/" is the task's root`},
		{"driver file destination", host(nil), mount(func(m *VolumeMount) { m.Destination = "/.drover-exit.json" }), nil,
			`names beginning with .drover are the drivers' own files`},
		{"relative destination", host(nil), mount(func(m *VolumeMount) { m.Destination = "local/data" }), nil, ""},
		{"bad propagation", csi(nil), mount(func(m *VolumeMount) { m.PropagationMode = "both" }), nil, `propagation_mode "both"`},
		{"same destination twice", csi(nil), append(mount(nil), mount(func(m *VolumeMount) { m.Destination = "/data/" })...), nil,
			`destination "/data/" is mounted twice`},
		{"plugin", nil, nil, &TaskCSIPluginConfig{ID: "hostpath", Type: CSIPluginTypeMonolith}, ""},
		{"plugin type", nil, nil, &TaskCSIPluginConfig{ID: "hostpath", Type: "both"}, `csi_plugin: type "both"`},
		{"plugin id", nil, nil, &TaskCSIPluginConfig{ID: "", Type: CSIPluginTypeNode}, `csi_plugin: id ""`},
		{"stage dir inside mount dir", nil, nil, &TaskCSIPluginConfig{ID: "p", Type: CSIPluginTypeNode, MountDir: "/csi", StagePublishBaseDir: "/csi/stage"},
			"must not be inside mount_dir"},
		{"relative mount dir", nil, nil, &TaskCSIPluginConfig{ID: "p", Type: CSIPluginTypeNode, MountDir: "csi"}, `mount_dir "csi" must be an absolute path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &Job{ID: "j", Type: "sysbatch", Datacenters: []string{"*"}, TaskGroups: []*TaskGroup{{
				Name: "g", Volumes: tc.volumes,
				Tasks: []*Task{{Name: "t", Driver: "raw_exec", VolumeMounts: tc.mounts, CSIPluginConfig: tc.plugin}},
			}}}
			j.Canonicalize()
			err := j.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestCSIPluginDefaultsAndVolumeIDs(t *testing.T) {
	c := &TaskCSIPluginConfig{ID: "p", Type: CSIPluginTypeMonolith}
	c.canonicalize()
	if c.MountDir != "/csi" || c.StagePublishBaseDir != "/local/csi" || c.HealthTimeout != 30*time.Second {
		t.Errorf("defaults: %+v", c)
	}
	if !c.HasNode() || !c.HasController() {
		t.Error("a monolith serves both")
	}
	v := &VolumeRequest{Source: "data", PerAlloc: true}
	for name, want := range map[string]string{"j.g[0]": "data[0]", "j.g[12]": "data[12]", "odd": "data[0]"} {
		if got := v.VolumeID(name); got != want {
			t.Errorf("VolumeID(%q) = %q, want %q", name, got, want)
		}
	}
	v.PerAlloc = false
	if v.VolumeID("j.g[3]") != "data" {
		t.Error("a shared volume's ID is its source")
	}
}
