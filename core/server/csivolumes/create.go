package csivolumes

import (
	"context"
	"errors"

	"github.com/drover-org/drover/core/structs"
)

// Create provisions volumes through a controller client of each
// volume's plugin (CreateVolume, idempotent on the name) and returns them
// with the external ID, capacity, context and topologies the driver
// answered, to be registered; fresh names those the driver just made (a
// volume already registered with an external ID is returned as is, to be
// updated by register's rules, and validated). See Registered.
func (vs *Volumes) Create(ctx context.Context, vols []*structs.CSIVolume) ([]*structs.CSIVolume, map[Key]bool, error) {
	switch {
	case len(vols) == 0:
		return nil, nil, structs.NewError(structs.ErrInvalid, "Volumes: at least one volume is required")
	case len(vols) > structs.MaxCSIVolumesPerRequest:
		return nil, nil, structs.NewError(structs.ErrInvalid, "Volumes: %d volumes, more than %d per request", len(vols), structs.MaxCSIVolumesPerRequest)
	}
	st := vs.state()
	out := make([]*structs.CSIVolume, 0, len(vols))
	fresh := map[Key]bool{}
	for _, in := range vols {
		if err := in.Validate(); err != nil {
			return nil, nil, err
		}
		plugin, err := st.CSIPluginByID(nil, in.PluginID)
		if err != nil {
			return nil, nil, err
		}
		if plugin == nil {
			return nil, nil, structs.NewError(structs.ErrInvalid, "volume %q: no CSI plugin named %q could be found", in.ID, in.PluginID)
		}
		if !canCreate(plugin) {
			return nil, nil, structs.NewError(structs.ErrInvalid, "volume %q: plugin %q has no controller that can create volumes", in.ID, in.PluginID)
		}
		v := in.Copy()
		old, err := st.CSIVolumeRaw(nil, in.Namespace, in.ID)
		if err != nil {
			return nil, nil, err
		}
		if old != nil && old.ExternalID != "" {
			v.ExternalID = old.ExternalID // created before: register's update rules apply
			out = append(out, v)
			continue
		}
		if v.Name == "" {
			v.Name = v.ID
		}
		r, _, err := vs.ControllerCall(ctx, &structs.CSIControllerOp{
			Kind: structs.CSIControllerOpCreate, PluginID: v.PluginID, Secrets: v.Secrets, Create: v,
		})
		if err != nil {
			return nil, nil, structs.NewError(kindOf(err), "volume %q: controller create: %v", v.ID, err)
		}
		c := r.Created
		if c == nil || c.ExternalID == "" || len(c.ExternalID) > structs.MaxCSIExternalIDBytes ||
			len(c.Context) > structs.MaxCSIVolumeMapEntries || len(c.Topologies) > structs.MaxCSITopologies {
			return nil, nil, structs.NewError(structs.ErrInvalid, "volume %q: the controller's answer to create is missing its ID or is out of bounds", v.ID)
		}
		v.ExternalID, v.Capacity, v.Context, v.Topologies = c.ExternalID, c.Capacity, c.Context, c.Topologies
		vs.logger.Info("csi volume created", "namespace", v.Namespace, "volume", v.ID, "plugin", v.PluginID, "external_id", v.ExternalID)
		out = append(out, v)
		fresh[Key{v.Namespace, v.ID}] = true
	}
	return out, fresh, nil
}

// Registered returns the volumes as stored, redacted (the answer to a
// create once registered).
func (vs *Volumes) Registered(vols []*structs.CSIVolume) []*structs.CSIVolume {
	reg := make([]*structs.CSIVolume, 0, len(vols))
	for _, v := range vols {
		if got, err := vs.state().CSIVolumeRaw(nil, v.Namespace, v.ID); err == nil && got != nil {
			reg = append(reg, got.Redacted())
		}
	}
	return reg
}

func canCreate(p *structs.CSIPlugin) bool {
	for _, info := range p.Controllers {
		if info != nil && info.Healthy && info.ControllerInfo != nil && info.ControllerInfo.SupportsCreateDelete {
			return true
		}
	}
	return false
}

// Delete deletes an unclaimed volume's storage through a controller
// client (DeleteVolume; NotFound counts as deleted); the caller then
// deregisters it.
func (vs *Volumes) Delete(ctx context.Context, ns, id string, secrets map[string]string) error {
	if !structs.ValidCSIID(id) {
		return structs.NewError(structs.ErrInvalid, "volume ID %q: must be 1 to %d bytes of letters, digits and _ . - [ ]", id, structs.MaxCSIVolumeIDBytes)
	}
	if len(secrets) > structs.MaxCSIVolumeMapEntries {
		return structs.NewError(structs.ErrInvalid, "secrets: more than %d", structs.MaxCSIVolumeMapEntries)
	}
	unlock := vs.locks.lock(ns, id)
	v, err := vs.state().CSIVolumeByID(nil, ns, id)
	if err != nil {
		unlock()
		return err
	}
	if v == nil {
		unlock()
		return structs.NewError(structs.ErrNotFound, "volume not found: %s", id)
	}
	if v.InUse() {
		unlock()
		return structs.NewError(structs.ErrConflict, "volume in use: %s", id)
	}
	if secrets == nil {
		secrets = v.Secrets
	}
	_, _, err = vs.ControllerCall(ctx, &structs.CSIControllerOp{
		Kind: structs.CSIControllerOpDelete, PluginID: v.PluginID, ExternalVolumeID: v.RemoteID(), Secrets: secrets,
	})
	unlock()
	if err != nil && !errors.Is(err, structs.ErrNotFound) {
		return structs.NewError(kindOf(err), "volume %q: controller delete: %v", id, err)
	}
	vs.logger.Info("csi volume deleted", "namespace", ns, "volume", id, "plugin", v.PluginID)
	return nil
}
