package server

import (
	"context"
	"time"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server/csivolumes"
	"github.com/drover-org/drover/core/structs"
)

// CSI volumes and claims are package csivolumes, run on the leader. The
// methods here are the CSI endpoint (Server.CSI): they forward from a
// follower to the leader, authenticate clients, and call in.

// maxVolumeWaiterEvals bounds the evals one volume write carries
// (csivolumes.Config.MaxWaiterEvals); tests lower it before starting a
// server.
var maxVolumeWaiterEvals = 128

func newCSIVolumes(s *Server) *csivolumes.Volumes {
	return csivolumes.New(csivolumes.Config{
		State: s.State, Apply: s.raftApply, NewEval: s.newEval, Logger: s.logger,
		MaxWaiterEvals: maxVolumeWaiterEvals,
	})
}

// RPC argument and reply types of the CSI volume endpoints.
type (
	CSIVolumeRegisterArgs   struct{ Volumes []*structs.CSIVolume }
	CSIVolumeDeregisterArgs struct {
		Namespace string
		VolumeIDs []string
		Force     bool
	}
	// CSIVolumeCreateReply is what CreateCSIVolumes returns: the volumes
	// as registered (with the driver's IDs), and the index.
	CSIVolumeCreateReply struct {
		Volumes []*structs.CSIVolume
		Index   uint64
	}
	// CSIVolumeDeleteArgs names the volume to delete.
	CSIVolumeDeleteArgs struct {
		Namespace string
		VolumeID  string
		Secrets   map[string]string
	}
	// CSIVolumeDetachArgs names the volume and node to detach.
	CSIVolumeDetachArgs struct {
		Namespace string
		VolumeID  string
		NodeID    string
	}
)

// ClaimVolume claims a volume for one of the calling node's allocations
// (csivolumes.Volumes.Claim). A follower forwards to the leader.
func (ep CSI) ClaimVolume(ctx context.Context, args *structs.CSIVolumeClaimArgs) (*structs.CSIVolumeClaimReply, error) {
	s := ep.srv
	if r, ok, err := forward[structs.CSIVolumeClaimArgs, structs.CSIVolumeClaimReply](ctx, s, "CSIVolume.Claim", args); ok {
		return r, err
	}
	if err := csivolumes.CheckClaimArgs(args); err != nil {
		return nil, err
	}
	node, err := s.authNode(args.NodeID, args.SecretID)
	if err != nil {
		return nil, err
	}
	return s.csi.Claim(ctx, node, args)
}

// UnpublishVolume is a client's release of one of its node's claims
// (csivolumes.Volumes.Unpublish). A follower forwards to the leader.
func (ep CSI) UnpublishVolume(ctx context.Context, args *structs.CSIVolumeUnpublishArgs) (*structs.CSIVolumeUnpublishReply, error) {
	s := ep.srv
	if r, ok, err := forward[structs.CSIVolumeUnpublishArgs, structs.CSIVolumeUnpublishReply](ctx, s, "CSIVolume.Unpublish", args); ok {
		return r, err
	}
	if args == nil || args.Claim == nil {
		return nil, structs.NewError(structs.ErrInvalid, "missing volume claim")
	}
	node, err := s.authNode(args.NodeID, args.SecretID)
	if err != nil {
		return nil, err
	}
	return s.csi.Unpublish(node, args)
}

// ControllerOps hands a controller client the calls queued for its node.
// Polls go to the leader, where the queue is.
func (ep CSI) ControllerOps(ctx context.Context, args *structs.CSIControllerPollArgs) (*structs.CSIControllerPollReply, error) {
	s := ep.srv
	if r, ok, err := forward[structs.CSIControllerPollArgs, structs.CSIControllerPollReply](ctx, s, "CSIController.Poll", args); ok {
		return r, err
	}
	if args == nil {
		return nil, structs.NewError(structs.ErrInvalid, "missing poll")
	}
	if _, err := s.authNode(args.NodeID, args.SecretID); err != nil {
		return nil, err
	}
	ops, err := s.csi.Queue().Poll(ctx, args.NodeID, time.Duration(args.MaxWait))
	if err != nil {
		return nil, err
	}
	return &structs.CSIControllerPollReply{Ops: ops}, nil
}

