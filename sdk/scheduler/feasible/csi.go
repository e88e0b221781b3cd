package feasible

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Reasons a node is filtered for a group's CSI volumes, Nomad's wording.
// Each is a format taking the volume or plugin ID (and the node ID).
const (
	ReasonCSIVolumeMissing    = "missing CSI volume(s) %s"
	ReasonCSIPluginMissing    = "CSI plugin %s is missing from client %s"
	ReasonCSIPluginUnhealthy  = "CSI plugin %s is unhealthy on client %s"
	ReasonCSIPluginMaxVolumes = "CSI plugin %s has the maximum number of volumes on client %s"
	ReasonCSITopology         = "CSI volume %s has exhausted its available topology"
	ReasonCSINoRead           = "CSI volume %s is unschedulable or has exhausted its available reader claims"
	ReasonCSINoWrite          = "CSI volume %s is unschedulable or has exhausted its available writer claims"
)

// VolumeTypeCSI is the volume type placed by CSI volume.
const VolumeTypeCSI = "csi"

// Access modes, Nomad's names.
const (
	csiSingleNodeReader      = "single-node-reader-only"
	csiSingleNodeWriter      = "single-node-writer"
	csiMultiNodeReader       = "multi-node-reader-only"
	csiMultiNodeSingleWriter = "multi-node-single-writer"
)

// CSIVolumes is the request's CSI volumes plus the claims the plan being
// built takes or gives up. One value is shared by every group of a
// request, so placements of one group constrain the next ones and the
// other groups'.
type CSIVolumes struct {
	jobID string
	vols  map[string]*schedulerpb.CSIVolume // by ID, the job's namespace
	// live marks the job's allocations that still hold their claims: wanted
	// running and not terminal on their client.
	live     map[string]bool
	released map[string]bool
	// planned are the claims placements of this plan take, by volume ID.
	planned map[string][]plannedClaim
	// onNode counts, per node and plugin, the volumes this plan adds to
	// the node.
	onNode map[string]map[string]int32
}

type plannedClaim struct {
	node  string
	write bool
}

// NewCSIVolumes indexes the request's volumes (those of the job's
// namespace) and the job's allocations that hold claims.
func NewCSIVolumes(req *schedulerpb.ScheduleRequest) *CSIVolumes {
	s := &CSIVolumes{
		vols:     map[string]*schedulerpb.CSIVolume{},
		live:     map[string]bool{},
		released: map[string]bool{},
		planned:  map[string][]plannedClaim{},
		onNode:   map[string]map[string]int32{},
	}
	job := req.GetJob()
	s.jobID = job.GetId()
	for _, v := range req.GetCsiVolumes() {
		if v.GetNamespace() == job.GetNamespace() {
			s.vols[v.GetId()] = v
		}
	}
	if len(s.vols) == 0 {
		return s
	}
	for _, a := range req.GetAllocs() {
		switch a.GetClientStatus() {
		case "complete", "failed", "lost":
			continue
		}
		if a.GetDesiredStatus() == "run" || a.GetDesiredStatus() == "" {
			s.live[a.GetId()] = true
		}
	}
	return s
}

// Release records that the plan stops the allocation: its claims no longer
// keep the job's new allocations off the volume.
func (s *CSIVolumes) Release(allocID string) {
	if s != nil {
		s.released[allocID] = true
	}
}

// Volume returns the volume with the given ID, or nil.
func (s *CSIVolumes) Volume(id string) *schedulerpb.CSIVolume {
	if s == nil {
		return nil
	}
	return s.vols[id]
}

// CSIChecker filters nodes that cannot take a group's CSI volumes.
type CSIChecker struct {
	vols     *CSIVolumes
	reqs     []*schedulerpb.VolumeRequest
	perAlloc bool
}

