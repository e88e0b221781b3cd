package structs

import (
	"maps"
	"slices"
	"time"
)

// Bounds on what a node reports of its CSI plugins.
const (
	MaxCSIPluginsPerNode = 64
	MaxCSIInfoTextBytes  = 1024
)

// CSIControllerInfo is what a controller plugin instance can do.
type CSIControllerInfo struct {
	SupportsCreateDelete             bool `codec:",omitempty"`
	SupportsAttachDetach             bool `codec:",omitempty"`
	SupportsListVolumes              bool `codec:",omitempty"`
	SupportsGetCapacity              bool `codec:",omitempty"`
	SupportsCreateDeleteSnapshot     bool `codec:",omitempty"`
	SupportsListSnapshots            bool `codec:",omitempty"`
	SupportsClone                    bool `codec:",omitempty"`
	SupportsReadOnlyAttach           bool `codec:",omitempty"`
	SupportsExpand                   bool `codec:",omitempty"`
	SupportsListVolumesAttachedNodes bool `codec:",omitempty"`
	SupportsCondition                bool `codec:",omitempty"`
	SupportsGet                      bool `codec:",omitempty"`
}

// CSINodeInfo is what a node plugin instance reports of its node.
type CSINodeInfo struct {
	ID                      string       `codec:",omitempty"` // the CSI node ID
	MaxVolumes              int64        `codec:",omitempty"`
	AccessibleTopology      *CSITopology `codec:",omitempty"`
	RequiresNodeStageVolume bool         `codec:",omitempty"`
	SupportsStats           bool         `codec:",omitempty"`
	SupportsExpand          bool         `codec:",omitempty"`
	SupportsCondition       bool         `codec:",omitempty"`
}

// CSIInfo is one plugin instance on one node, as fingerprinted.
type CSIInfo struct {
	PluginID                 string             `codec:",omitempty"`
	AllocID                  string             `codec:",omitempty"`
	Healthy                  bool               `codec:",omitempty"`
	HealthDescription        string             `codec:",omitempty"`
	UpdateTime               time.Time          `codec:",omitempty"`
	Provider                 string             `codec:",omitempty"`
	ProviderVersion          string             `codec:",omitempty"`
	RequiresControllerPlugin bool               `codec:",omitempty"`
	RequiresTopologies       bool               `codec:",omitempty"`
	ControllerInfo           *CSIControllerInfo `codec:",omitempty"`
	NodeInfo                 *CSINodeInfo       `codec:",omitempty"`
}

// Copy returns a deep copy.
func (i *CSIInfo) Copy() *CSIInfo {
	if i == nil {
		return nil
	}
	c := *i
	if i.ControllerInfo != nil {
		ci := *i.ControllerInfo
		c.ControllerInfo = &ci
	}
	if i.NodeInfo != nil {
		ni := *i.NodeInfo
		if ni.AccessibleTopology != nil {
			ni.AccessibleTopology = &CSITopology{Segments: maps.Clone(ni.AccessibleTopology.Segments)}
		}
		c.NodeInfo = &ni
	}
	return &c
}

// Validate bounds what a client reports.
func (i *CSIInfo) Validate(id string) error {
	switch {
	case i == nil:
		return NewError(ErrInvalid, "csi plugin %q: missing info", id)
	case !ValidCSIID(id):
		return NewError(ErrInvalid, "csi plugin ID %q: must be 1 to %d bytes of letters, digits and _ . -", id, MaxCSIVolumeIDBytes)
	case i.PluginID != "" && i.PluginID != id:
		return NewError(ErrInvalid, "csi plugin %q: info names plugin %q", id, i.PluginID)
	case len(i.HealthDescription) > MaxCSIInfoTextBytes || len(i.Provider) > MaxCSIInfoTextBytes ||
		len(i.ProviderVersion) > MaxCSIInfoTextBytes || len(i.AllocID) > MaxCSIInfoTextBytes:
		return NewError(ErrInvalid, "csi plugin %q: a text field is longer than %d bytes", id, MaxCSIInfoTextBytes)
	}
	if n := i.NodeInfo; n != nil {
		if len(n.ID) > MaxCSIInfoTextBytes {
			return NewError(ErrInvalid, "csi plugin %q: node ID longer than %d bytes", id, MaxCSIInfoTextBytes)
		}
		if t := n.AccessibleTopology; t != nil && len(t.Segments) > MaxCSITopologySegments {
			return NewError(ErrInvalid, "csi plugin %q: more than %d topology segments", id, MaxCSITopologySegments)
		}
	}
	return nil
}

