package server

import (
	"context"
	"maps"
	"slices"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

// RPC argument and reply types of the CSI volume endpoints.
type (
	CSIVolumeRegisterArgs   struct{ Volumes []*structs.CSIVolume }
	CSIVolumeDeregisterArgs struct {
		Namespace string
		VolumeIDs []string
		Force     bool
	}
)

// RegisterCSIVolumes registers volumes, or updates registered ones by the
// rules of an update (structs.CSIVolume.Merge), all of them in one Raft
// entry, and returns its index. Each volume names its namespace. The
// plugin must be known to the cluster (a node has fingerprinted it), and a
// volume whose plugin needs a controller is refused while none has ever
// been seen. A follower forwards to the leader.
func (s *Server) RegisterCSIVolumes(ctx context.Context, vols []*structs.CSIVolume) (uint64, error) {
	if r, ok, err := forward[CSIVolumeRegisterArgs, IndexReply](ctx, s, "CSIVolume.Register", &CSIVolumeRegisterArgs{Volumes: vols}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	switch {
	case len(vols) == 0:
		return 0, structs.NewError(structs.ErrInvalid, "Volumes: at least one volume is required")
	case len(vols) > structs.MaxCSIVolumesPerRequest:
		return 0, structs.NewError(structs.ErrInvalid, "Volumes: %d volumes, more than %d per request", len(vols), structs.MaxCSIVolumesPerRequest)
	}
	st := s.State()
	type key struct{ ns, id string }
	seen := make(map[key]bool, len(vols))
	out := make([]*structs.CSIVolume, 0, len(vols))
	for _, in := range vols {
		if err := in.Validate(); err != nil {
			return 0, err
		}
		k := key{in.Namespace, in.ID}
		if seen[k] {
			return 0, structs.NewError(structs.ErrInvalid, "volume %q: named twice in one request", in.ID)
		}
		seen[k] = true
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
	}
	req := &structs.CSIVolumeRegisterRequest{Volumes: out}
	byNS := map[string][]string{}
	for _, v := range out {
		byNS[v.Namespace] = append(byNS[v.Namespace], v.ID)
	}
	for _, ns := range slices.Sorted(maps.Keys(byNS)) {
		evals, err := s.volumeWaiterEvals(ns, byNS[ns])
		if err != nil {
			return 0, err
		}
		req.Evals = append(req.Evals, evals...)
	}
	idx, err := s.raftApply(structs.CSIVolumeRegisterRequestType, req)
	if err != nil {
		return 0, err
	}
	for _, v := range out {
		s.logger.Info("csi volume registered", "namespace", v.Namespace, "volume", v.ID, "plugin", v.PluginID, "index", idx)
	}
	return idx, nil
}

// DeregisterCSIVolumes deletes volumes of one namespace, all or none. A
// volume with claims is refused ("volume in use"), unless force is set
// and every claiming allocation is terminal; the FSM checks again should
// a claim arrive in between. A follower forwards to the leader.
func (s *Server) DeregisterCSIVolumes(ctx context.Context, ns string, ids []string, force bool) (uint64, error) {
	args := &CSIVolumeDeregisterArgs{Namespace: ns, VolumeIDs: ids, Force: force}
	if r, ok, err := forward[CSIVolumeDeregisterArgs, IndexReply](ctx, s, "CSIVolume.Deregister", args); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	switch {
	case ns == "":
		return 0, structs.NewError(structs.ErrInvalid, "Namespace: missing")
	case len(ids) == 0:
		return 0, structs.NewError(structs.ErrInvalid, "VolumeIDs: at least one volume ID is required")
	case len(ids) > structs.MaxCSIVolumesPerRequest:
		return 0, structs.NewError(structs.ErrInvalid, "VolumeIDs: %d volumes, more than %d per request", len(ids), structs.MaxCSIVolumesPerRequest)
	}
	st := s.State()
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
	idx, err := s.raftApply(structs.CSIVolumeDeregisterRequestType, &structs.CSIVolumeDeregisterRequest{Namespace: ns, VolumeIDs: ids, Force: force})
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		s.logger.Info("csi volume deregistered", "namespace", ns, "volume", id, "force", force, "index", idx)
	}
	return idx, nil
}

// registerCSIRPC exposes the volume writes, which followers forward to the
// leader. They are absent from rpcAccess: server-only.
func (s *Server) registerCSIRPC(rs *rpc.Server, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "CSIVolume.Register", func(ctx context.Context, a *CSIVolumeRegisterArgs) (*IndexReply, error) {
		idx, err := s.RegisterCSIVolumes(mark(ctx), a.Volumes)
		if err != nil {
			return nil, err
		}
		return &IndexReply{Index: idx}, nil
	})
	rpc.Handle(rs, "CSIVolume.Deregister", func(ctx context.Context, a *CSIVolumeDeregisterArgs) (*IndexReply, error) {
		idx, err := s.DeregisterCSIVolumes(mark(ctx), a.Namespace, a.VolumeIDs, a.Force)
		if err != nil {
			return nil, err
		}
		return &IndexReply{Index: idx}, nil
	})
}