// NewCSIChecker returns the checker of tg's CSI volume requests against
// vols, or nil when the group asks for none.
func NewCSIChecker(tg *schedulerpb.TaskGroup, vols *CSIVolumes) *CSIChecker {
	var reqs []*schedulerpb.VolumeRequest
	perAlloc := false
	for _, v := range tg.GetVolumes() {
		if v.GetType() != VolumeTypeCSI {
			continue
		}
		reqs = append(reqs, v)
		perAlloc = perAlloc || v.GetPerAlloc()
	}
	if len(reqs) == 0 {
		return nil
	}
	if vols == nil {
		vols = &CSIVolumes{}
	}
	return &CSIChecker{vols: vols, reqs: reqs, perAlloc: perAlloc}
}

// VolumeID is the ID of the volume req names for the allocation of index
// idx: the source, suffixed with "[idx]" for per_alloc.
func VolumeID(req *schedulerpb.VolumeRequest, idx int) string {
	if !req.GetPerAlloc() {
		return req.GetSource()
	}
	return req.GetSource() + "[" + strconv.Itoa(idx) + "]"
}

// AllocIndex is the index of an allocation name "job.group[3]" (0 when it
// has none).
func AllocIndex(name string) int {
	i := strings.LastIndexByte(name, '[')
	if i < 0 || !strings.HasSuffix(name, "]") {
		return 0
	}
	n, err := strconv.Atoi(name[i+1 : len(name)-1])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Check implements Checker for the allocation of index 0.
func (c *CSIChecker) Check(n *schedulerpb.Node) (bool, string) {
	return c.CheckIndex(n, 0, "")
}

// CheckIndex checks the node for the allocation of index idx. self, when
// set, is an existing allocation being kept (updated in place): its own
// claims do not count against it.
func (c *CSIChecker) CheckIndex(n *schedulerpb.Node, idx int, self string) (bool, string) {
	var missing []string
	for _, r := range c.reqs {
		if id := VolumeID(r, idx); c.vols.Volume(id) == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return false, fmt.Sprintf(ReasonCSIVolumeMissing, strings.Join(missing, ", "))
	}
	for _, r := range c.reqs {
		if ok, reason := c.checkOne(n, r, VolumeID(r, idx), self); !ok {
			return false, reason
		}
	}
	return true, ""
}

func (c *CSIChecker) checkOne(n *schedulerpb.Node, r *schedulerpb.VolumeRequest, id, self string) (bool, string) {
	v := c.vols.Volume(id)
	pid := v.GetPluginId()
	var p *schedulerpb.CSINodePlugin
	for _, np := range n.GetCsiNodePlugins() {
		if np.GetPluginId() == pid {
			p = np
			break
		}
	}
	switch {
	case p == nil:
		return false, fmt.Sprintf(ReasonCSIPluginMissing, pid, n.GetId())
	case !p.GetHealthy():
		return false, fmt.Sprintf(ReasonCSIPluginUnhealthy, pid, n.GetId())
	}
	if limit := p.GetMaxVolumes(); limit > 0 && !c.vols.attached(v, n.GetId()) {
		if int64(p.GetVolumesInUse())+int64(c.vols.onNode[n.GetId()][pid]) >= limit {
			return false, fmt.Sprintf(ReasonCSIPluginMaxVolumes, pid, n.GetId())
		}
	}
	if !topologyMatch(v.GetTopologies(), p.GetAccessibleTopology()) {
		return false, fmt.Sprintf(ReasonCSITopology, id)
	}
	if r.GetReadOnly() {
		if !v.GetReadSchedulable() || !c.vols.freeRead(v, r, self) {
			return false, fmt.Sprintf(ReasonCSINoRead, id)
		}
		return true, ""
	}
	if !v.GetWriteSchedulable() || !c.vols.freeWrite(v, r, self) {
		return false, fmt.Sprintf(ReasonCSINoWrite, id)
	}
	return true, ""
}

// topologyMatch reports whether a node whose plugin reports segments can
// reach a volume accessible in topos: every segment of one of them is
// one of the node's. A volume with no topologies is reachable everywhere.
func topologyMatch(topos []*schedulerpb.CSITopology, segments map[string]string) bool {
	if len(topos) == 0 {
		return true
	}
	for _, t := range topos {
		ok := true
		for k, want := range t.GetSegments() {
			if got, has := segments[k]; !has || got != want {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// attached reports whether the volume is already claimed on the node (so a
// new claim there takes no extra volume slot).
func (s *CSIVolumes) attached(v *schedulerpb.CSIVolume, node string) bool {
	for _, cs := range [][]*schedulerpb.CSIVolumeClaim{v.GetReadClaims(), v.GetWriteClaims()} {
		for _, cl := range cs {
			if cl.GetNodeId() == node {
				return true
			}
		}
	}
	for _, pc := range s.planned[v.GetId()] {
		if pc.node == node {
			return true
		}
	}
	return false
}

// blocks reports whether an existing claim keeps a new allocation of the
// job off the volume. Claims of other jobs and of collected allocations
// do; those of the job's allocations do only while the allocation keeps
// running and this plan does not stop it, so a replacement may take over
// the volume of the allocation it replaces.
func (s *CSIVolumes) blocks(cl *schedulerpb.CSIVolumeClaim, self string) bool {
	id := cl.GetAllocId()
	if self != "" && id == self {
		return false
	}
	if cl.GetJobId() == "" || cl.GetJobId() != s.jobID {
		return true
	}
	return s.live[id] && !s.released[id]
}

// holders counts the claims that block a new one: existing readers and
// writers, and those this plan takes.
func (s *CSIVolumes) holders(v *schedulerpb.CSIVolume, self string) (readers, writers int) {
	for _, cl := range v.GetReadClaims() {
		if s.blocks(cl, self) {
			readers++
		}
	}
	for _, cl := range v.GetWriteClaims() {
		if s.blocks(cl, self) {
			writers++
		}
	}
	for _, pc := range s.planned[v.GetId()] {
		if pc.write {
			writers++
		} else {
			readers++
		}
	}
	return readers, writers
}

// mode is the volume's access mode, or before its first claim the one the
// request asks for (which the first claim sets).
func mode(v *schedulerpb.CSIVolume, r *schedulerpb.VolumeRequest) string {
	if m := v.GetAccessMode(); m != "" {
		return m
	}
	return r.GetAccessMode()
}

func (s *CSIVolumes) freeRead(v *schedulerpb.CSIVolume, r *schedulerpb.VolumeRequest, self string) bool {
	switch mode(v, r) {
	case csiSingleNodeReader:
		readers, _ := s.holders(v, self)
		return readers == 0
	case csiSingleNodeWriter:
		readers, writers := s.holders(v, self)
		return readers == 0 && writers == 0
	}
	return true
}

func (s *CSIVolumes) freeWrite(v *schedulerpb.CSIVolume, r *schedulerpb.VolumeRequest, self string) bool {
	switch mode(v, r) {
	case csiSingleNodeWriter:
		readers, writers := s.holders(v, self)
		return readers == 0 && writers == 0
	case csiMultiNodeSingleWriter:
		_, writers := s.holders(v, self)
		return writers == 0
	case csiSingleNodeReader, csiMultiNodeReader:
		return false
	}
	return true // multi-node-multi-writer, unknown
}

// Claim records that the plan places the allocation of index idx on node:
// it takes the group's volumes there, for the checks that follow.
func (c *CSIChecker) Claim(node string, idx int) {
	s := c.vols
	if s.planned == nil {
		s.planned = map[string][]plannedClaim{}
		s.onNode = map[string]map[string]int32{}
	}
	for _, r := range c.reqs {
		v := s.Volume(VolumeID(r, idx))
		if v == nil {
			continue
		}
		if !s.attached(v, node) {
			m := s.onNode[node]
			if m == nil {
				m = map[string]int32{}
				s.onNode[node] = m
			}
			m[v.GetPluginId()]++
		}
		s.planned[v.GetId()] = append(s.planned[v.GetId()], plannedClaim{node: node, write: !r.GetReadOnly()})
	}
}
