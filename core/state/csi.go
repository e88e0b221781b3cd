package state

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state/schema"
	"github.com/drover-org/drover/core/structs"
)

// CSI volumes and plugins. Volumes are namespaced and keyed by (namespace,
// ID); plugins are cluster-wide and built from the nodes' fingerprints:
// every node write folds the node's instances into the plugin table in the
// same transaction.

const (
	TableCSIVolumes = schema.TableCSIVolumes
	TableCSIPlugins = schema.TableCSIPlugins
)

// UpsertCSIVolumes registers volumes or updates registered ones, all or
// none. The caller has merged updates (structs.CSIVolume.Merge); the store
// still refuses a change of identity and keeps the stored claims: a
// registration never changes who holds a volume.
func (s *StateStore) UpsertCSIVolumes(index uint64, vols []*structs.CSIVolume, evals ...*structs.Evaluation) error {
	copies := make([]*structs.CSIVolume, 0, len(vols))
	for _, v := range vols {
		if err := v.Validate(); err != nil {
			return err
		}
		copies = append(copies, v.Copy())
	}
	return s.write(index, func(t *writeTxn) error {
		for _, v := range copies {
			ok, err := (&Txn{t: t}).NamespaceExists(v.Namespace)
			if err != nil {
				return err
			}
			if !ok {
				return structs.NewError(structs.ErrInvalid, "volume %q: namespace %q does not exist", v.ID, v.Namespace)
			}
			old, err := t.csiVolume(v.Namespace, v.ID)
			if err != nil {
				return err
			}
			if old != nil {
				if old.ExternalID != v.ExternalID || old.PluginID != v.PluginID {
					return structs.NewError(structs.ErrInvalid, "volume %q: volume identity cannot be updated (external_id, plugin_id)", v.ID)
				}
				v.CreateIndex, v.CreateTime = old.CreateIndex, old.CreateTime
				v.ReadAllocs, v.WriteAllocs = old.ReadAllocs, old.WriteAllocs
				v.ReadClaims, v.WriteClaims, v.PastClaims = old.ReadClaims, old.WriteClaims, old.PastClaims
				v.AccessMode, v.AttachmentMode = old.AccessMode, old.AttachmentMode
			} else {
				v.CreateIndex, v.CreateTime = t.index, t.nanos()
				v.ReadAllocs, v.WriteAllocs = nil, nil
				v.ReadClaims, v.WriteClaims, v.PastClaims = nil, nil, nil
				v.AccessMode, v.AttachmentMode = structs.CSIVolumeAccessModeUnknown, structs.CSIVolumeAttachmentModeUnknown
			}
			clearDenormalized(v)
			v.ModifyIndex, v.ModifyTime = t.index, t.nanos()
			if err := t.insert(TableCSIVolumes, v); err != nil {
				return err
			}
		}
		if len(evals) > 0 {
			return t.upsertEvals(evals)
		}
		return nil
	})
}

// clearDenormalized drops what readers fill in from the plugin, so that
// the stored volume does not carry stale copies.
func clearDenormalized(v *structs.CSIVolume) {
	v.Schedulable = false
	v.Provider, v.ProviderVersion = "", ""
	v.ControllerRequired = false
	v.ControllersHealthy, v.ControllersExpected, v.NodesHealthy, v.NodesExpected = 0, 0, 0, 0
	for id := range v.ReadAllocs {
		v.ReadAllocs[id] = nil
	}
	for id := range v.WriteAllocs {
		v.WriteAllocs[id] = nil
	}
}

