package server

import (
	"context"
	"errors"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

// CSIVolumeCreateReply is what CreateCSIVolumes returns: the volumes as
// registered (with the driver's IDs), and the index.
type CSIVolumeCreateReply struct {
	Volumes []*structs.CSIVolume
	Index   uint64
}

// CreateCSIVolumes provisions volumes through a controller client of each
// volume's plugin (CreateVolume, idempotent on the name), then registers
// them with the external ID, capacity, context and topologies the driver
// answered. A volume already registered with an external ID is only
// updated (register's rules). A follower forwards to the leader.
func (s *Server) CreateCSIVolumes(ctx context.Context, vols []*structs.CSIVolume) ([]*structs.CSIVolume, uint64, error) {
	r, err := s.createCSIVolumes(ctx, vols)
	if err != nil {
		return nil, 0, err
	}
	return r.Volumes, r.Index, nil
}

func (s *Server) createCSIVolumes(ctx context.Context, vols []*structs.CSIVolume) (*CSIVolumeCreateReply, error) {
	if r, ok, err := forward[CSIVolumeRegisterArgs, CSIVolumeCreateReply](ctx, s, "CSIVolume.Create", &CSIVolumeRegisterArgs{Volumes: vols}); ok {
		return r, err
	}
	switch {
	case len(vols) == 0:
		return nil, structs.NewError(structs.ErrInvalid, "Volumes: at least one volume is required")
	case len(vols) > structs.MaxCSIVolumesPerRequest:
		return nil, structs.NewError(structs.ErrInvalid, "Volumes: %d volumes, more than %d per request", len(vols), structs.MaxCSIVolumesPerRequest)
	}
	st := s.State()
	out := make([]*structs.CSIVolume, 0, len(vols))
	fresh := map[csiVolumeKey]bool{}
	for _, in := range vols {
		if err := in.Validate(); err != nil {
			return nil, err
		}
		plugin, err := st.CSIPluginByID(nil, in.PluginID)
		if err != nil {
			return nil, err
		}
		if plugin == nil {
			return nil, structs.NewError(structs.ErrInvalid, "volume %q: no CSI plugin named %q could be found", in.ID, in.PluginID)
		}
		if !canCreate(plugin) {
			return nil, structs.NewError(structs.ErrInvalid, "volume %q: plugin %q has no controller that can create volumes", in.ID, in.PluginID)
		}
		v := in.Copy()
		old, err := st.CSIVolumeRaw(nil, in.Namespace, in.ID)
		if err != nil {
			return nil, err
		}
		if old != nil && old.ExternalID != "" {
			v.ExternalID = old.ExternalID // created before: register's update rules apply
			out = append(out, v)
			continue
		}
		if v.Name == "" {
			v.Name = v.ID
		}
		r, _, err := s.controllerCall(ctx, &structs.CSIControllerOp{
			Kind: structs.CSIControllerOpCreate, PluginID: v.PluginID, Secrets: v.Secrets, Create: v,
		})
		if err != nil {
			return nil, structs.NewError(kindOf(err), "volume %q: controller create: %v", v.ID, err)
		}
		c := r.Created
		if c == nil || c.ExternalID == "" || len(c.ExternalID) > structs.MaxCSIExternalIDBytes ||
			len(c.Context) > structs.MaxCSIVolumeMapEntries || len(c.Topologies) > structs.MaxCSITopologies {
			return nil, structs.NewError(structs.ErrInvalid, "volume %q: the controller's answer to create is missing its ID or is out of bounds", v.ID)
		}
		v.ExternalID, v.Capacity, v.Context, v.Topologies = c.ExternalID, c.Capacity, c.Context, c.Topologies
		s.logger.Info("csi volume created", "namespace", v.Namespace, "volume", v.ID, "plugin", v.PluginID, "external_id", v.ExternalID)
		out = append(out, v)
		fresh[csiVolumeKey{v.Namespace, v.ID}] = true
	}
	// The driver just made the fresh ones with these capabilities: only
	// updates of volumes created before are validated.
	idx, err := s.registerCSIVolumes(ctx, out, fresh)
	if err != nil {
		return nil, err
	}
	reg := make([]*structs.CSIVolume, 0, len(out))
	for _, v := range out {
		if got, err := s.State().CSIVolumeRaw(nil, v.Namespace, v.ID); err == nil && got != nil {
			reg = append(reg, got.Redacted())
		}
	}
	return &CSIVolumeCreateReply{Volumes: reg, Index: idx}, nil
}

func canCreate(p *structs.CSIPlugin) bool {
	for _, info := range p.Controllers {
		if info != nil && info.Healthy && info.ControllerInfo != nil && info.ControllerInfo.SupportsCreateDelete {
			return true
		}
	}
	return false
}

// DeleteCSIVolume deletes an unclaimed volume through a controller client
// (DeleteVolume; NotFound counts as deleted), then deregisters it. A
// follower forwards to the leader.
func (s *Server) DeleteCSIVolume(ctx context.Context, ns, id string, secrets map[string]string) (uint64, error) {
	args := &CSIVolumeDeleteArgs{Namespace: ns, VolumeID: id, Secrets: secrets}
	if r, ok, err := forward[CSIVolumeDeleteArgs, IndexReply](ctx, s, "CSIVolume.Delete", args); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if !structs.ValidCSIID(id) {
		return 0, structs.NewError(structs.ErrInvalid, "volume ID %q: must be 1 to %d bytes of letters, digits and _ . - [ ]", id, structs.MaxCSIVolumeIDBytes)
	}
	if len(secrets) > structs.MaxCSIVolumeMapEntries {
		return 0, structs.NewError(structs.ErrInvalid, "secrets: more than %d", structs.MaxCSIVolumeMapEntries)
	}
	unlock := s.claimLocks.lock(ns, id)
	v, err := s.State().CSIVolumeByID(nil, ns, id)
	if err != nil {
		unlock()
		return 0, err
	}
	if v == nil {
		unlock()
		return 0, structs.NewError(structs.ErrNotFound, "volume not found: %s", id)
	}
	if v.InUse() {
		unlock()
		return 0, structs.NewError(structs.ErrConflict, "volume in use: %s", id)
	}
	if secrets == nil {
		secrets = v.Secrets
	}
	_, _, err = s.controllerCall(ctx, &structs.CSIControllerOp{
		Kind: structs.CSIControllerOpDelete, PluginID: v.PluginID, ExternalVolumeID: v.RemoteID(), Secrets: secrets,
	})
	unlock()
	if err != nil && !errors.Is(err, structs.ErrNotFound) {
		return 0, structs.NewError(kindOf(err), "volume %q: controller delete: %v", id, err)
	}
	s.logger.Info("csi volume deleted", "namespace", ns, "volume", id, "plugin", v.PluginID)
	return s.DeregisterCSIVolumes(ctx, ns, []string{id}, false)
}

// CSIVolumeDeleteArgs names the volume to delete.
type CSIVolumeDeleteArgs struct {
	Namespace string
	VolumeID  string
	Secrets   map[string]string
}

func (s *Server) registerCSICreateRPC(rs *rpc.Server, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "CSIVolume.Create", func(ctx context.Context, a *CSIVolumeRegisterArgs) (*CSIVolumeCreateReply, error) {
		return s.createCSIVolumes(mark(ctx), a.Volumes)
	})
	rpc.Handle(rs, "CSIVolume.Detach", func(ctx context.Context, a *CSIVolumeDetachArgs) (*IndexReply, error) {
		idx, err := s.DetachCSIVolume(mark(ctx), a.Namespace, a.VolumeID, a.NodeID)
		if err != nil {
			return nil, err
		}
		return &IndexReply{Index: idx}, nil
	})
	rpc.Handle(rs, "CSIVolume.Delete", func(ctx context.Context, a *CSIVolumeDeleteArgs) (*IndexReply, error) {
		idx, err := s.DeleteCSIVolume(mark(ctx), a.Namespace, a.VolumeID, a.Secrets)
		if err != nil {
			return nil, err
		}
		return &IndexReply{Index: idx}, nil
	})
}

// DetachCSIVolume releases every claim of vol on node (`volume detach`):
// a live node's client node-detaches each (see releaseOne), then the
// controller detaches. A follower forwards to the leader.
func (s *Server) DetachCSIVolume(ctx context.Context, ns, id, nodeID string) (uint64, error) {
	args := &CSIVolumeDetachArgs{Namespace: ns, VolumeID: id, NodeID: nodeID}
	if r, ok, err := forward[CSIVolumeDetachArgs, IndexReply](ctx, s, "CSIVolume.Detach", args); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if nodeID == "" {
		return 0, structs.NewError(structs.ErrInvalid, "detach requires node ID")
	}
	if !structs.ValidCSIID(id) {
		return 0, structs.NewError(structs.ErrInvalid, "volume ID %q: must be 1 to %d bytes of letters, digits and _ . - [ ]", id, structs.MaxCSIVolumeIDBytes)
	}
	return s.UnpublishClaim(ctx, ns, id, &structs.CSIVolumeClaim{NodeID: nodeID, Mode: structs.CSIVolumeClaimGC})
}

// CSIVolumeDetachArgs names the volume and node to detach.
type CSIVolumeDetachArgs struct {
	Namespace string
	VolumeID  string
	NodeID    string
}