// CSIPluginJob is a job that runs instances of a plugin, with the count it
// is expected to run.
type CSIPluginJob struct {
	Namespace string
	ID        string
	Expected  int
}

// CSIPlugin is a CSI plugin as the cluster sees it: its instances on the
// nodes, from the nodes' fingerprints, and the jobs that run it. Plugins
// are not namespaced.
type CSIPlugin struct {
	ID                  string
	Provider            string
	Version             string
	ControllerRequired  bool
	Controllers         map[string]*CSIInfo                 // by node ID
	Nodes               map[string]*CSIInfo                 // by node ID
	Allocations         []*AllocListStub                    `codec:"-"`
	ControllerJobs      map[string]map[string]*CSIPluginJob `codec:",omitempty"` // ns → job ID
	NodeJobs            map[string]map[string]*CSIPluginJob `codec:",omitempty"`
	ControllersHealthy  int
	ControllersExpected int
	NodesHealthy        int
	NodesExpected       int
	CreateIndex         uint64
	ModifyIndex         uint64
	CreateTime          int64 `codec:",omitempty"`
	ModifyTime          int64 `codec:",omitempty"`
}

// NewCSIPlugin returns an empty plugin.
func NewCSIPlugin(id string) *CSIPlugin {
	return &CSIPlugin{ID: id, Controllers: map[string]*CSIInfo{}, Nodes: map[string]*CSIInfo{},
		ControllerJobs: map[string]map[string]*CSIPluginJob{}, NodeJobs: map[string]map[string]*CSIPluginJob{}}
}

// Copy returns a deep copy.
func (p *CSIPlugin) Copy() *CSIPlugin {
	if p == nil {
		return nil
	}
	c := *p
	c.Controllers = make(map[string]*CSIInfo, len(p.Controllers))
	for k, v := range p.Controllers {
		c.Controllers[k] = v.Copy()
	}
	c.Nodes = make(map[string]*CSIInfo, len(p.Nodes))
	for k, v := range p.Nodes {
		c.Nodes[k] = v.Copy()
	}
	copyJobs := func(in map[string]map[string]*CSIPluginJob) map[string]map[string]*CSIPluginJob {
		out := make(map[string]map[string]*CSIPluginJob, len(in))
		for ns, jobs := range in {
			m := make(map[string]*CSIPluginJob, len(jobs))
			for id, j := range jobs {
				x := *j
				m[id] = &x
			}
			out[ns] = m
		}
		return out
	}
	c.ControllerJobs = copyJobs(p.ControllerJobs)
	c.NodeJobs = copyJobs(p.NodeJobs)
	c.Allocations = nil
	return &c
}

// AddController records the controller instance of a node.
func (p *CSIPlugin) AddController(nodeID string, info *CSIInfo) {
	p.add(p.Controllers, &p.ControllersHealthy, nodeID, info)
	if info.RequiresControllerPlugin {
		p.ControllerRequired = true
	}
}

// AddNode records the node instance of a node.
func (p *CSIPlugin) AddNode(nodeID string, info *CSIInfo) {
	p.add(p.Nodes, &p.NodesHealthy, nodeID, info)
	if info.RequiresControllerPlugin {
		p.ControllerRequired = true
	}
}