// DeleteCSIVolumes deletes volumes of one namespace, all or none. A volume
// with claims is refused ("volume in use") unless force is set and every
// claiming allocation is terminal or gone.
func (s *StateStore) DeleteCSIVolumes(index uint64, ns string, ids []string, force bool) error {
	return s.write(index, func(t *writeTxn) error {
		for _, id := range ids {
			v, err := t.csiVolume(ns, id)
			if err != nil {
				return err
			}
			if v == nil {
				return structs.NewError(structs.ErrNotFound, "volume not found: %s", id)
			}
			if v.InUse() {
				if !force {
					return structs.NewError(structs.ErrConflict, "volume in use: %s", id)
				}
				for _, allocs := range []map[string]*structs.Allocation{v.ReadAllocs, v.WriteAllocs} {
					for aid := range allocs {
						a, err := t.alloc(aid)
						if err != nil {
							return err
						}
						if a != nil && !a.ClientTerminalStatus() {
							return structs.NewError(structs.ErrConflict, "volume in use: %s (allocation %s is not terminal)", id, aid)
						}
					}
				}
			}
			if err := t.delete(TableCSIVolumes, v); err != nil {
				return err
			}
		}
		return nil
	})
}

// CSIVolumeClaims applies claims in order, all or none (see
// structs.CSIVolume.Claim). A taken claim without a node gets its
// allocation's. Every claim, even one that changes no claim (a GC
// pseudo-claim), writes its volume: the new index wakes the watcher. evals
// are written in the same transaction.
func (s *StateStore) CSIVolumeClaims(index uint64, claims []*structs.CSIVolumeClaimRequest, evals ...*structs.Evaluation) error {
	return s.write(index, func(t *writeTxn) error {
		for _, req := range claims {
			if req == nil || req.Claim == nil {
				return structs.NewError(structs.ErrInvalid, "volume claim: missing claim")
			}
			old, err := t.csiVolume(req.Namespace, req.VolumeID)
			if err != nil {
				return err
			}
			if old == nil {
				return structs.NewError(structs.ErrNotFound, "volume not found: %s", req.VolumeID)
			}
			v := old.Copy()
			claim := req.Claim.Copy()
			var alloc *structs.Allocation
			if claim.AllocationID != "" {
				if alloc, err = t.alloc(claim.AllocationID); err != nil {
					return err
				}
			}
			if claim.State == structs.CSIVolumeClaimStateTaken && claim.Mode != structs.CSIVolumeClaimGC {
				if alloc != nil && alloc.Namespace != v.Namespace {
					return structs.NewError(structs.ErrInvalid, "volume %q: allocation %s is in namespace %q, the volume in %q",
						v.ID, alloc.ID, alloc.Namespace, v.Namespace)
				}
				if claim.NodeID == "" && alloc != nil {
					claim.NodeID = alloc.NodeID
				}
				if claim.ExternalVolumeID == "" {
					claim.ExternalVolumeID = v.RemoteID()
				}
				// Schedulability is the plugin's: fill it in to decide.
				p, err := t.csiPlugin(v.PluginID)
				if err != nil {
					return err
				}
				v.Denormalize(p)
			}
			if err := v.Claim(claim, alloc); err != nil {
				return err
			}
			clearDenormalized(v)
			v.ModifyIndex, v.ModifyTime = t.index, t.stampNanos(v.ModifyTime)
			if err := t.insert(TableCSIVolumes, v); err != nil {
				return err
			}
		}
		if len(evals) > 0 {
			return t.upsertEvals(evals)
		}
		return nil
	})
}

func (t *writeTxn) csiVolume(ns, id string) (*structs.CSIVolume, error) {
	raw, err := t.first(TableCSIVolumes, "id", ns, id)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.CSIVolume), nil
}

func (t *writeTxn) csiPlugin(id string) (*structs.CSIPlugin, error) {
	raw, err := t.first(TableCSIPlugins, "id", id)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.CSIPlugin), nil
}

// CSIVolumeByID returns a volume with its plugin facts and claiming
// allocations filled in, or nil. The result is a copy the caller owns.
func (s *StateStore) CSIVolumeByID(ws memdb.WatchSet, ns, id string) (*structs.CSIVolume, error) {
	v, err := first[*structs.CSIVolume](s, ws, TableCSIVolumes, "id", ns, id)
	if v == nil || err != nil {
		return nil, err
	}
	return s.denormalizeVolume(ws, v, true, s.pluginCache(ws))
}

