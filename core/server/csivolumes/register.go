package csivolumes

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// csiValidateTimeout bounds the controller validation of one register
// request, all its volumes together. It is shorter than a controller
// call's own bound (csiControllerTimeout): a register is an operator
// waiting on the API, and a controller that has not answered within it
// gets a retryable refusal (unavailable) rather than a hung request. A
// call its client is still running when the bound passes keeps the
// plugin locked until the client reports (controllerQueue.linger).
const csiValidateTimeout = time.Minute

// Register registers volumes, or updates registered ones by the
// rules of an update (structs.CSIVolume.Merge), all of them in one Raft
// entry, and returns its index. Each volume names its namespace. The
// plugin must be known to the cluster (a node has fingerprinted it), and a
// volume whose plugin needs a controller is refused while none has ever
// been seen. The volumes in fresh were just
// provisioned by their driver with these capabilities (Create) and are
// not validated again.
//
// When the plugin needs a controller, each new volume, and each update
// that changes the capabilities or mount options, is first validated by
// the driver through a controller client (ValidateVolumeCapabilities, as
// Nomad's register does): a refusal fails the request with ErrInvalid
// naming the volume and the driver's reason, a controller that cannot be
// reached with ErrUnavailable, and nothing is written. A driver without
// the call is not validated (logged). The request's volumes are locked
// against claims and other writes from the read to the write.
func (vs *Volumes) Register(ctx context.Context, vols []*structs.CSIVolume, fresh map[Key]bool) (uint64, error) {
	switch {
	case len(vols) == 0:
		return 0, structs.NewError(structs.ErrInvalid, "Volumes: at least one volume is required")
	case len(vols) > structs.MaxCSIVolumesPerRequest:
		return 0, structs.NewError(structs.ErrInvalid, "Volumes: %d volumes, more than %d per request", len(vols), structs.MaxCSIVolumesPerRequest)
	}
	seen := make(map[Key]bool, len(vols))
	for _, in := range vols {
		if err := in.Validate(); err != nil {
			return 0, err
		}
		k := Key{in.Namespace, in.ID}
		if seen[k] {
			return 0, structs.NewError(structs.ErrInvalid, "volume %q: named twice in one request", in.ID)
		}
		seen[k] = true
	}
	// Claims of these volumes wait from the read to the write, through the
	// controller validation: what is validated and checked is what is
	// written.
	keys := make([][2]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, [2]string{k.NS, k.ID})
	}
	defer vs.locks.lockAll(keys)()

	st := vs.state()
	out := make([]*structs.CSIVolume, 0, len(vols))
	var validate []*structs.CSIVolume
	plugins := map[string]*structs.CSIPlugin{}
	for _, in := range vols {
		ns, err := st.NamespaceByName(nil, in.Namespace)
		if err != nil {
			return 0, err
		}
		if ns == nil {
			return 0, structs.NewError(structs.ErrInvalid, "volume %q: namespace %q does not exist", in.ID, in.Namespace)
		}
		plugin, err := st.CSIPluginByID(nil, in.PluginID)
		if err != nil {
			return 0, err
		}
		if plugin == nil {
			return 0, structs.NewError(structs.ErrInvalid, "volume %q: no CSI plugin named %q could be found", in.ID, in.PluginID)
		}
		if plugin.ControllerRequired && len(plugin.Controllers) == 0 {
			return 0, structs.NewError(structs.ErrInvalid, "volume %q: plugin %q requires a controller plugin, and none is running", in.ID, in.PluginID)
		}
		plugins[plugin.ID] = plugin
		old, err := st.CSIVolumeRaw(nil, in.Namespace, in.ID)
		if err != nil {
			return 0, err
		}
		v := in.Copy()
		if old != nil {
			v = old.Copy()
			if err := v.Merge(in); err != nil {
				return 0, err
			}
		}
		// What readers fill in, and claims, are never taken from a caller.
		v.ReadAllocs, v.WriteAllocs = nil, nil
		v.ReadClaims, v.WriteClaims, v.PastClaims = nil, nil, nil
		v.CreateIndex, v.ModifyIndex = 0, 0
		out = append(out, v)
		if plugin.ControllerRequired && !fresh[Key{v.Namespace, v.ID}] && (old == nil || !old.SameCapabilities(v)) {
			validate = append(validate, v)
		}
	}
	if len(validate) > 0 {
		vctx, cancel := context.WithTimeout(ctx, csiValidateTimeout)
		defer cancel()
		for _, v := range validate {
			if err := vs.controllerValidate(vctx, v, plugins[v.PluginID]); err != nil {
				return 0, err
			}
		}
	}
	req := &structs.CSIVolumeRegisterRequest{Volumes: out}
	byNS := map[string][]string{}
	for _, v := range out {
		byNS[v.Namespace] = append(byNS[v.Namespace], v.ID)
	}
	for _, ns := range slices.Sorted(maps.Keys(byNS)) {
		evals, err := vs.WaiterEvals(ns, byNS[ns])
		if err != nil {
			return 0, err
		}
		req.Evals = append(req.Evals, evals...)
	}
	idx, err := vs.apply(structs.CSIVolumeRegisterRequestType, req)
	if err != nil {
		return 0, err
	}
	for _, v := range out {
		vs.logger.Info("csi volume registered", "namespace", v.Namespace, "volume", v.ID, "plugin", v.PluginID, "index", idx)
	}
	return idx, nil
}