// ControllerDone takes a controller client's results.
func (ep CSI) ControllerDone(ctx context.Context, args *structs.CSIControllerDoneArgs) error {
	s := ep.srv
	if _, ok, err := forward[structs.CSIControllerDoneArgs, Empty](ctx, s, "CSIController.Done", args); ok {
		return err
	}
	if err := csivolumes.CheckDoneArgs(args); err != nil {
		return err
	}
	if _, err := s.authNode(args.NodeID, args.SecretID); err != nil {
		return err
	}
	s.csi.ControllerDone(args)
	return nil
}

// register exposes the CSI volume and controller RPCs.
func (ep CSI) register(rs *rpc.Server, mark func(context.Context) context.Context) {
	ep.registerWriteRPC(rs, mark)
	ep.registerClaimRPC(rs, mark)
	ep.registerCreateRPC(rs, mark)
}

// registerClaimRPC exposes the client side of volumes; rpcAccess lets
// a client call them for its own node only.
func (ep CSI) registerClaimRPC(rs *rpc.Server, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "CSIVolume.Claim", func(ctx context.Context, a *structs.CSIVolumeClaimArgs) (*structs.CSIVolumeClaimReply, error) {
		return ep.ClaimVolume(mark(ctx), a)
	})
	rpc.Handle(rs, "CSIVolume.Unpublish", func(ctx context.Context, a *structs.CSIVolumeUnpublishArgs) (*structs.CSIVolumeUnpublishReply, error) {
		return ep.UnpublishVolume(mark(ctx), a)
	})
	rpc.Handle(rs, "CSIController.Poll", func(ctx context.Context, a *structs.CSIControllerPollArgs) (*structs.CSIControllerPollReply, error) {
		return ep.ControllerOps(mark(ctx), a)
	})
	rpc.Handle(rs, "CSIController.Done", func(ctx context.Context, a *structs.CSIControllerDoneArgs) (*Empty, error) {
		return &Empty{}, ep.ControllerDone(mark(ctx), a)
	})
}

// RegisterCSIVolumes registers volumes, or updates registered ones, in
// one Raft entry (csivolumes.Volumes.Register). A follower forwards to
// the leader.
func (ep CSI) RegisterCSIVolumes(ctx context.Context, vols []*structs.CSIVolume) (uint64, error) {
	return ep.registerCSIVolumes(ctx, vols, nil)
}

// registerCSIVolumes is RegisterCSIVolumes; the volumes in fresh were just
// provisioned by their driver and are not validated again.
func (ep CSI) registerCSIVolumes(ctx context.Context, vols []*structs.CSIVolume, fresh map[csivolumes.Key]bool) (uint64, error) {
	s := ep.srv
	if r, ok, err := forward[CSIVolumeRegisterArgs, IndexReply](ctx, s, "CSIVolume.Register", &CSIVolumeRegisterArgs{Volumes: vols}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	return s.csi.Register(ctx, vols, fresh)
}

// DeregisterCSIVolumes deletes volumes of one namespace, all or none
// (csivolumes.Volumes.Deregister). A follower forwards to the leader.
func (ep CSI) DeregisterCSIVolumes(ctx context.Context, ns string, ids []string, force bool) (uint64, error) {
	s := ep.srv
	args := &CSIVolumeDeregisterArgs{Namespace: ns, VolumeIDs: ids, Force: force}
	if r, ok, err := forward[CSIVolumeDeregisterArgs, IndexReply](ctx, s, "CSIVolume.Deregister", args); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	return s.csi.Deregister(ns, ids, force)
}

// registerWriteRPC exposes the volume writes, which followers forward to the
// leader. They are absent from rpcAccess: server-only.
func (ep CSI) registerWriteRPC(rs *rpc.Server, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "CSIVolume.Register", func(ctx context.Context, a *CSIVolumeRegisterArgs) (*IndexReply, error) {
		idx, err := ep.RegisterCSIVolumes(mark(ctx), a.Volumes)
		if err != nil {
			return nil, err
		}
		return &IndexReply{Index: idx}, nil
	})
	rpc.Handle(rs, "CSIVolume.Deregister", func(ctx context.Context, a *CSIVolumeDeregisterArgs) (*IndexReply, error) {
		idx, err := ep.DeregisterCSIVolumes(mark(ctx), a.Namespace, a.VolumeIDs, a.Force)
		if err != nil {
			return nil, err
		}
		return &IndexReply{Index: idx}, nil
	})
}

