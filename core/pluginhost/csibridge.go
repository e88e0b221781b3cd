package pluginhost

import (
	"context"
	"errors"

	"github.com/drover-org/drover/sdk/csibridge"
	"github.com/drover-org/drover/sdk/shared"
)

// CSIBridgeKind is the csi-bridge plugin kind. Its Init is a Ping, which
// proves the instance serves the kind; the bridge declares nothing.
var CSIBridgeKind = NewKind(KindSpec[csibridge.Bridge, struct{}]{
	Name:   shared.KindCSIBridge,
	Plugin: &csibridge.Plugin{},
	Init: func(ctx context.Context, b csibridge.Bridge) (struct{}, error) {
		return struct{}{}, csibridge.Ping(ctx, b)
	},
})

// CSIBridge returns the csi-bridge the client speaks CSI through: every
// call goes to the current instance of the first csi-bridge plugin in
// config order (the built-in one, or the one a plugin_dir binary serves).
// The bridge holds no state, so a call after a reload simply reaches the
// new process.
func (h *Host) CSIBridge() csibridge.Bridge { return routedBridge{clients: Get(h, CSIBridgeKind)} }

// routedBridge implements csibridge.Bridge over the host.
type routedBridge struct {
	clients Clients[csibridge.Bridge, struct{}]
}

var errNoBridge = errors.Join(csibridge.ErrUnavailable, errors.New("no csi-bridge plugin is loaded"))

func (r routedBridge) call(ctx context.Context, fn func(context.Context, csibridge.Bridge) error) error {
	names := r.clients.Names()
	if len(names) == 0 {
		return errNoBridge
	}
	return r.clients.Call(ctx, names[0], fn)
}

func (r routedBridge) Fingerprint(ctx context.Context, req csibridge.FingerprintRequest) (out *csibridge.Fingerprint, err error) {
	err = r.call(ctx, func(ctx context.Context, b csibridge.Bridge) (e error) { out, e = b.Fingerprint(ctx, req); return })
	return
}

func (r routedBridge) ControllerPublish(ctx context.Context, req csibridge.ControllerPublishRequest) (out map[string]string, err error) {
	err = r.call(ctx, func(ctx context.Context, b csibridge.Bridge) (e error) {
		out, e = b.ControllerPublish(ctx, req)
		return
	})
	return
}

func (r routedBridge) ControllerUnpublish(ctx context.Context, req csibridge.ControllerUnpublishRequest) error {
	return r.call(ctx, func(ctx context.Context, b csibridge.Bridge) error { return b.ControllerUnpublish(ctx, req) })
}

func (r routedBridge) NodeStage(ctx context.Context, req csibridge.NodeStageRequest) error {
	return r.call(ctx, func(ctx context.Context, b csibridge.Bridge) error { return b.NodeStage(ctx, req) })
}

func (r routedBridge) NodeUnstage(ctx context.Context, req csibridge.NodeUnstageRequest) error {
	return r.call(ctx, func(ctx context.Context, b csibridge.Bridge) error { return b.NodeUnstage(ctx, req) })
}

func (r routedBridge) NodePublish(ctx context.Context, req csibridge.NodePublishRequest) error {
	return r.call(ctx, func(ctx context.Context, b csibridge.Bridge) error { return b.NodePublish(ctx, req) })
}

func (r routedBridge) NodeUnpublish(ctx context.Context, req csibridge.NodeUnpublishRequest) error {
	return r.call(ctx, func(ctx context.Context, b csibridge.Bridge) error { return b.NodeUnpublish(ctx, req) })
}

func (r routedBridge) CreateVolume(ctx context.Context, req csibridge.CreateVolumeRequest) (out *csibridge.CreatedVolume, err error) {
	err = r.call(ctx, func(ctx context.Context, b csibridge.Bridge) (e error) { out, e = b.CreateVolume(ctx, req); return })
	return
}

func (r routedBridge) DeleteVolume(ctx context.Context, req csibridge.DeleteVolumeRequest) error {
	return r.call(ctx, func(ctx context.Context, b csibridge.Bridge) error { return b.DeleteVolume(ctx, req) })
}

func (r routedBridge) ValidateVolumeCapabilities(ctx context.Context, req csibridge.ValidateVolumeCapabilitiesRequest) (out *csibridge.Validation, err error) {
	err = r.call(ctx, func(ctx context.Context, b csibridge.Bridge) (e error) {
		out, e = b.ValidateVolumeCapabilities(ctx, req)
		return
	})
	return
}

var _ csibridge.Bridge = routedBridge{}
