package schedio

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"

	"github.com/drover-org/drover/core/structs"
)

// The node part of a schedule request: the nodes a job may run on, with
// their usage, network and CSI plugins, and the CSI volumes the job names.

// nodeInput is what the node part of one request reads: the snapshot,
// the cache of static node records (nil: none) and the core's clock.
type nodeInput struct {
	snap  RequestState
	cache *NodeCache
	now   time.Time
}

// add adds the request's nodes: those of the job's pool, with the CSI
// facts its volumes need, and any outside the pool that hold its allocs.
// A stopped or purged job places nothing, so only the latter are sent:
// the scheduler still needs them to tell lost allocs from stopped ones.
func (b nodeInput) add(req *pb.ScheduleRequest, job *structs.Job, allocs []*structs.Allocation, preempt bool) error {
	if job == nil || job.Stop {
		return b.addAllocNodes(req, allocs)
	}
	nodes, err := NodesOfPool(b.snap, job.NodePool)
	if err != nil {
		return err
	}
	csi, err := buildCSIInput(b.snap, job)
	if err != nil {
		return err
	}
	if csi != nil {
		req.CsiVolumes = csi.volumes
	}
	hostVols := jobHostVolumes(job)
	req.Nodes = make([]*pb.Node, 0, len(nodes))
	have := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		pn, err := b.nodeToPB(n, job, preempt)
		if err != nil {
			return err
		}
		pn.CsiNodePlugins = csi.nodePlugins(n)
		pn.HostVolumes = nodeHostVolumes(n, hostVols)
		req.Nodes = append(req.Nodes, pn)
		have[n.ID] = true
	}
	// Nodes outside the pool that hold allocs of the job (the job moved
	// pools) are sent too, so their allocs can be stopped.
	var extra []*structs.Allocation
	for _, a := range allocs {
		if !have[a.NodeID] {
			extra = append(extra, a)
		}
	}
	return b.addAllocNodes(req, extra)
}

// addAllocNodes adds the nodes the allocs sit on, without usage of others.
func (b nodeInput) addAllocNodes(req *pb.ScheduleRequest, allocs []*structs.Allocation) error {
	seen := map[string]bool{}
	for _, a := range allocs {
		if seen[a.NodeID] {
			continue
		}
		seen[a.NodeID] = true
		n, err := b.snap.NodeByID(nil, a.NodeID)
		if err != nil {
			return err
		}
		if n == nil {
			continue
		}
		pn, err := b.nodeToPB(n, nil, false)
		if err != nil {
			return err
		}
		req.Nodes = append(req.Nodes, pn)
	}
	return nil
}

// NodesOfPool lists the nodes of a pool; every node for "all" or none named.
func NodesOfPool(snap NodeLister, pool string) ([]*structs.Node, error) {
	if pool == "" || pool == structs.NodePoolAll {
		return snap.Nodes(nil)
	}
	return snap.NodesByPool(nil, pool)
}

// NodeCache keeps the static part of each node's protobuf record, keyed by
// node ID and valid while the node's ModifyIndex is unchanged, so a
// 10,000-node request does not rebuild 10,000 attribute maps.
type NodeCache struct {
	mu    sync.Mutex
	nodes map[string]cachedNode
}

type cachedNode struct {
	index uint64
	pb    *pb.Node
}

// NewNodeCache returns an empty cache; it is safe for concurrent use.
func NewNodeCache() *NodeCache { return &NodeCache{nodes: map[string]cachedNode{}} }

