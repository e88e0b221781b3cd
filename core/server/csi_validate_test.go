package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/server/csivolumes"
	"github.com/drover-org/drover/core/structs"
)

// validateNode is a node running plugin hp as a monolith whose controller
// (attach/detach) is healthy or not.
func validateNode(t *testing.T, s *Server, healthy bool) *structs.Node {
	t.Helper()
	node := csiNode("a", "hp", true)
	node.CSINodePlugins["hp"].RequiresControllerPlugin = true
	node.CSIControllerPlugins = map[string]*structs.CSIInfo{"hp": {PluginID: "hp", Healthy: healthy, RequiresControllerPlugin: true,
		ControllerInfo: &structs.CSIControllerInfo{SupportsAttachDetach: true}}}
	if _, err := s.Nodes().Register(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	return node
}

func validated(ops []*structs.CSIControllerOp) []*structs.CSIControllerOp {
	var out []*structs.CSIControllerOp
	for _, op := range ops {
		if op.Kind == structs.CSIControllerOpValidate {
			out = append(out, op)
		}
	}
	return out
}

// Registering a volume of a plugin that needs a controller asks the
// driver, through a controller client, whether it supports the volume's
// capabilities, with everything the driver needs; confirmed, the volume
// is stored. Registering it again unchanged asks nothing; an update that
// changes the capabilities or mount options is asked again.
func TestCSIVolumeRegisterValidatesWithController(t *testing.T) {
	s := testServer(t, nil)
	node := validateNode(t, s, true)
	fc := startFakeController(t, s, node, confirmValidate)
	ctx := context.Background()

	v := csiVol("v1", "hp")
	v.ExternalID = "ext-1"
	v.MountOptions = &structs.CSIMountOptions{FSType: "ext4", MountFlags: []string{"noatime"}}
	v.Parameters = map[string]string{"type": "ssd"}
	v.Context = map[string]string{"share": "/x"}
	v.Secrets = map[string]string{"token": "s3cret"}
	if _, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{v}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v1"); got == nil {
		t.Fatal("the confirmed volume was not stored")
	}
	ops := validated(fc.calls())
	if len(ops) != 1 {
		t.Fatalf("validate calls: %+v", fc.calls())
	}
	op := ops[0]
	if op.PluginID != "hp" || op.ExternalVolumeID != "ext-1" || len(op.Capabilities) != 1 ||
		op.Capabilities[0].AccessMode != structs.CSIVolumeAccessModeSingleNodeWriter ||
		op.Capabilities[0].AttachmentMode != structs.CSIVolumeAttachmentModeFilesystem ||
		op.MountOptions == nil || op.MountOptions.FSType != "ext4" || len(op.MountOptions.MountFlags) != 1 ||
		op.Parameters["type"] != "ssd" || op.VolumeContext["share"] != "/x" || op.Secrets["token"] != "s3cret" {
		t.Fatalf("validate op: %+v", op)
	}

	// Unchanged (secrets may change freely): nothing to validate.
	same := v.Copy()
	same.Secrets = map[string]string{"token": "rotated"}
	if _, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{same}); err != nil {
		t.Fatal(err)
	}
	if n := len(validated(fc.calls())); n != 1 {
		t.Fatalf("an unchanged update was validated (%d calls)", n)
	}
	// A new capability: validated again, with both.
	more := v.Copy()
	more.RequestedCapabilities = append(more.RequestedCapabilities, &structs.CSIVolumeCapability{
		AccessMode: structs.CSIVolumeAccessModeMultiNodeReader, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem})
	if _, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{more}); err != nil {
		t.Fatal(err)
	}
	ops = validated(fc.calls())
	if len(ops) != 2 || len(ops[1].Capabilities) != 2 || ops[1].Secrets["token"] != "s3cret" {
		t.Fatalf("validate calls after a capability change: %+v", ops)
	}
}