// add replaces a node's instance, keeping the healthy count right. An
// unhealthy instance is only recorded over an existing one: a plugin that
// never became healthy on a node does not count there.
func (p *CSIPlugin) add(m map[string]*CSIInfo, healthy *int, nodeID string, info *CSIInfo) {
	prev, had := m[nodeID]
	if had && prev.Healthy {
		*healthy--
	}
	if !had && !info.Healthy {
		return
	}
	m[nodeID] = info.Copy()
	if info.Healthy {
		*healthy++
	}
	if info.Provider != "" {
		p.Provider, p.Version = info.Provider, info.ProviderVersion
	}
}

// DeleteNode removes every instance of a node.
func (p *CSIPlugin) DeleteNode(nodeID string) {
	p.DeleteControllerOn(nodeID)
	p.DeleteNodeOn(nodeID)
}

// DeleteControllerOn removes the controller instance of a node.
func (p *CSIPlugin) DeleteControllerOn(nodeID string) {
	if c, ok := p.Controllers[nodeID]; ok {
		if c.Healthy {
			p.ControllersHealthy--
		}
		delete(p.Controllers, nodeID)
	}
}

// DeleteNodeOn removes the node instance of a node.
func (p *CSIPlugin) DeleteNodeOn(nodeID string) {
	if n, ok := p.Nodes[nodeID]; ok {
		if n.Healthy {
			p.NodesHealthy--
		}
		delete(p.Nodes, nodeID)
	}
}

// DeleteAlloc removes the instances that the allocation ran.
func (p *CSIPlugin) DeleteAlloc(allocID, nodeID string) {
	if c, ok := p.Controllers[nodeID]; ok && c.AllocID == allocID {
		if c.Healthy {
			p.ControllersHealthy--
		}
		delete(p.Controllers, nodeID)
	}
	if n, ok := p.Nodes[nodeID]; ok && n.AllocID == allocID {
		if n.Healthy {
			p.NodesHealthy--
		}
		delete(p.Nodes, nodeID)
	}
}

// SetJobCounts records how many controller and node instances a job is
// expected to run (0 forgets the job), and recomputes the expected sums.
func (p *CSIPlugin) SetJobCounts(ns, jobID string, controllers, nodes int) {
	set := func(m map[string]map[string]*CSIPluginJob, n int) {
		if n <= 0 {
			if jobs := m[ns]; jobs != nil {
				delete(jobs, jobID)
				if len(jobs) == 0 {
					delete(m, ns)
				}
			}
			return
		}
		if m[ns] == nil {
			m[ns] = map[string]*CSIPluginJob{}
		}
		m[ns][jobID] = &CSIPluginJob{Namespace: ns, ID: jobID, Expected: n}
	}
	if p.ControllerJobs == nil {
		p.ControllerJobs = map[string]map[string]*CSIPluginJob{}
	}
	if p.NodeJobs == nil {
		p.NodeJobs = map[string]map[string]*CSIPluginJob{}
	}
	set(p.ControllerJobs, controllers)
	set(p.NodeJobs, nodes)
	sum := func(m map[string]map[string]*CSIPluginJob) int {
		t := 0
		for _, jobs := range m {
			for _, j := range jobs {
				t += j.Expected
			}
		}
		return t
	}
	p.ControllersExpected = sum(p.ControllerJobs)
	p.NodesExpected = sum(p.NodeJobs)
}

// IsEmpty reports whether nothing runs or is expected to run the plugin.
func (p *CSIPlugin) IsEmpty() bool {
	return len(p.Controllers) == 0 && len(p.Nodes) == 0 && p.ControllersExpected == 0 && p.NodesExpected == 0
}

// ControllerSupports reports whether a controller instance supports
// attach/detach (ControllerPublish); instances are alike, so any one
// answers.
func (p *CSIPlugin) ControllerSupports(f func(*CSIControllerInfo) bool) bool {
	for _, c := range p.Controllers {
		if c.ControllerInfo != nil {
			return f(c.ControllerInfo)
		}
	}
	return false
}

