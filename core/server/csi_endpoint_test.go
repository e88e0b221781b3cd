package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func csiNode(name, plugin string, healthy bool) *structs.Node {
	n := testNode(name)
	n.CSINodePlugins = map[string]*structs.CSIInfo{plugin: {PluginID: plugin, Healthy: healthy,
		NodeInfo: &structs.CSINodeInfo{ID: "csi-" + name}}}
	return n
}

func csiVol(id, plugin string) *structs.CSIVolume {
	return &structs.CSIVolume{ID: id, Namespace: structs.DefaultNamespace, PluginID: plugin,
		RequestedCapabilities: []*structs.CSIVolumeCapability{{AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}}
}

// Registration refuses what cannot be a volume, with the error's kind,
// and writes nothing; a node cannot report unbounded plugins.
func TestCSIVolumeRegisterRefusals(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	if _, err := s.Nodes().Register(ctx, csiNode("a", "hp", true)); err != nil {
		t.Fatal(err)
	}
	ctrl := csiNode("b", "ctl", true)
	ctrl.CSINodePlugins["ctl"].RequiresControllerPlugin = true
	if _, err := s.Nodes().Register(ctx, ctrl); err != nil {
		t.Fatal(err)
	}
	many := make([]*structs.CSIVolume, structs.MaxCSIVolumesPerRequest+1)
	for i := range many {
		many[i] = csiVol(fmt.Sprintf("v%d", i), "hp")
	}
	otherNS := csiVol("v", "hp")
	otherNS.Namespace = "nowhere"
	noCaps := csiVol("v", "hp")
	noCaps.RequestedCapabilities = nil
	tests := []struct {
		name string
		vols []*structs.CSIVolume
		kind error
		want string
	}{
		{"none", nil, structs.ErrInvalid, "at least one volume"},
		{"too many", many, structs.ErrInvalid, "more than 256 per request"},
		{"twice", []*structs.CSIVolume{csiVol("v", "hp"), csiVol("v", "hp")}, structs.ErrInvalid, "named twice"},
		{"unknown plugin", []*structs.CSIVolume{csiVol("v", "nosuch")}, structs.ErrInvalid, `no CSI plugin named "nosuch"`},
		{"no controller", []*structs.CSIVolume{csiVol("v", "ctl")}, structs.ErrInvalid, "requires a controller plugin"},
		{"unknown namespace", []*structs.CSIVolume{otherNS}, structs.ErrInvalid, `namespace "nowhere" does not exist`},
		{"no capability", []*structs.CSIVolume{noCaps}, structs.ErrInvalid, "at least one capability block"},
		{"bad ID", []*structs.CSIVolume{csiVol("a/b", "hp")}, structs.ErrInvalid, "ID \"a/b\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := s.State().Index("csi_volumes")
			_, err := s.CSI().RegisterCSIVolumes(ctx, tc.vols)
			if !errors.Is(err, tc.kind) || !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.kind, tc.want)
			}
			if after := s.State().Index("csi_volumes"); after != before {
				t.Errorf("a refused registration wrote the volume table (%d → %d)", before, after)
			}
		})
	}

	bad := csiNode("c", "hp", true)
	bad.CSINodePlugins["hp"].HealthDescription = strings.Repeat("x", structs.MaxCSIInfoTextBytes+1)
	if _, err := s.Nodes().Register(ctx, bad); !errors.Is(err, structs.ErrInvalid) {
		t.Errorf("oversized plugin info: %v", err)
	}
	flood := csiNode("d", "hp", true)
	for i := range structs.MaxCSIPluginsPerNode + 1 {
		flood.CSINodePlugins[fmt.Sprintf("p%d", i)] = &structs.CSIInfo{Healthy: true}
	}
	if _, err := s.Nodes().Register(ctx, flood); !errors.Is(err, structs.ErrInvalid) {
		t.Errorf("too many plugins: %v", err)
	}
}

// Register, update, deregister through the endpoint: updates keep the
// volume's identity, deregistration of a missing volume is ErrNotFound.
func TestCSIVolumeRegisterDeregister(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	if _, err := s.Nodes().Register(ctx, csiNode("a", "hp", true)); err != nil {
		t.Fatal(err)
	}
	v := csiVol("data", "hp")
	v.Secrets = map[string]string{"k": "v"}
	if _, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{v}); err != nil {
		t.Fatal(err)
	}
	got, err := s.State().CSIVolumeByID(nil, "default", "data")
	if err != nil || got == nil || !got.Schedulable || got.NodesHealthy != 1 {
		t.Fatalf("registered volume: %+v %v", got, err)
	}
	u := csiVol("data", "hp")
	u.ExternalID = "changed"
	if _, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{u}); !errors.Is(err, structs.ErrInvalid) ||
		!strings.Contains(err.Error(), "external_id cannot be updated") {
		t.Errorf("identity change: %v", err)
	}
	if _, err := s.CSI().DeregisterCSIVolumes(ctx, "default", []string{"nosuch"}, false); !errors.Is(err, structs.ErrNotFound) {
		t.Errorf("missing volume: %v", err)
	}
	if _, err := s.CSI().DeregisterCSIVolumes(ctx, "default", []string{"data"}, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.State().CSIVolumeByID(nil, "default", "data"); got != nil {
		t.Errorf("volume still there: %+v", got)
	}
}