// A refusal by the driver fails the registration with ErrInvalid (HTTP
// 400) naming the volume and the driver's message, and writes nothing; so
// does a volume the driver does not know. An update the driver refuses
// leaves the stored volume as it was.
func TestCSIVolumeRegisterRefusedByController(t *testing.T) {
	s := testServer(t, nil)
	node := validateNode(t, s, true)
	answers := make(chan *structs.CSIControllerOpResult, 1)
	startFakeController(t, s, node, func(op *structs.CSIControllerOp) *structs.CSIControllerOpResult {
		return <-answers
	})
	ctx := context.Background()
	tests := []struct {
		name   string
		answer *structs.CSIControllerOpResult
		want   []string
	}{
		{"refused", &structs.CSIControllerOpResult{Validation: &structs.CSIVolumeValidation{
			Message: "capabilities not confirmed (single-node-writer/file-system): block access only"}},
			[]string{`volume "v1"`, `plugin "hp" does not support`, "block access only"}},
		{"unknown to the driver", &structs.CSIControllerOpResult{ErrorKind: "not_found", Error: "csi ValidateVolumeCapabilities: volume ext-1 does not exist"},
			[]string{`volume "v1"`, "controller validate", "ext-1 does not exist"}},
		{"invalid argument", &structs.CSIControllerOpResult{ErrorKind: "invalid", Error: "invalid argument: volume capabilities are required"},
			[]string{`volume "v1"`, "capabilities are required"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := csiVol("v1", "hp")
			v.ExternalID = "ext-1"
			before := s.State().Index("csi_volumes")
			answers <- tc.answer
			_, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{v})
			if !errors.Is(err, structs.ErrInvalid) || structs.HTTPStatus(err) != http.StatusBadRequest {
				t.Fatalf("err = %v (status %d), want ErrInvalid, 400", err, structs.HTTPStatus(err))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			if after := s.State().Index("csi_volumes"); after != before {
				t.Errorf("a refused registration wrote the volume table (%d → %d)", before, after)
			}
			if got, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v1"); got != nil {
				t.Errorf("the refused volume was stored: %+v", got)
			}
		})
	}

	// A registered volume whose update the driver refuses stays as it was.
	v := csiVol("v2", "hp")
	answers <- &structs.CSIControllerOpResult{Validation: &structs.CSIVolumeValidation{Confirmed: true}}
	if _, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{v}); err != nil {
		t.Fatal(err)
	}
	u := v.Copy()
	u.RequestedCapabilities = []*structs.CSIVolumeCapability{{AccessMode: structs.CSIVolumeAccessModeMultiNodeMultiWriter,
		AttachmentMode: structs.CSIVolumeAttachmentModeBlockDevice}}
	answers <- &structs.CSIControllerOpResult{Validation: &structs.CSIVolumeValidation{Message: "no block devices"}}
	if _, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{u}); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "no block devices") {
		t.Fatalf("refused update: %v", err)
	}
	got, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v2")
	if got == nil || len(got.RequestedCapabilities) != 1 || got.RequestedCapabilities[0].AccessMode != structs.CSIVolumeAccessModeSingleNodeWriter {
		t.Fatalf("stored after a refused update: %+v", got)
	}
}

// Without a controller that can answer, the registration is refused with
// ErrUnavailable (HTTP 503, retry later) and nothing is written: when the
// plugin's only controller is unhealthy, and when its client does not
// take the call. A controller that has never been seen is register's
// older refusal (ErrInvalid).
func TestCSIVolumeRegisterControllerUnavailable(t *testing.T) {
	s := testServer(t, nil)
	s.csi.Queue().SetPickup(200 * time.Millisecond)
	ctx := context.Background()
	node := validateNode(t, s, true) // healthy, but its client never polls
	before := s.State().Index("csi_volumes")
	_, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{csiVol("v1", "hp")})
	if !errors.Is(err, structs.ErrUnavailable) || structs.HTTPStatus(err) != http.StatusServiceUnavailable ||
		!strings.Contains(err.Error(), `volume "v1"`) || !strings.Contains(err.Error(), "did not take the call") {
		t.Fatalf("controller client not polling: %v", err)
	}

	node.CSIControllerPlugins["hp"].Healthy = false
	if _, err := s.Nodes().Register(ctx, node); err != nil {
		t.Fatal(err)
	}
	startFakeController(t, s, node, confirmValidate) // polls, but its controller is unhealthy
	_, err = s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{csiVol("v1", "hp")})
	if !errors.Is(err, structs.ErrUnavailable) || !strings.Contains(err.Error(), `volume "v1"`) ||
		!strings.Contains(err.Error(), "no healthy CSI controller") {
		t.Fatalf("unhealthy controller: %v", err)
	}
	if after := s.State().Index("csi_volumes"); after != before {
		t.Errorf("a refused registration wrote the volume table (%d → %d)", before, after)
	}

	ctl := csiNode("b", "ctl", true)
	ctl.CSINodePlugins["ctl"].RequiresControllerPlugin = true
	if _, err := s.Nodes().Register(ctx, ctl); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{csiVol("v1", "ctl")}); !errors.Is(err, structs.ErrInvalid) ||
		!strings.Contains(err.Error(), "requires a controller plugin") {
		t.Fatalf("no controller ever seen: %v", err)
	}
}