// CreateCSIVolumes provisions volumes through a controller client of each
// volume's plugin, then registers them (csivolumes.Volumes.Create). A
// follower forwards to the leader.
func (ep CSI) CreateCSIVolumes(ctx context.Context, vols []*structs.CSIVolume) ([]*structs.CSIVolume, uint64, error) {
	r, err := ep.createCSIVolumes(ctx, vols)
	if err != nil {
		return nil, 0, err
	}
	return r.Volumes, r.Index, nil
}

func (ep CSI) createCSIVolumes(ctx context.Context, vols []*structs.CSIVolume) (*CSIVolumeCreateReply, error) {
	s := ep.srv
	if r, ok, err := forward[CSIVolumeRegisterArgs, CSIVolumeCreateReply](ctx, s, "CSIVolume.Create", &CSIVolumeRegisterArgs{Volumes: vols}); ok {
		return r, err
	}
	out, fresh, err := s.csi.Create(ctx, vols)
	if err != nil {
		return nil, err
	}
	// The driver just made the fresh ones with these capabilities: only
	// updates of volumes created before are validated.
	idx, err := ep.registerCSIVolumes(ctx, out, fresh)
	if err != nil {
		return nil, err
	}
	return &CSIVolumeCreateReply{Volumes: s.csi.Registered(out), Index: idx}, nil
}

// DeleteCSIVolume deletes an unclaimed volume through a controller client
// (csivolumes.Volumes.Delete), then deregisters it. A follower forwards
// to the leader.
func (ep CSI) DeleteCSIVolume(ctx context.Context, ns, id string, secrets map[string]string) (uint64, error) {
	s := ep.srv
	args := &CSIVolumeDeleteArgs{Namespace: ns, VolumeID: id, Secrets: secrets}
	if r, ok, err := forward[CSIVolumeDeleteArgs, IndexReply](ctx, s, "CSIVolume.Delete", args); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if err := s.csi.Delete(ctx, ns, id, secrets); err != nil {
		return 0, err
	}
	return ep.DeregisterCSIVolumes(ctx, ns, []string{id}, false)
}

// DetachCSIVolume releases every claim of vol on node (`volume detach`,
// csivolumes.Volumes.UnpublishClaim). A follower forwards to the leader.
func (ep CSI) DetachCSIVolume(ctx context.Context, ns, id, nodeID string) (uint64, error) {
	s := ep.srv
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
	return s.csi.UnpublishClaim(ctx, ns, id, &structs.CSIVolumeClaim{NodeID: nodeID, Mode: structs.CSIVolumeClaimGC})
}

func (ep CSI) registerCreateRPC(rs *rpc.Server, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "CSIVolume.Create", func(ctx context.Context, a *CSIVolumeRegisterArgs) (*CSIVolumeCreateReply, error) {
		return ep.createCSIVolumes(mark(ctx), a.Volumes)
	})
	rpc.Handle(rs, "CSIVolume.Detach", func(ctx context.Context, a *CSIVolumeDetachArgs) (*IndexReply, error) {
		idx, err := ep.DetachCSIVolume(mark(ctx), a.Namespace, a.VolumeID, a.NodeID)
		if err != nil {
			return nil, err
		}
		return &IndexReply{Index: idx}, nil
	})
	rpc.Handle(rs, "CSIVolume.Delete", func(ctx context.Context, a *CSIVolumeDeleteArgs) (*IndexReply, error) {
		idx, err := ep.DeleteCSIVolume(mark(ctx), a.Namespace, a.VolumeID, a.Secrets)
		if err != nil {
			return nil, err
		}
		return &IndexReply{Index: idx}, nil
	})
}