// get returns the node's static record; a nil cache builds it afresh.
func (c *NodeCache) get(n *structs.Node) *pb.Node {
	if c == nil {
		return staticNodeToPB(n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.nodes[n.ID]; ok && e.index == n.ModifyIndex {
		return e.pb
	}
	p := staticNodeToPB(n)
	c.nodes[n.ID] = cachedNode{index: n.ModifyIndex, pb: p}
	return p
}

// nodeToPB returns the node's record with its current usage. The static
// maps are shared with the cache and must be treated as read-only.
func (b nodeInput) nodeToPB(n *structs.Node, job *structs.Job, preempt bool) (*pb.Node, error) {
	st := b.cache.get(n)
	p := &pb.Node{
		Id: st.Id, Name: st.Name, Datacenter: st.Datacenter, NodeClass: st.NodeClass, NodePool: st.NodePool,
		ComputedClass: st.ComputedClass, Status: st.Status, Draining: st.Draining, Eligible: st.Eligible,
		Attributes: st.Attributes, Meta: st.Meta, Drivers: st.Drivers, Capacity: st.Capacity,
		Network: st.Network, NetworkModes: st.NetworkModes,
	}
	if ds := n.DrainStrategy; ds != nil && !ds.ForceDeadline.IsZero() {
		p.DrainDeadlinePassed = !b.now.Before(ds.ForceDeadline)
	}
	// Only the live half of the node's allocs: a node that ran thousands
	// of short jobs holds them terminal until the GC reaps them, and
	// reading them on every placement made placement slow in their number.
	allocs, err := b.snap.AllocsByNodeTerminal(nil, n.ID, false)
	if err != nil {
		return nil, err
	}
	var used structs.Resources
	for _, a := range allocs {
		r := a.ComparableResources()
		used.CPU += r.CPU
		used.MemoryMB += r.MemoryMB
		used.DiskMB += r.DiskMB
		var ports []int32
		if a.AllocatedResources != nil {
			for _, port := range a.AllocatedResources.Shared.Ports {
				ports = append(ports, int32(port.Value))
			}
			p.UsedPorts = append(p.UsedPorts, ports...)
		}
		if preempt && job != nil && (a.JobID != job.ID || a.Namespace != job.Namespace) {
			prio := 0
			if a.Job != nil {
				prio = a.Job.Priority
			}
			p.Others = append(p.Others, &pb.NodeAlloc{
				Id: a.ID, JobId: a.JobID, Namespace: a.Namespace, JobPriority: int32(prio),
				Resources: resToPB(r), CreateIndex: a.CreateIndex, Ports: ports,
			})
		}
	}
	slices.Sort(p.UsedPorts)
	p.Used = resToPB(used)
	return p, nil
}

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

func staticNodeToPB(n *structs.Node) *pb.Node {
	p := &pb.Node{
		Id: n.ID, Name: n.Name, Datacenter: n.Datacenter, NodeClass: n.NodeClass, NodePool: n.NodePool,
		ComputedClass: n.ComputedClass, Status: n.Status, Draining: n.DrainStrategy != nil,
		Eligible:   n.SchedulingEligibility == structs.NodeSchedulingEligible,
		Attributes: n.Attributes, Meta: n.Meta, Capacity: resToPB(n.Capacity()),
		Network: nodeNetworkToPB(n), NetworkModes: nodeNetworkModes(n),
	}
	for name, d := range n.Drivers {
		if d != nil && d.Detected && d.Healthy {
			p.Drivers = append(p.Drivers, name)
		}
	}
	return p
}

// nodeNetworkModes is the isolated network modes the node serves: its
// networks without an address (the client lists them after the host's).
func nodeNetworkModes(n *structs.Node) []string {
	if n.NodeResources == nil {
		return nil
	}
	var out []string
	for _, net := range n.NodeResources.Networks {
		if net != nil && net.IP == "" && structs.IsolatedNetworkMode(net.Mode) {
			out = append(out, net.Mode)
		}
	}
	return out
}

// nodeNetworkToPB is the node's network as placement reads it; nil when
// the node fingerprinted no address.
func nodeNetworkToPB(n *structs.Node) *pb.NodeNetwork {
	nr := n.NodeResources
	if nr == nil {
		return nil
	}
	var ip string
	for _, net := range nr.Networks {
		if net != nil && net.IP != "" {
			ip = net.IP
			break
		}
	}
	if ip == "" {
		return nil
	}
	out := &pb.NodeNetwork{Ip: ip, MinDynamicPort: int32(nr.MinDynamicPort), MaxDynamicPort: int32(nr.MaxDynamicPort)}
	for _, r := range NodeReservedPorts(n) {
		out.ReservedPorts = append(out.ReservedPorts, &pb.PortRange{From: int32(r.From), To: int32(r.To)})
	}
	return out
}

// NodeReservedPorts is the host ports the node keeps from scheduling. The
// client checked the list before registering; a list that does not parse
// reserves nothing rather than failing every plan for the node.
func NodeReservedPorts(n *structs.Node) []structs.PortRange {
	if n.ReservedResources == nil {
		return nil
	}
	rs, err := structs.ParsePortRanges(n.ReservedResources.Networks.ReservedHostPorts)
	if err != nil {
		return nil
	}
	return rs
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