// A plugin without a controller registers its volumes without asking
// anyone; a driver that cannot validate (no such RPC) does not stop a
// registration.
func TestCSIVolumeRegisterWithoutValidation(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	nodeOnly := csiNode("n", "np", true)
	if _, err := s.Nodes().Register(ctx, nodeOnly); err != nil {
		t.Fatal(err)
	}
	fc := startFakeController(t, s, nodeOnly, confirmValidate)
	if _, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{csiVol("v1", "np")}); err != nil {
		t.Fatal(err)
	}
	if ops := fc.calls(); len(ops) != 0 {
		t.Fatalf("a plugin without a controller was asked: %+v", ops)
	}
	fc.stop()

	node := validateNode(t, s, true)
	fc = startFakeController(t, s, node, func(*structs.CSIControllerOp) *structs.CSIControllerOpResult {
		return &structs.CSIControllerOpResult{Validation: &structs.CSIVolumeValidation{Unsupported: true,
			Message: "not implemented by the driver: csi ValidateVolumeCapabilities"}}
	})
	if _, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{csiVol("v2", "hp")}); err != nil {
		t.Fatalf("a driver that cannot validate: %v", err)
	}
	if got, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v2"); got == nil || len(validated(fc.calls())) != 1 {
		t.Fatalf("stored %+v after %d calls", got, len(fc.calls()))
	}
}

// One request may name more volumes than there are claim-lock stripes:
// the stripes they share are locked once.
func TestCSIVolumeRegisterManyVolumesLocks(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	if _, err := s.Nodes().Register(ctx, csiNode("n", "np", true)); err != nil {
		t.Fatal(err)
	}
	vols := make([]*structs.CSIVolume, 2*csivolumes.LockStripes+1)
	for i := range vols {
		vols[i] = csiVol(fmt.Sprintf("v%d", i), "np")
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.CSI().RegisterCSIVolumes(ctx, vols)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the registration deadlocked on its own claim locks")
	}
}

// A volume create provisions through the controller and registers the
// new volume without asking the driver to validate what it just made; a
// later create of the same volume (an update, by register's rules) that
// changes its capabilities is validated.
func TestCSIVolumeCreateNotValidatedAgain(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	node := csiNode("a", "hp", true)
	node.CSINodePlugins["hp"].RequiresControllerPlugin = true
	node.CSIControllerPlugins = map[string]*structs.CSIInfo{"hp": {PluginID: "hp", Healthy: true, RequiresControllerPlugin: true,
		ControllerInfo: &structs.CSIControllerInfo{SupportsAttachDetach: true, SupportsCreateDelete: true}}}
	if _, err := s.Nodes().Register(ctx, node); err != nil {
		t.Fatal(err)
	}
	fc := startFakeController(t, s, node, func(op *structs.CSIControllerOp) *structs.CSIControllerOpResult {
		if op.Kind == structs.CSIControllerOpCreate {
			return &structs.CSIControllerOpResult{Created: &structs.CSIVolume{ExternalID: "made-1"}}
		}
		return confirmValidate(op)
	})
	if _, _, err := s.CSI().CreateCSIVolumes(ctx, []*structs.CSIVolume{csiVol("v1", "hp")}); err != nil {
		t.Fatal(err)
	}
	ops := fc.calls()
	if len(ops) != 1 || ops[0].Kind != structs.CSIControllerOpCreate {
		t.Fatalf("controller ops of a create: %+v", ops)
	}
	u := csiVol("v1", "hp")
	u.RequestedCapabilities = append(u.RequestedCapabilities, &structs.CSIVolumeCapability{
		AccessMode: structs.CSIVolumeAccessModeMultiNodeReader, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem})
	if _, _, err := s.CSI().CreateCSIVolumes(ctx, []*structs.CSIVolume{u}); err != nil {
		t.Fatal(err)
	}
	ops = validated(fc.calls())
	if len(ops) != 1 || ops[0].ExternalVolumeID != "made-1" || len(ops[0].Capabilities) != 2 {
		t.Fatalf("validate ops of the update: %+v", ops)
	}
}
