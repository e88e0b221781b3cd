package schedio

import (
	"slices"
	"sort"
	"strings"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"

	"github.com/drover-org/drover/core/structs"
)

// csiInput is the CSI part of one schedule request: the volumes the job's
// groups name, and per plugin of those volumes how many volumes each node
// already holds. It is gathered once per request (one lookup per volume and
// one listing per plugin), never per node, so a 10,000-node request costs
// one map lookup per node and plugin.
type csiInput struct {
	volumes []*pb.CSIVolume
	// plugins are the plugin IDs of the volumes, sorted.
	plugins []string
	// inUse counts, per plugin and node, the volumes of the plugin claimed
	// by allocations on the node (of any job).
	inUse map[string]map[string]int32
}

// volumesToPB is a group's volume blocks, sorted by name.
func volumesToPB(vs map[string]*structs.VolumeRequest) []*pb.VolumeRequest {
	if len(vs) == 0 {
		return nil
	}
	out := make([]*pb.VolumeRequest, 0, len(vs))
	for name, v := range vs {
		if v == nil {
			continue
		}
		n := v.Name
		if n == "" {
			n = name
		}
		out = append(out, &pb.VolumeRequest{
			Name: n, Type: v.Type, Source: v.Source, ReadOnly: v.ReadOnly,
			AccessMode: string(v.AccessMode), AttachmentMode: string(v.AttachmentMode), PerAlloc: v.PerAlloc,
		})
	}
	slices.SortFunc(out, func(a, b *pb.VolumeRequest) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// jobVolumeIDs lists the IDs of the CSI volumes the job's groups name: the
// source, or for per_alloc each index's "<source>[<i>]" below the count.
func jobVolumeIDs(job *structs.Job) []string {
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, tg := range job.TaskGroups {
		for _, v := range tg.Volumes {
			if v == nil || v.Type != structs.VolumeTypeCSI {
				continue
			}
			if !v.PerAlloc {
				add(v.Source)
				continue
			}
			for i := range tg.Count {
				add(v.VolumeID(structs.AllocName(job.ID, tg.Name, i)))
			}
		}
	}
	sort.Strings(ids)
	return ids
}

// buildCSIInput looks up the job's volumes with their plugin facts and
// claims, and counts the volumes of their plugins on each node.
func buildCSIInput(snap RequestState, job *structs.Job) (*csiInput, error) {
	ids := jobVolumeIDs(job)
	if len(ids) == 0 {
		return nil, nil
	}
	in := &csiInput{inUse: map[string]map[string]int32{}}
	for _, id := range ids {
		v, err := snap.CSIVolumeForPlacement(nil, job.Namespace, id)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue // missing: the scheduler reports it
		}
		in.volumes = append(in.volumes, csiVolumeToPB(v))
		if !slices.Contains(in.plugins, v.PluginID) {
			in.plugins = append(in.plugins, v.PluginID)
		}
	}
	sort.Strings(in.plugins)
	for _, p := range in.plugins {
		// The stored claims are all a count needs: no copies, no
		// denormalizing, on every eval of a job with volumes.
		vols, err := snap.CSIVolumesByPluginRaw(nil, p)
		if err != nil {
			return nil, err
		}
		counts := map[string]int32{}
		for _, v := range vols {
			nodes := map[string]bool{}
			for _, m := range []map[string]*structs.CSIVolumeClaim{v.ReadClaims, v.WriteClaims} {
				for _, c := range m {
					if c != nil && c.NodeID != "" {
						nodes[c.NodeID] = true
					}
				}
			}
			for n := range nodes {
				counts[n]++
			}
		}
		in.inUse[p] = counts
	}
	return in, nil
}

// csiVolumeToPB is the placement view of a denormalized volume: claims,
// modes, topologies and plugin health, no secrets, parameters or context.
func csiVolumeToPB(v *structs.CSIVolume) *pb.CSIVolume {
	p := &pb.CSIVolume{
		Namespace: v.Namespace, Id: v.ID, PluginId: v.PluginID, Schedulable: v.Schedulable,
		AccessMode: string(v.AccessMode), AttachmentMode: string(v.AttachmentMode),
		ReadSchedulable: v.ReadSchedulable(), WriteSchedulable: v.WriteSchedulable(),
		HasFreeReadClaims: v.HasFreeReadClaims(""), HasFreeWriteClaims: v.HasFreeWriteClaims(""),
		ReadClaims:        claimsToPB(v.ReadClaims, v.ReadAllocs),
		WriteClaims:       claimsToPB(v.WriteClaims, v.WriteAllocs),
		PastClaimAllocIds: v.PastClaimIDs(),
	}
	for _, t := range v.Topologies {
		if t != nil {
			p.Topologies = append(p.Topologies, &pb.CSITopology{Segments: t.Segments})
		}
	}
	return p
}

// claimsToPB lists claims by alloc ID, each with its allocation's job (empty
// when the allocation is gone).
func claimsToPB(claims map[string]*structs.CSIVolumeClaim, allocs map[string]*structs.Allocation) []*pb.CSIVolumeClaim {
	if len(claims) == 0 {
		return nil
	}
	out := make([]*pb.CSIVolumeClaim, 0, len(claims))
	for id, c := range claims {
		pc := &pb.CSIVolumeClaim{AllocId: id}
		if c != nil {
			pc.NodeId = c.NodeID
		}
		if a := allocs[id]; a != nil {
			pc.JobId = a.JobID
			if pc.NodeId == "" {
				pc.NodeId = a.NodeID
			}
		}
		out = append(out, pc)
	}
	slices.SortFunc(out, func(a, b *pb.CSIVolumeClaim) int { return strings.Compare(a.AllocId, b.AllocId) })
	return out
}

// nodePlugins is the node's instances of the request's plugins.
func (in *csiInput) nodePlugins(n *structs.Node) []*pb.CSINodePlugin {
	if in == nil || len(n.CSINodePlugins) == 0 {
		return nil
	}
	var out []*pb.CSINodePlugin
	for _, id := range in.plugins {
		info := n.CSINodePlugins[id]
		if info == nil {
			continue
		}
		p := &pb.CSINodePlugin{PluginId: id, Healthy: info.Healthy, VolumesInUse: in.inUse[id][n.ID]}
		if ni := info.NodeInfo; ni != nil {
			p.MaxVolumes = ni.MaxVolumes
			if ni.AccessibleTopology != nil {
				p.AccessibleTopology = ni.AccessibleTopology.Segments
			}
		}
		out = append(out, p)
	}
	return out
}