// CSIVolumeForPlacement is CSIVolumeByID for the scheduler's input: the
// plugin facts placement reads (health, schedulability) without the
// plugin's expected counts, which cost a read of the allocations of every
// job that runs the plugin and which placement never looks at.
func (s *StateStore) CSIVolumeForPlacement(ws memdb.WatchSet, ns, id string) (*structs.CSIVolume, error) {
	v, err := first[*structs.CSIVolume](s, ws, TableCSIVolumes, "id", ns, id)
	if v == nil || err != nil {
		return nil, err
	}
	return s.denormalizeVolume(ws, v, true, func(pluginID string) (*structs.CSIPlugin, error) {
		return first[*structs.CSIPlugin](s, ws, TableCSIPlugins, "id", pluginID)
	})
}

// CSIVolumesByPluginRaw lists the stored volumes of a plugin, in every
// namespace, without copies; the caller must not modify them.
func (s *StateStore) CSIVolumesByPluginRaw(ws memdb.WatchSet, pluginID string) ([]*structs.CSIVolume, error) {
	return list[*structs.CSIVolume](s, ws, nil, TableCSIVolumes, "plugin_id", pluginID)
}

// pluginCache reads each plugin once, for denormalizing many volumes.
func (s *StateStore) pluginCache(ws memdb.WatchSet) func(id string) (*structs.CSIPlugin, error) {
	seen := map[string]*structs.CSIPlugin{}
	return func(id string) (*structs.CSIPlugin, error) {
		if p, ok := seen[id]; ok {
			return p, nil
		}
		p, err := s.CSIPluginByID(ws, id)
		if err == nil {
			seen[id] = p
		}
		return p, err
	}
}

// CSIVolumeRaw returns the stored volume without copying it, or nil. The
// caller must not modify it.
func (s *StateStore) CSIVolumeRaw(ws memdb.WatchSet, ns, id string) (*structs.CSIVolume, error) {
	return first[*structs.CSIVolume](s, ws, TableCSIVolumes, "id", ns, id)
}

// denormalizeVolume copies v and fills in its plugin facts and, with
// allocs, the claiming allocations. A claim whose allocation is gone or
// terminal on its client gets a past claim (Unpublishing) in the copy: that
// is what the watcher releases.
func (s *StateStore) denormalizeVolume(ws memdb.WatchSet, v *structs.CSIVolume, allocs bool, plugin func(string) (*structs.CSIPlugin, error)) (*structs.CSIVolume, error) {
	c := v.Copy()
	p, err := plugin(v.PluginID)
	if err != nil {
		return nil, err
	}
	c.Denormalize(p)
	if !allocs {
		return c, nil
	}
	found := map[string]*structs.Allocation{}
	for _, m := range []map[string]*structs.Allocation{c.ReadAllocs, c.WriteAllocs} {
		for id := range m {
			a, err := s.AllocByID(ws, id)
			if err != nil {
				return nil, err
			}
			m[id] = a
			if a != nil {
				found[id] = a
			}
		}
	}
	c.ReleaseTerminal(func(id string) (bool, bool) {
		a := found[id]
		return a != nil, a != nil && a.ClientTerminalStatus()
	})
	return c, nil
}

