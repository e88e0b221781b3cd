package structs

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"
)

// Bounds on CSI volume fields, checked before anything reaches Raft.
const (
	MaxCSIVolumesPerRequest   = 256
	MaxCSIVolumeIDBytes       = 128
	MaxCSIExternalIDBytes     = 1024
	MaxCSIVolumeMapEntries    = 64 // secrets, parameters, context
	MaxCSIVolumeMapKeyBytes   = 256
	MaxCSIVolumeMapValueBytes = 4096
	MaxCSIVolumeCapabilities  = 16
	MaxCSIMountFlags          = 32
	MaxCSIMountFlagBytes      = 256
	MaxCSITopologies          = 32
	MaxCSITopologySegments    = 16
	// MaxCSIClaimsPerVolume bounds the claims (current and past) one volume
	// holds: a claim beyond it is refused as "volume max claims reached".
	MaxCSIClaimsPerVolume = 1024
)

// csiIDRe is the rule for volume and plugin IDs: URL-safe, as they are
// path segments of the API.
var csiIDRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_.\-\[\]]+$`) })

// ValidCSIID reports whether id is a valid volume or plugin ID.
func ValidCSIID(id string) bool { return len(id) <= MaxCSIVolumeIDBytes && csiIDRe().MatchString(id) }

// Valid reports whether m is a known access mode (not unknown).
func (m CSIVolumeAccessMode) Valid() bool {
	switch m {
	case CSIVolumeAccessModeSingleNodeReader, CSIVolumeAccessModeSingleNodeWriter,
		CSIVolumeAccessModeMultiNodeReader, CSIVolumeAccessModeMultiNodeSingleWriter,
		CSIVolumeAccessModeMultiNodeMultiWriter:
		return true
	}
	return false
}

// Writer reports whether the mode allows writing.
func (m CSIVolumeAccessMode) Writer() bool {
	switch m {
	case CSIVolumeAccessModeSingleNodeWriter, CSIVolumeAccessModeMultiNodeSingleWriter,
		CSIVolumeAccessModeMultiNodeMultiWriter:
		return true
	}
	return false
}

// Valid reports whether m is a known attachment mode (not unknown).
func (m CSIVolumeAttachmentMode) Valid() bool {
	return m == CSIVolumeAttachmentModeFilesystem || m == CSIVolumeAttachmentModeBlockDevice
}

// CSIVolumeClaimMode is what a claim asks for.
type CSIVolumeClaimMode int

// Claim modes (wire-stable numbers). GC is the pseudo-claim of the
// server's own releases: it names no allocation.
const (
	CSIVolumeClaimRead  CSIVolumeClaimMode = 0
	CSIVolumeClaimWrite CSIVolumeClaimMode = 1
	CSIVolumeClaimGC    CSIVolumeClaimMode = 2
)

func (m CSIVolumeClaimMode) String() string {
	switch m {
	case CSIVolumeClaimRead:
		return "read"
	case CSIVolumeClaimWrite:
		return "write"
	case CSIVolumeClaimGC:
		return "gc"
	}
	return fmt.Sprintf("CSIVolumeClaimMode(%d)", int(m))
}

// CSIVolumeClaimState is where a claim is on its way from taken to freed.
type CSIVolumeClaimState int

// Claim states (wire-stable numbers). A released claim goes Unpublishing →
// NodeDetached → ControllerDetached → ReadyToFree, and is then removed
// (freed); each step is checkpointed through Raft, so a new leader goes on
// from the last step done.
const (
	CSIVolumeClaimStateTaken              CSIVolumeClaimState = 0
	CSIVolumeClaimStateNodeDetached       CSIVolumeClaimState = 1
	CSIVolumeClaimStateControllerDetached CSIVolumeClaimState = 2
	CSIVolumeClaimStateReadyToFree        CSIVolumeClaimState = 3
	CSIVolumeClaimStateUnpublishing       CSIVolumeClaimState = 4
)

func (s CSIVolumeClaimState) String() string {
	switch s {
	case CSIVolumeClaimStateTaken:
		return "taken"
	case CSIVolumeClaimStateNodeDetached:
		return "node-detached"
	case CSIVolumeClaimStateControllerDetached:
		return "controller-detached"
	case CSIVolumeClaimStateReadyToFree:
		return "ready-to-free"
	case CSIVolumeClaimStateUnpublishing:
		return "unpublishing"
	}
	return fmt.Sprintf("CSIVolumeClaimState(%d)", int(s))
}

// CSIVolumeClaim is an allocation's hold on a volume. Everything a release
// needs is stored when the claim is taken (the node, the CSI node ID, the
// volume's external ID and the controller's publish context), so a release
// never depends on a lookup that a lost node or plugin could break.
type CSIVolumeClaim struct {
	AllocationID   string                  `codec:",omitempty"`
	NodeID         string                  `codec:",omitempty"`
	ExternalNodeID string                  `codec:",omitempty"`
	Mode           CSIVolumeClaimMode      `codec:",omitempty"`
	AccessMode     CSIVolumeAccessMode     `codec:",omitempty"`
	AttachmentMode CSIVolumeAttachmentMode `codec:",omitempty"`
	State          CSIVolumeClaimState     `codec:",omitempty"`
	// ExternalVolumeID is the volume's RemoteID when the claim was taken.
	ExternalVolumeID string `codec:",omitempty"`
	// PublishContext is the controller's answer to ControllerPublish,
	// handed to NodeStage/NodePublish.
	PublishContext map[string]string `codec:",omitempty"`
	// ControllerNodeID is the client whose controller plugin published
	// the volume, if one did.
	ControllerNodeID string `codec:",omitempty"`
}

// Copy returns a deep copy.
func (c *CSIVolumeClaim) Copy() *CSIVolumeClaim {
	if c == nil {
		return nil
	}
	out := *c
	out.PublishContext = maps.Clone(c.PublishContext)
	return &out
}

// CSITopology is a set of segments (e.g. zone = a) a volume or node is in.
type CSITopology struct {
	Segments map[string]string `codec:",omitempty"`
}

// Equal reports whether two topologies have the same segments.
func (t *CSITopology) Equal(o *CSITopology) bool {
	if t == nil || o == nil {
		return t == o
	}
	return maps.Equal(t.Segments, o.Segments)
}

// MatchFound reports whether t matches one of the given topologies: every
// segment of the candidate is also one of t's.
func (t *CSITopology) MatchFound(candidates []*CSITopology) bool {
	if t == nil {
		return false
	}
	for _, c := range candidates {
		if c == nil {
			continue
		}
		ok := true
		for k, v := range c.Segments {
			if t.Segments[k] != v {
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

// CSITopologyRequest is the topology a volume asks to be created in.
type CSITopologyRequest struct {
	Required  []*CSITopology `codec:",omitempty"`
	Preferred []*CSITopology `codec:",omitempty"`
}

// CSIVolumeCapability is one (access, attachment) pair a volume supports.
type CSIVolumeCapability struct {
	AttachmentMode CSIVolumeAttachmentMode `codec:",omitempty"`
	AccessMode     CSIVolumeAccessMode     `codec:",omitempty"`
}

// CSIVolume is a storage volume provided by a CSI plugin. It is namespaced;
// the same ID in two namespaces names two volumes.
//
// Stored volumes keep ReadAllocs and WriteAllocs as sets of allocation IDs
// (nil values); readers fill the values in.
type CSIVolume struct {
	ID                    string
	Name                  string
	ExternalID            string
	Namespace             string
	Topologies            []*CSITopology          `codec:",omitempty"`
	RequestedTopologies   *CSITopologyRequest     `codec:",omitempty"`
	AccessMode            CSIVolumeAccessMode     `codec:",omitempty"`
	AttachmentMode        CSIVolumeAttachmentMode `codec:",omitempty"`
	MountOptions          *CSIMountOptions        `codec:",omitempty"`
	Secrets               map[string]string       `codec:",omitempty"`
	Parameters            map[string]string       `codec:",omitempty"`
	Context               map[string]string       `codec:",omitempty"`
	Capacity              int64                   `codec:",omitempty"`
	RequestedCapacityMin  int64                   `codec:",omitempty"`
	RequestedCapacityMax  int64                   `codec:",omitempty"`
	RequestedCapabilities []*CSIVolumeCapability  `codec:",omitempty"`
	CloneID               string                  `codec:",omitempty"`
	SnapshotID            string                  `codec:",omitempty"`

	ReadAllocs  map[string]*Allocation `codec:",omitempty"`
	WriteAllocs map[string]*Allocation `codec:",omitempty"`

	// Claims are internal: Nomad's API hides them.
	ReadClaims  map[string]*CSIVolumeClaim `codec:",omitempty" json:"-"`
	WriteClaims map[string]*CSIVolumeClaim `codec:",omitempty" json:"-"`
	PastClaims  map[string]*CSIVolumeClaim `codec:",omitempty" json:"-"`

	// Filled in from the plugin on read.
	Schedulable         bool      `codec:",omitempty"`
	PluginID            string    `codec:",omitempty"`
	Provider            string    `codec:",omitempty"`
	ProviderVersion     string    `codec:",omitempty"`
	ControllerRequired  bool      `codec:",omitempty"`
	ControllersHealthy  int       `codec:",omitempty"`
	ControllersExpected int       `codec:",omitempty"`
	NodesHealthy        int       `codec:",omitempty"`
	NodesExpected       int       `codec:",omitempty"`
	ResourceExhausted   time.Time `codec:",omitempty"`

	CreateIndex uint64 `codec:",omitempty"`
	ModifyIndex uint64 `codec:",omitempty"`
	CreateTime  int64  `codec:",omitempty"`
	ModifyTime  int64  `codec:",omitempty"`
}

// RemoteID is the ID the storage provider knows the volume by.
func (v *CSIVolume) RemoteID() string {
	if v.ExternalID != "" {
		return v.ExternalID
	}
	return v.ID
}

// Copy returns a deep copy.
func (v *CSIVolume) Copy() *CSIVolume {
	if v == nil {
		return nil
	}
	c := *v
	c.Topologies = copyTopologies(v.Topologies)
	if v.RequestedTopologies != nil {
		c.RequestedTopologies = &CSITopologyRequest{
			Required:  copyTopologies(v.RequestedTopologies.Required),
			Preferred: copyTopologies(v.RequestedTopologies.Preferred),
		}
	}
	if v.MountOptions != nil {
		mo := *v.MountOptions
		mo.MountFlags = slices.Clone(v.MountOptions.MountFlags)
		c.MountOptions = &mo
	}
	c.Secrets = maps.Clone(v.Secrets)
	c.Parameters = maps.Clone(v.Parameters)
	c.Context = maps.Clone(v.Context)
	if v.RequestedCapabilities != nil {
		c.RequestedCapabilities = make([]*CSIVolumeCapability, len(v.RequestedCapabilities))
		for i, cp := range v.RequestedCapabilities {
			if cp != nil {
				x := *cp
				c.RequestedCapabilities[i] = &x
			}
		}
	}
	c.ReadAllocs = maps.Clone(v.ReadAllocs)
	c.WriteAllocs = maps.Clone(v.WriteAllocs)
	c.ReadClaims = copyClaims(v.ReadClaims)
	c.WriteClaims = copyClaims(v.WriteClaims)
	c.PastClaims = copyClaims(v.PastClaims)
	return &c
}

func copyTopologies(in []*CSITopology) []*CSITopology {
	if in == nil {
		return nil
	}
	out := make([]*CSITopology, len(in))
	for i, t := range in {
		if t != nil {
			out[i] = &CSITopology{Segments: maps.Clone(t.Segments)}
		}
	}
	return out
}

func copyClaims(in map[string]*CSIVolumeClaim) map[string]*CSIVolumeClaim {
	if in == nil {
		return nil
	}
	out := make(map[string]*CSIVolumeClaim, len(in))
	for k, c := range in {
		out[k] = c.Copy()
	}
	return out
}

// initMaps makes the claim maps writable.
func (v *CSIVolume) initMaps() {
	if v.ReadAllocs == nil {
		v.ReadAllocs = map[string]*Allocation{}
	}
	if v.WriteAllocs == nil {
		v.WriteAllocs = map[string]*Allocation{}
	}
	if v.ReadClaims == nil {
		v.ReadClaims = map[string]*CSIVolumeClaim{}
	}
	if v.WriteClaims == nil {
		v.WriteClaims = map[string]*CSIVolumeClaim{}
	}
	if v.PastClaims == nil {
		v.PastClaims = map[string]*CSIVolumeClaim{}
	}
}

// InUse reports whether any claim, current or past, holds the volume.
func (v *CSIVolume) InUse() bool {
	return len(v.ReadAllocs) > 0 || len(v.WriteAllocs) > 0 || len(v.ReadClaims) > 0 ||
		len(v.WriteClaims) > 0 || len(v.PastClaims) > 0
}

// ReadSchedulable reports whether a new read claim could be placed.
func (v *CSIVolume) ReadSchedulable() bool {
	return v.Schedulable && v.ResourceExhausted.IsZero()
}

// WriteSchedulable reports whether a new write claim could be placed: the
// volume's mode (or, before the first claim, one of its capabilities) is a
// writer mode.
func (v *CSIVolume) WriteSchedulable() bool {
	if !v.Schedulable || !v.ResourceExhausted.IsZero() {
		return false
	}
	if v.AccessMode != CSIVolumeAccessModeUnknown {
		return v.AccessMode.Writer()
	}
	for _, c := range v.RequestedCapabilities {
		if c != nil && c.AccessMode.Writer() {
			return true
		}
	}
	return false
}

// others counts the entries of m that are not alloc.
func others[T any](m map[string]T, alloc string) int {
	n := len(m)
	if _, ok := m[alloc]; ok {
		n--
	}
	return n
}

// HasFreeReadClaims reports whether alloc could take a read claim.
func (v *CSIVolume) HasFreeReadClaims(alloc string) bool {
	switch v.AccessMode {
	case CSIVolumeAccessModeSingleNodeReader:
		return others(v.ReadClaims, alloc) == 0
	case CSIVolumeAccessModeSingleNodeWriter:
		return others(v.ReadClaims, alloc) == 0 && others(v.WriteClaims, alloc) == 0
	}
	return true
}

// HasFreeWriteClaims reports whether alloc could take a write claim. On a
// single-node-writer volume another allocation's read claim blocks it as
// a write claim does: the mode is exclusive.
func (v *CSIVolume) HasFreeWriteClaims(alloc string) bool {
	switch v.AccessMode {
	case CSIVolumeAccessModeSingleNodeWriter:
		return others(v.WriteClaims, alloc) == 0 && others(v.ReadClaims, alloc) == 0
	case CSIVolumeAccessModeMultiNodeSingleWriter:
		return others(v.WriteClaims, alloc) == 0
	case CSIVolumeAccessModeMultiNodeMultiWriter, CSIVolumeAccessModeUnknown:
		return true
	}
	return false // reader modes
}

// Claim errors, their messages Nomad's (clients retry on the first).
const (
	CSIErrMaxClaims        = "volume max claims reached"
	CSIErrUnschedulable    = "volume is currently unschedulable"
	CSIErrAttachmentChange = "cannot change attachment mode of claimed volume"
)

// Claim applies one claim to the volume: a Taken claim takes a read or
// write hold for its allocation; any other state checkpoints a release
// (stored as a past claim), and ReadyToFree frees it. alloc is the claim's
// allocation (nil when it was collected), needed for a Taken claim.
func (v *CSIVolume) Claim(claim *CSIVolumeClaim, alloc *Allocation) error {
	if claim == nil {
		return NewError(ErrInvalid, "volume %q: missing claim", v.ID)
	}
	if claim.AttachmentMode != CSIVolumeAttachmentModeUnknown &&
		v.AttachmentMode != CSIVolumeAttachmentModeUnknown &&
		claim.AttachmentMode != v.AttachmentMode {
		return NewError(ErrInvalid, "volume %q: %s (%s, asked %s)", v.ID, CSIErrAttachmentChange, v.AttachmentMode, claim.AttachmentMode)
	}
	v.initMaps()
	if claim.State == CSIVolumeClaimStateTaken && claim.Mode != CSIVolumeClaimGC {
		switch claim.Mode {
		case CSIVolumeClaimRead:
			return v.claimRead(claim, alloc)
		case CSIVolumeClaimWrite:
			return v.claimWrite(claim, alloc)
		}
		return NewError(ErrInvalid, "volume %q: unknown claim mode %d", v.ID, int(claim.Mode))
	}
	return v.claimRelease(claim)
}

func (v *CSIVolume) claimRead(claim *CSIVolumeClaim, alloc *Allocation) error {
	if _, ok := v.ReadAllocs[claim.AllocationID]; ok {
		return nil // idempotent
	}
	if alloc == nil {
		return NewError(ErrNotFound, "volume %q: allocation %q of the claim not found", v.ID, claim.AllocationID)
	}
	if !v.ReadSchedulable() {
		return NewError(ErrInvalid, "volume %q: %s", v.ID, CSIErrUnschedulable)
	}
	if !v.HasFreeReadClaims(claim.AllocationID) || v.claimCount() >= MaxCSIClaimsPerVolume {
		return NewError(ErrConflict, "volume %q: %s", v.ID, CSIErrMaxClaims)
	}
	v.take(claim, v.ReadAllocs, v.ReadClaims, v.WriteAllocs, v.WriteClaims)
	return nil
}

func (v *CSIVolume) claimWrite(claim *CSIVolumeClaim, alloc *Allocation) error {
	if _, ok := v.WriteAllocs[claim.AllocationID]; ok {
		return nil // idempotent
	}
	if alloc == nil {
		return NewError(ErrNotFound, "volume %q: allocation %q of the claim not found", v.ID, claim.AllocationID)
	}
	if !v.WriteSchedulable() {
		return NewError(ErrInvalid, "volume %q: %s", v.ID, CSIErrUnschedulable)
	}
	if !v.HasFreeWriteClaims(claim.AllocationID) || v.claimCount() >= MaxCSIClaimsPerVolume {
		return NewError(ErrConflict, "volume %q: %s", v.ID, CSIErrMaxClaims)
	}
	v.take(claim, v.WriteAllocs, v.WriteClaims, v.ReadAllocs, v.ReadClaims)
	return nil
}

func (v *CSIVolume) claimCount() int {
	return len(v.ReadClaims) + len(v.WriteClaims) + len(v.PastClaims)
}

// take records a taken claim in the given maps, out of the other ones.
func (v *CSIVolume) take(claim *CSIVolumeClaim, allocs map[string]*Allocation, claims map[string]*CSIVolumeClaim,
	otherAllocs map[string]*Allocation, otherClaims map[string]*CSIVolumeClaim) {
	id := claim.AllocationID
	allocs[id] = nil
	claims[id] = claim.Copy()
	delete(otherAllocs, id)
	delete(otherClaims, id)
	delete(v.PastClaims, id)
	if v.AccessMode == CSIVolumeAccessModeUnknown {
		v.AccessMode = claim.AccessMode
	}
	if v.AttachmentMode == CSIVolumeAttachmentModeUnknown {
		v.AttachmentMode = claim.AttachmentMode
	}
}

// claimRelease checkpoints or frees a claim being released.
func (v *CSIVolume) claimRelease(claim *CSIVolumeClaim) error {
	id := claim.AllocationID
	if id == "" {
		// A GC pseudo-claim names no allocation: it only bumps the
		// volume's index, which wakes the volume watcher.
		return nil
	}
	if claim.State != CSIVolumeClaimStateReadyToFree {
		past := claim.Copy()
		// An unpublishing claim keeps the mode it held.
		if cur := v.currentClaim(id); cur != nil {
			if past.Mode == CSIVolumeClaimGC {
				past.Mode = cur.Mode
			}
			fillClaim(past, cur)
		} else if prev := v.PastClaims[id]; prev != nil {
			fillClaim(past, prev)
		}
		v.PastClaims[id] = past
		return nil
	}
	delete(v.ReadAllocs, id)
	delete(v.WriteAllocs, id)
	delete(v.ReadClaims, id)
	delete(v.WriteClaims, id)
	delete(v.PastClaims, id)
	if len(v.ReadAllocs) == 0 && len(v.WriteAllocs) == 0 && len(v.ReadClaims) == 0 &&
		len(v.WriteClaims) == 0 && len(v.PastClaims) == 0 {
		v.AccessMode = CSIVolumeAccessModeUnknown
		v.AttachmentMode = CSIVolumeAttachmentModeUnknown
	}
	return nil
}

func (v *CSIVolume) currentClaim(alloc string) *CSIVolumeClaim {
	if c := v.WriteClaims[alloc]; c != nil {
		return c
	}
	return v.ReadClaims[alloc]
}

// fillClaim completes a checkpoint from the claim it releases: the facts a
// release needs are kept even if the checkpoint's sender did not know them.
func fillClaim(dst, src *CSIVolumeClaim) {
	if dst.NodeID == "" {
		dst.NodeID = src.NodeID
	}
	if dst.ExternalNodeID == "" {
		dst.ExternalNodeID = src.ExternalNodeID
	}
	if dst.ExternalVolumeID == "" {
		dst.ExternalVolumeID = src.ExternalVolumeID
	}
	if dst.AccessMode == CSIVolumeAccessModeUnknown {
		dst.AccessMode = src.AccessMode
	}
	if dst.AttachmentMode == CSIVolumeAttachmentModeUnknown {
		dst.AttachmentMode = src.AttachmentMode
	}
	if dst.PublishContext == nil {
		dst.PublishContext = maps.Clone(src.PublishContext)
	}
	if dst.ControllerNodeID == "" {
		dst.ControllerNodeID = src.ControllerNodeID
	}
}

// ClaimFor returns the current or past claim of alloc, or nil.
func (v *CSIVolume) ClaimFor(alloc string) *CSIVolumeClaim {
	if c := v.currentClaim(alloc); c != nil {
		return c
	}
	return v.PastClaims[alloc]
}

// ReleaseTerminal records a past claim, state Unpublishing, for every
// current claim whose allocation is gone or terminal on its client and has
// no past claim yet: those are the claims the volume watcher drives to
// freed. live reports an allocation's state: (exists, clientTerminal).
func (v *CSIVolume) ReleaseTerminal(live func(allocID string) (bool, bool)) {
	for _, claims := range []map[string]*CSIVolumeClaim{v.ReadClaims, v.WriteClaims} {
		for id, c := range claims {
			if _, ok := v.PastClaims[id]; ok {
				continue
			}
			exists, terminal := live(id)
			if exists && !terminal {
				continue
			}
			if v.PastClaims == nil {
				v.PastClaims = map[string]*CSIVolumeClaim{}
			}
			past := c.Copy()
			past.State = CSIVolumeClaimStateUnpublishing
			v.PastClaims[id] = past
		}
	}
	// Allocation IDs without a claim record (never expected, but a past
	// claim must exist for everything that holds the volume).
	for _, allocs := range []map[string]*Allocation{v.ReadAllocs, v.WriteAllocs} {
		for id := range allocs {
			if v.ClaimFor(id) != nil {
				continue
			}
			exists, terminal := live(id)
			if exists && !terminal {
				continue
			}
			if v.PastClaims == nil {
				v.PastClaims = map[string]*CSIVolumeClaim{}
			}
			v.PastClaims[id] = &CSIVolumeClaim{AllocationID: id, State: CSIVolumeClaimStateUnpublishing}
		}
	}
}

// Validate checks a volume to register. Secrets are never echoed in errors.
func (v *CSIVolume) Validate() error {
	if v == nil {
		return NewError(ErrInvalid, "volume: missing")
	}
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	switch {
	case v.ID == "":
		add("ID: missing")
	case !ValidCSIID(v.ID):
		add("ID %q: must be 1 to %d bytes of letters, digits and _ . - [ ]", v.ID, MaxCSIVolumeIDBytes)
	}
	if v.Namespace == "" {
		add("Namespace: missing")
	}
	switch {
	case v.PluginID == "":
		add("PluginID: missing")
	case !ValidCSIID(v.PluginID):
		add("PluginID %q: must be 1 to %d bytes of letters, digits and _ . -", v.PluginID, MaxCSIVolumeIDBytes)
	}
	if len(v.Name) > MaxCSIVolumeIDBytes {
		add("Name: longer than %d bytes", MaxCSIVolumeIDBytes)
	}
	if len(v.ExternalID) > MaxCSIExternalIDBytes {
		add("ExternalID: longer than %d bytes", MaxCSIExternalIDBytes)
	}
	if len(v.CloneID) > MaxCSIExternalIDBytes || len(v.SnapshotID) > MaxCSIExternalIDBytes {
		add("CloneID, SnapshotID: longer than %d bytes", MaxCSIExternalIDBytes)
	}
	if v.CloneID != "" && v.SnapshotID != "" {
		add("CloneID and SnapshotID: only one may be set")
	}
	if v.RequestedCapacityMin < 0 || v.RequestedCapacityMax < 0 {
		add("capacity_min, capacity_max: must not be negative")
	}
	if v.RequestedCapacityMax > 0 && v.RequestedCapacityMin > v.RequestedCapacityMax {
		add("capacity_min (%d) is above capacity_max (%d)", v.RequestedCapacityMin, v.RequestedCapacityMax)
	}
	switch n := len(v.RequestedCapabilities); {
	case n == 0:
		add("RequestedCapabilities: at least one capability block is required")
	case n > MaxCSIVolumeCapabilities:
		add("RequestedCapabilities: more than %d", MaxCSIVolumeCapabilities)
	}
	for i, c := range v.RequestedCapabilities {
		switch {
		case c == nil:
			add("capability %d: missing", i)
		case !c.AccessMode.Valid():
			add("capability %d: access_mode %q is not one of %s", i, c.AccessMode, accessModeNames)
		case !c.AttachmentMode.Valid():
			add("capability %d: attachment_mode %q is not one of file-system, block-device", i, c.AttachmentMode)
		}
	}
	if v.AccessMode != CSIVolumeAccessModeUnknown && !v.AccessMode.Valid() {
		add("AccessMode %q is not one of %s", v.AccessMode, accessModeNames)
	}
	if v.AttachmentMode != CSIVolumeAttachmentModeUnknown && !v.AttachmentMode.Valid() {
		add("AttachmentMode %q is not one of file-system, block-device", v.AttachmentMode)
	}
	if mo := v.MountOptions; mo != nil {
		if len(mo.FSType) > MaxCSIMountFlagBytes {
			add("mount_options.fs_type: longer than %d bytes", MaxCSIMountFlagBytes)
		}
		if len(mo.MountFlags) > MaxCSIMountFlags {
			add("mount_options.mount_flags: more than %d", MaxCSIMountFlags)
		}
		for _, f := range mo.MountFlags {
			if len(f) > MaxCSIMountFlagBytes {
				add("mount_options.mount_flags: a flag is longer than %d bytes", MaxCSIMountFlagBytes)
				break
			}
		}
	}
	for _, m := range []struct {
		name   string
		m      map[string]string
		secret bool
	}{{"secrets", v.Secrets, true}, {"parameters", v.Parameters, false}, {"context", v.Context, false}} {
		if len(m.m) > MaxCSIVolumeMapEntries {
			add("%s: more than %d entries", m.name, MaxCSIVolumeMapEntries)
			continue
		}
		keys := slices.Sorted(maps.Keys(m.m))
		for _, k := range keys {
			if k == "" || len(k) > MaxCSIVolumeMapKeyBytes {
				if m.secret {
					add("%s: a key is empty or longer than %d bytes", m.name, MaxCSIVolumeMapKeyBytes)
				} else {
					add("%s key %q: must be 1 to %d bytes", m.name, k, MaxCSIVolumeMapKeyBytes)
				}
				break
			}
			if len(m.m[k]) > MaxCSIVolumeMapValueBytes {
				add("%s %q: value longer than %d bytes", m.name, k, MaxCSIVolumeMapValueBytes)
				break
			}
		}
	}
	checkTopos := func(name string, ts []*CSITopology) {
		if len(ts) > MaxCSITopologies {
			add("%s: more than %d topologies", name, MaxCSITopologies)
			return
		}
		for i, t := range ts {
			switch {
			case t == nil || len(t.Segments) == 0:
				add("%s %d: a topology needs segments", name, i)
			case len(t.Segments) > MaxCSITopologySegments:
				add("%s %d: more than %d segments", name, i, MaxCSITopologySegments)
			}
		}
	}
	checkTopos("Topologies", v.Topologies)
	if v.RequestedTopologies != nil {
		checkTopos("topology_request.required", v.RequestedTopologies.Required)
		checkTopos("topology_request.preferred", v.RequestedTopologies.Preferred)
	}
	if len(errs) > 0 {
		id := v.ID
		if !ValidCSIID(id) {
			id = "(invalid)"
		}
		return NewError(ErrInvalid, "volume %q: %s", id, joinErrs(errs))
	}
	return nil
}

var accessModeNames = "single-node-reader-only, single-node-writer, multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer"

func joinErrs(errs []string) string {
	out := errs[0]
	for _, e := range errs[1:] {
		out += "; " + e
	}
	return out
}

// HasCapability reports whether the volume supports the pair.
func (v *CSIVolume) HasCapability(access CSIVolumeAccessMode, attach CSIVolumeAttachmentMode) bool {
	for _, c := range v.RequestedCapabilities {
		if c != nil && c.AccessMode == access && c.AttachmentMode == attach {
			return true
		}
	}
	return false
}

// Merge applies a re-registration (update) of the volume onto v, a copy
// of the stored one, by the rules of an update: identity is immutable,
// capabilities must keep the pair in use, mount options are immutable while
// in use, and parameters once set are immutable.
func (v *CSIVolume) Merge(u *CSIVolume) error {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if u.Name != "" && u.Name != v.Name && v.Name != "" {
		add("name cannot be updated")
	}
	if u.ExternalID != v.ExternalID {
		add("external_id cannot be updated")
	}
	if u.PluginID != v.PluginID {
		add("plugin_id cannot be updated")
	}
	if u.CloneID != v.CloneID || u.SnapshotID != v.SnapshotID {
		add("clone_id and snapshot_id cannot be updated")
	}
	if v.InUse() && v.AccessMode != CSIVolumeAccessModeUnknown && !u.HasCapability(v.AccessMode, v.AttachmentMode) {
		add("capabilities must keep the (%s, %s) pair the volume is claimed with", v.AccessMode, v.AttachmentMode)
	}
	if v.InUse() && !mountOptionsEqual(v.MountOptions, u.MountOptions) && u.MountOptions != nil {
		add("mount_options cannot be updated while the volume is in use")
	}
	if len(v.Parameters) > 0 && len(u.Parameters) > 0 && !maps.Equal(v.Parameters, u.Parameters) {
		add("parameters cannot be updated")
	}
	if len(v.Topologies) > 0 && u.RequestedTopologies != nil && v.RequestedTopologies != nil &&
		!topologyRequestEqual(v.RequestedTopologies, u.RequestedTopologies) {
		add("topology_request cannot be updated once the volume has topologies")
	}
	if len(errs) > 0 {
		return NewError(ErrInvalid, "volume %q: %s", v.ID, joinErrs(errs))
	}
	if u.Name != "" {
		v.Name = u.Name
	}
	v.RequestedCapabilities = u.Copy().RequestedCapabilities
	if u.MountOptions != nil {
		v.MountOptions = u.Copy().MountOptions
	}
	v.Secrets = maps.Clone(u.Secrets)
	if len(v.Parameters) == 0 {
		v.Parameters = maps.Clone(u.Parameters)
	}
	if u.Context != nil {
		v.Context = maps.Clone(u.Context)
	}
	if u.RequestedCapacityMin != 0 || u.RequestedCapacityMax != 0 {
		v.RequestedCapacityMin, v.RequestedCapacityMax = u.RequestedCapacityMin, u.RequestedCapacityMax
	}
	if u.Capacity > v.Capacity {
		v.Capacity = u.Capacity
	}
	if v.RequestedTopologies == nil && u.RequestedTopologies != nil {
		v.RequestedTopologies = u.Copy().RequestedTopologies
	}
	if len(v.Topologies) == 0 && len(u.Topologies) > 0 {
		v.Topologies = copyTopologies(u.Topologies)
	}
	return nil
}

// SameCapabilities reports whether u asks for the same uses of the volume
// as v: the same set of capability pairs and the same mount options (the
// file system type and flags a file-system capability is validated and
// mounted with).
func (v *CSIVolume) SameCapabilities(u *CSIVolume) bool {
	covers := func(a, b *CSIVolume) bool {
		for _, c := range a.RequestedCapabilities {
			if c != nil && !b.HasCapability(c.AccessMode, c.AttachmentMode) {
				return false
			}
		}
		return true
	}
	return covers(v, u) && covers(u, v) && mountOptionsEqual(v.MountOptions, u.MountOptions)
}

func mountOptionsEqual(a, b *CSIMountOptions) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.FSType == b.FSType && slices.Equal(a.MountFlags, b.MountFlags)
}

func topologyRequestEqual(a, b *CSITopologyRequest) bool {
	eq := func(x, y []*CSITopology) bool {
		return slices.EqualFunc(x, y, func(p, q *CSITopology) bool { return p.Equal(q) })
	}
	return eq(a.Required, b.Required) && eq(a.Preferred, b.Preferred)
}

// Redacted is a copy for API answers: secret values and mount flags are
// replaced, as Nomad does.
func (v *CSIVolume) Redacted() *CSIVolume {
	c := v.Copy()
	for k := range c.Secrets {
		c.Secrets[k] = "[REDACTED]"
	}
	if c.MountOptions != nil && len(c.MountOptions.MountFlags) > 0 {
		c.MountOptions.MountFlags = []string{"[REDACTED]"}
	}
	return c
}

// CSIVolListStub is a volume in list answers.
type CSIVolListStub struct {
	ID                  string
	Namespace           string
	Name                string
	ExternalID          string
	Topologies          []*CSITopology
	AccessMode          CSIVolumeAccessMode
	AttachmentMode      CSIVolumeAttachmentMode
	CurrentReaders      int
	CurrentWriters      int
	Schedulable         bool
	PluginID            string
	Provider            string
	ControllerRequired  bool
	ControllersHealthy  int
	ControllersExpected int
	NodesHealthy        int
	NodesExpected       int
	ResourceExhausted   time.Time
	CreateIndex         uint64
	ModifyIndex         uint64
	CreateTime          int64
	ModifyTime          int64
}

// Stub returns the list form of a (denormalized) volume.
func (v *CSIVolume) Stub() *CSIVolListStub {
	return &CSIVolListStub{
		ID: v.ID, Namespace: v.Namespace, Name: v.Name, ExternalID: v.ExternalID,
		Topologies: copyTopologies(v.Topologies), AccessMode: v.AccessMode, AttachmentMode: v.AttachmentMode,
		CurrentReaders: len(v.ReadAllocs), CurrentWriters: len(v.WriteAllocs),
		Schedulable: v.Schedulable, PluginID: v.PluginID, Provider: v.Provider,
		ControllerRequired: v.ControllerRequired, ControllersHealthy: v.ControllersHealthy,
		ControllersExpected: v.ControllersExpected, NodesHealthy: v.NodesHealthy, NodesExpected: v.NodesExpected,
		ResourceExhausted: v.ResourceExhausted, CreateIndex: v.CreateIndex, ModifyIndex: v.ModifyIndex,
		CreateTime: v.CreateTime, ModifyTime: v.ModifyTime,
	}
}

// sortedClaimIDs lists a claim map's allocation IDs in order.
func sortedClaimIDs(m map[string]*CSIVolumeClaim) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// PastClaimIDs lists the allocations of the past claims, sorted.
func (v *CSIVolume) PastClaimIDs() []string { return sortedClaimIDs(v.PastClaims) }