// CSIPluginListStub is a plugin in list answers.
type CSIPluginListStub struct {
	ID                  string
	Provider            string
	ControllerRequired  bool
	ControllersHealthy  int
	ControllersExpected int
	NodesHealthy        int
	NodesExpected       int
	CreateIndex         uint64
	ModifyIndex         uint64
}

// Stub returns the list form.
func (p *CSIPlugin) Stub() *CSIPluginListStub {
	return &CSIPluginListStub{ID: p.ID, Provider: p.Provider, ControllerRequired: p.ControllerRequired,
		ControllersHealthy: p.ControllersHealthy, ControllersExpected: p.ControllersExpected,
		NodesHealthy: p.NodesHealthy, NodesExpected: p.NodesExpected,
		CreateIndex: p.CreateIndex, ModifyIndex: p.ModifyIndex}
}

// Denormalize fills a volume's plugin facts from its plugin (nil: gone).
func (v *CSIVolume) Denormalize(p *CSIPlugin) {
	if p == nil {
		v.Schedulable, v.ControllersHealthy, v.NodesHealthy = false, 0, 0
		v.ControllersExpected, v.NodesExpected = 0, 0
		return
	}
	v.Provider, v.ProviderVersion = p.Provider, p.Version
	v.ControllerRequired = p.ControllerRequired
	v.ControllersHealthy, v.ControllersExpected = p.ControllersHealthy, p.ControllersExpected
	v.NodesHealthy, v.NodesExpected = p.NodesHealthy, p.NodesExpected
	v.Schedulable = p.NodesHealthy > 0 && (!p.ControllerRequired || p.ControllersHealthy > 0)
}

// Raft entries of CSI volumes.

// CSIVolumeRegisterRequest registers or updates volumes (all or none).
type CSIVolumeRegisterRequest struct {
	Volumes []*CSIVolume
	// Evals re-evaluate the jobs that could not place for want of the
	// volumes, written with them.
	Evals []*Evaluation `codec:",omitempty"`
	Now   int64         `codec:",omitempty"`
}

// CSIVolumeDeregisterRequest deletes volumes (all or none). Force removes
// a volume whose claims all belong to terminal allocations.
type CSIVolumeDeregisterRequest struct {
	Namespace string
	VolumeIDs []string
	Force     bool `codec:",omitempty"`
}

// CSIVolumeClaimRequest is one claim on one volume.
type CSIVolumeClaimRequest struct {
	Namespace string
	VolumeID  string
	Claim     *CSIVolumeClaim
}

// CSIVolumeClaimBatchRequest applies claims in order, all or none.
type CSIVolumeClaimBatchRequest struct {
	Claims []*CSIVolumeClaimRequest
	// Evals re-evaluate the jobs waiting for a claim this batch frees,
	// written with it.
	Evals []*Evaluation `codec:",omitempty"`
	Now   int64         `codec:",omitempty"`
}

// CSIPluginDeleteRequest deletes empty plugins.
type CSIPluginDeleteRequest struct {
	IDs []string
}

func (r *CSIVolumeRegisterRequest) StampNow(n int64)   { stamp(&r.Now, n) }
func (r *CSIVolumeClaimBatchRequest) StampNow(n int64) { stamp(&r.Now, n) }

// ValidateCSI bounds the CSI plugins a node reports, before they reach
// Raft.
func (n *Node) ValidateCSI() error {
	for _, m := range []struct {
		kind  string
		infos map[string]*CSIInfo
	}{{"controller", n.CSIControllerPlugins}, {"node", n.CSINodePlugins}} {
		if len(m.infos) > MaxCSIPluginsPerNode {
			return NewError(ErrInvalid, "Node: %d CSI %s plugins, more than %d", len(m.infos), m.kind, MaxCSIPluginsPerNode)
		}
		for _, id := range slices.Sorted(maps.Keys(m.infos)) {
			if err := m.infos[id].Validate(id); err != nil {
				return err
			}
		}
	}
	return nil
}