// controllerValidate asks a controller client of the volume's plugin
// whether the driver supports the volume's capabilities. The driver's
// refusal, or a volume it does not know, is ErrInvalid naming the volume
// and the driver's message; a controller that cannot be reached keeps its
// kind (unavailable, no leader).
func (vs *Volumes) controllerValidate(ctx context.Context, v *structs.CSIVolume, plugin *structs.CSIPlugin) error {
	r, by, err := vs.ControllerCall(ctx, &structs.CSIControllerOp{
		Kind: structs.CSIControllerOpValidate, PluginID: v.PluginID, ExternalVolumeID: v.RemoteID(),
		Capabilities: v.RequestedCapabilities, MountOptions: v.MountOptions,
		Parameters: v.Parameters, VolumeContext: v.Context, Secrets: v.Secrets,
	})
	if err != nil {
		kind := kindOf(err)
		if kind == structs.ErrNotFound {
			kind = structs.ErrInvalid // the driver's volume, not a drover object, is missing
		}
		return structs.NewError(kind, "volume %q: controller validate: %v", v.ID, err)
	}
	val := r.Validation
	switch {
	case val == nil:
		return structs.NewError(structs.ErrUnavailable, "volume %q: controller validate: the controller client on node %s gave no answer", v.ID, by)
	case val.Unsupported:
		vs.logger.Warn("csi plugin cannot validate volume capabilities; registering without validation",
			"namespace", v.Namespace, "volume", v.ID, "plugin", plugin.ID, "node_id", by, "message", val.Message)
		return nil
	case !val.Confirmed:
		return structs.NewError(structs.ErrInvalid, "volume %q: plugin %q does not support the volume's capabilities: %s", v.ID, plugin.ID, val.Message)
	}
	vs.logger.Debug("csi volume capabilities validated", "namespace", v.Namespace, "volume", v.ID, "plugin", plugin.ID, "node_id", by)
	return nil
}

// Deregister deletes volumes of one namespace, all or none. A
// volume with claims is refused ("volume in use"), unless force is set
// and every claiming allocation is terminal; the FSM checks again should
// a claim arrive in between.
func (vs *Volumes) Deregister(ns string, ids []string, force bool) (uint64, error) {
	switch {
	case ns == "":
		return 0, structs.NewError(structs.ErrInvalid, "Namespace: missing")
	case len(ids) == 0:
		return 0, structs.NewError(structs.ErrInvalid, "VolumeIDs: at least one volume ID is required")
	case len(ids) > structs.MaxCSIVolumesPerRequest:
		return 0, structs.NewError(structs.ErrInvalid, "VolumeIDs: %d volumes, more than %d per request", len(ids), structs.MaxCSIVolumesPerRequest)
	}
	st := vs.state()
	for _, id := range ids {
		if !structs.ValidCSIID(id) {
			return 0, structs.NewError(structs.ErrInvalid, "volume ID %q: must be 1 to %d bytes of letters, digits and _ . - [ ]", id, structs.MaxCSIVolumeIDBytes)
		}
		v, err := st.CSIVolumeByID(nil, ns, id)
		if err != nil {
			return 0, err
		}
		if v == nil {
			return 0, structs.NewError(structs.ErrNotFound, "volume not found: %s", id)
		}
		if v.InUse() && !force {
			return 0, structs.NewError(structs.ErrConflict, "volume in use: %s", id)
		}
	}
	idx, err := vs.apply(structs.CSIVolumeDeregisterRequestType, &structs.CSIVolumeDeregisterRequest{Namespace: ns, VolumeIDs: ids, Force: force})
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		vs.logger.Info("csi volume deregistered", "namespace", ns, "volume", id, "force", force, "index", idx)
	}
	return idx, nil
}

// Key names a volume.
type Key struct{ NS, ID string }