// CSIVolumes lists the volumes of ns (every namespace for AllNamespaces)
// whose ID starts with prefix, sorted by namespace and ID, with plugin
// facts filled in. pluginID, when set, keeps that plugin's volumes only.
func (s *StateStore) CSIVolumes(ws memdb.WatchSet, ns, prefix, pluginID string) ([]*structs.CSIVolume, error) {
	var all []*structs.CSIVolume
	var err error
	if pluginID != "" {
		all, err = list[*structs.CSIVolume](s, ws, nil, TableCSIVolumes, "plugin_id", pluginID)
	} else {
		all, err = list[*structs.CSIVolume](s, ws, nil, TableCSIVolumes, "id")
	}
	if err != nil {
		return nil, err
	}
	out := make([]*structs.CSIVolume, 0, len(all))
	plugins := s.pluginCache(ws)
	for _, v := range all {
		if ns != AllNamespaces && ns != "" && v.Namespace != ns {
			continue
		}
		if !strings.HasPrefix(v.ID, prefix) {
			continue
		}
		d, err := s.denormalizeVolume(ws, v, true, plugins)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// CSIVolumesRaw lists every stored volume, without copies; the caller must
// not modify them.
func (s *StateStore) CSIVolumesRaw(ws memdb.WatchSet) ([]*structs.CSIVolume, error) {
	return list[*structs.CSIVolume](s, ws, nil, TableCSIVolumes, "id")
}

// CSIVolumesModifiedAfter lists the stored volumes written after index, in
// index order (after 0: every volume), with the table's index read in the
// same transaction, so that the next call's after (that index) misses no
// write; ws watches the whole table (any write, a deletion too, fires
// it). Its cost is that of the changes, not of the table.
func (s *StateStore) CSIVolumesModifiedAfter(ws memdb.WatchSet, index uint64) ([]*structs.CSIVolume, uint64, error) {
	txn := s.db.Txn(false)
	all, err := txn.Get(TableCSIVolumes, "id")
	if err != nil {
		return nil, 0, fmt.Errorf("state: read %s: %w", TableCSIVolumes, err)
	}
	ws.Add(all.WatchCh())
	var tableIdx uint64
	raw, err := txn.First(TableIndex, "id", TableCSIVolumes)
	if err != nil {
		return nil, 0, fmt.Errorf("state: read %s index: %w", TableCSIVolumes, err)
	}
	if raw != nil {
		tableIdx = raw.(*IndexEntry).Value
	}
	iter, err := txn.LowerBound(TableCSIVolumes, "modify_index", index+1)
	if err != nil {
		return nil, 0, fmt.Errorf("state: read %s: %w", TableCSIVolumes, err)
	}
	var out []*structs.CSIVolume
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		out = append(out, raw.(*structs.CSIVolume))
	}
	return out, tableIdx, nil
}

// CSIPluginByID returns a copy of a plugin with its expected counts, or nil.
func (s *StateStore) CSIPluginByID(ws memdb.WatchSet, id string) (*structs.CSIPlugin, error) {
	p, err := first[*structs.CSIPlugin](s, ws, TableCSIPlugins, "id", id)
	if p == nil || err != nil {
		return nil, err
	}
	return s.withExpected(ws, p)
}

// withExpected copies p with its expected counts filled in: for every
// job not stopped whose tasks run the plugin, the job's allocations of
// those tasks' groups that are to run (not terminal), as controllers, as
// nodes or (monolith) as both.
func (s *StateStore) withExpected(ws memdb.WatchSet, p *structs.CSIPlugin) (*structs.CSIPlugin, error) {
	jobs, err := list[*structs.Job](s, ws, nil, TableJobs, "csi_plugin", p.ID)
	if err != nil {
		return nil, err
	}
	c := p.Copy()
	c.ControllerJobs, c.NodeJobs = nil, nil
	c.ControllersExpected, c.NodesExpected = 0, 0
	for _, j := range jobs {
		if j.Stop {
			continue
		}
		groups := map[string]*structs.TaskCSIPluginConfig{}
		for _, tg := range j.TaskGroups {
			for _, t := range tg.Tasks {
				if t != nil && t.CSIPluginConfig != nil && t.CSIPluginConfig.ID == p.ID {
					groups[tg.Name] = t.CSIPluginConfig
				}
			}
		}
		allocs, err := s.AllocsByJob(ws, j.Namespace, j.ID, false)
		if err != nil {
			return nil, err
		}
		var controllers, nodes int
		for _, a := range allocs {
			cfg := groups[a.TaskGroup]
			if cfg == nil || a.TerminalStatus() {
				continue
			}
			if cfg.HasController() {
				controllers++
			}
			if cfg.HasNode() {
				nodes++
			}
		}
		c.SetJobCounts(j.Namespace, j.ID, controllers, nodes)
	}
	return c, nil
}

// CSIPlugins lists the plugins whose ID starts with prefix, sorted.
func (s *StateStore) CSIPlugins(ws memdb.WatchSet, prefix string) ([]*structs.CSIPlugin, error) {
	all, err := list[*structs.CSIPlugin](s, ws, nil, TableCSIPlugins, "id")
	if err != nil {
		return nil, err
	}
	out := all[:0:0]
	for _, p := range all {
		if strings.HasPrefix(p.ID, prefix) {
			c, err := s.withExpected(ws, p)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// DeleteCSIPlugins deletes empty plugins, all or none: a plugin that runs
// somewhere or is expected to is refused ("plugin in use"), as is one that
// volumes still name.
func (s *StateStore) DeleteCSIPlugins(index uint64, ids []string) error {
	return s.write(index, func(t *writeTxn) error {
		for _, id := range ids {
			p, err := t.csiPlugin(id)
			if err != nil {
				return err
			}
			if p == nil {
				return structs.NewError(structs.ErrNotFound, "plugin not found: %s", id)
			}
			if !p.IsEmpty() {
				return structs.NewError(structs.ErrConflict, "plugin in use: %s", id)
			}
			vol, err := t.first(TableCSIVolumes, "plugin_id", id)
			if err != nil {
				return err
			}
			if vol != nil {
				return structs.NewError(structs.ErrConflict, "plugin in use: %s (volume %s)", id, vol.(*structs.CSIVolume).ID)
			}
			if err := t.delete(TableCSIPlugins, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// foldNodePlugins brings the plugin table in line with a node's
// fingerprinted instances: every plugin the node reports is added or
// replaced, every plugin it no longer reports loses the node's instance.
// prev is the node as stored before (nil for a new node).
func (t *writeTxn) foldNodePlugins(prev, node *structs.Node) error {
	ids := map[string]struct{}{}
	for _, m := range []map[string]*structs.CSIInfo{node.CSIControllerPlugins, node.CSINodePlugins} {
		for id := range m {
			ids[id] = struct{}{}
		}
	}
	if prev != nil {
		for _, m := range []map[string]*structs.CSIInfo{prev.CSIControllerPlugins, prev.CSINodePlugins} {
			for id := range m {
				ids[id] = struct{}{}
			}
		}
	}
	for _, id := range sortedKeys(ids) {
		old, err := t.csiPlugin(id)
		if err != nil {
			return err
		}
		var p *structs.CSIPlugin
		if old != nil {
			p = old.Copy()
		} else {
			p = structs.NewCSIPlugin(id)
			p.CreateIndex, p.CreateTime = t.index, t.nanos()
		}
		// An instance reported again replaces the stored one (so that an
		// instance turning unhealthy is recorded); one no longer reported
		// is removed.
		if c := node.CSIControllerPlugins[id]; c != nil {
			p.AddController(node.ID, c)
		} else {
			p.DeleteControllerOn(node.ID)
		}
		if n := node.CSINodePlugins[id]; n != nil {
			p.AddNode(node.ID, n)
		} else {
			p.DeleteNodeOn(node.ID)
		}
		if err := t.putPlugin(old, p); err != nil {
			return err
		}
	}
	return nil
}

// dropNodePlugins removes a deleted node's instances.
func (t *writeTxn) dropNodePlugins(node *structs.Node) error {
	ids := map[string]struct{}{}
	for _, m := range []map[string]*structs.CSIInfo{node.CSIControllerPlugins, node.CSINodePlugins} {
		for id := range m {
			ids[id] = struct{}{}
		}
	}
	for _, id := range sortedKeys(ids) {
		old, err := t.csiPlugin(id)
		if err != nil || old == nil {
			if err != nil {
				return err
			}
			continue
		}
		p := old.Copy()
		p.DeleteNode(node.ID)
		if err := t.putPlugin(old, p); err != nil {
			return err
		}
	}
	return nil
}

// dropAllocPlugins removes the instances a terminal allocation ran.
func (t *writeTxn) dropAllocPlugins(a *structs.Allocation) error {
	n, err := t.node(a.NodeID)
	if err != nil || n == nil {
		return err
	}
	for _, m := range []map[string]*structs.CSIInfo{n.CSIControllerPlugins, n.CSINodePlugins} {
		for id, info := range m {
			if info == nil || info.AllocID != a.ID {
				continue
			}
			old, err := t.csiPlugin(id)
			if err != nil || old == nil {
				if err != nil {
					return err
				}
				continue
			}
			p := old.Copy()
			p.DeleteAlloc(a.ID, a.NodeID)
			if err := t.putPlugin(old, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// putPlugin stores p, or deletes it when it is empty and no volume names
// it (a plugin that volumes name stays, unschedulable, so that they can be
// released once it comes back).
func (t *writeTxn) putPlugin(old, p *structs.CSIPlugin) error {
	if p.IsEmpty() {
		vol, err := t.first(TableCSIVolumes, "plugin_id", p.ID)
		if err != nil {
			return err
		}
		if vol == nil {
			if old != nil {
				return t.delete(TableCSIPlugins, old)
			}
			return nil
		}
	}
	p.ModifyIndex, p.ModifyTime = t.index, t.nanos()
	return t.insert(TableCSIPlugins, p)
}

func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// touchClaimedVolumes writes every CSI volume that allocation a still
// claims (found through its group's volume requests), changing nothing
// but the volume's index, so that the volume watcher, which wakes only on
// writes of the volumes table, looks at the claim again. It is called
// where a claim becomes the watcher's to release without any client
// release writing the volume: the allocation ends while its node is down
// or gone (a lost allocation), it is reaped, or its node goes down or is
// deleted.
func (t *writeTxn) touchClaimedVolumes(a *structs.Allocation) error {
	if a == nil || a.Job == nil {
		return nil
	}
	tg := a.Job.LookupTaskGroup(a.TaskGroup)
	if tg == nil {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(tg.Volumes)) {
		req := tg.Volumes[name]
		if req == nil || req.Type != structs.VolumeTypeCSI {
			continue
		}
		v, err := t.csiVolume(a.Namespace, req.VolumeID(a.Name))
		if err != nil {
			return err
		}
		if v == nil || v.ModifyIndex == t.index || v.ClaimFor(a.ID) == nil {
			continue
		}
		c := v.Copy()
		c.ModifyIndex, c.ModifyTime = t.index, t.stampNanos(v.ModifyTime)
		if err := t.insert(TableCSIVolumes, c); err != nil {
			return err
		}
	}
	return nil
}

// touchNodeClaims is touchClaimedVolumes for every allocation of a node.
func (t *writeTxn) touchNodeClaims(nodeID string) error {
	for _, terminal := range []bool{false, true} {
		it, err := t.txn.Get(TableAllocs, "node_terminal", nodeID, terminal)
		if err != nil {
			return fmt.Errorf("state: read %s: %w", TableAllocs, err)
		}
		var allocs []*structs.Allocation
		for raw := it.Next(); raw != nil; raw = it.Next() {
			allocs = append(allocs, raw.(*structs.Allocation))
		}
		for _, a := range allocs {
			if err := t.touchClaimedVolumes(a); err != nil {
				return err
			}
		}
	}
	return nil
}
