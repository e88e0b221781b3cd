package structs

import (
	"regexp"
	"sort"
	"sync"
)

// Raft entries of node pools (Nomad's numbers). Never renumber.
const (
	NodePoolUpsertRequestType MessageType = 57
	NodePoolDeleteRequestType MessageType = 58
)

// Bounds on node pool fields, checked before anything reaches Raft.
const (
	MaxNodePoolDescription = 256
	MaxNodePoolMetaEntries = 64
	MaxNodePoolMetaKey     = 128
	MaxNodePoolMetaValue   = 1024
)

// Scheduler algorithms a node pool may name (Nomad's).
const (
	SchedulerAlgorithmBinpack = "binpack"
	SchedulerAlgorithmSpread  = "spread"
)

var nodePoolNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`) })

// ValidNodePoolName reports whether name follows Nomad's rule for node
// pool names: 1 to 128 letters, digits, dashes or underscores.
func ValidNodePoolName(name string) bool { return nodePoolNameRe().MatchString(name) }

// IsBuiltinNodePool reports whether name is one of the pools that always
// exist ("default" and "all").
func IsBuiltinNodePool(name string) bool { return name == NodePoolDefault || name == NodePoolAll }

// NodePoolSchedulerConfiguration overrides the cluster's scheduler
// configuration for the nodes of one pool.
type NodePoolSchedulerConfiguration struct {
	SchedulerAlgorithm            string `json:",omitempty"`
	MemoryOversubscriptionEnabled *bool  `json:",omitempty"`
}

// NodePool groups nodes; a job runs only on the nodes of its pool. Fields
// follow Nomad's API object so the official client decodes it.
type NodePool struct {
	Name                   string
	Description            string
	Meta                   map[string]string               `json:",omitempty"`
	SchedulerConfiguration *NodePoolSchedulerConfiguration `json:",omitempty"`
	CreateIndex            uint64
	ModifyIndex            uint64
}

// BuiltinNodePools returns fresh copies of the pools that always exist.
func BuiltinNodePools() []*NodePool {
	return []*NodePool{
		{Name: NodePoolAll, Description: "Node pool with all nodes in the cluster."},
		{Name: NodePoolDefault, Description: "Default node pool."},
	}
}

// Validate checks the pool against the naming rule and the bounds.
func (p *NodePool) Validate() error {
	if p == nil {
		return NewError(ErrInvalid, "node pool: missing")
	}
	if !ValidNodePoolName(p.Name) {
		return NewError(ErrInvalid, "node pool Name %q: must be 1 to 128 letters, digits, '-' or '_'", p.Name)
	}
	if len(p.Description) > MaxNodePoolDescription {
		return NewError(ErrInvalid, "node pool %q: Description longer than %d bytes", p.Name, MaxNodePoolDescription)
	}
	if len(p.Meta) > MaxNodePoolMetaEntries {
		return NewError(ErrInvalid, "node pool %q: Meta has more than %d entries", p.Name, MaxNodePoolMetaEntries)
	}
	keys := make([]string, 0, len(p.Meta))
	for k := range p.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" || len(k) > MaxNodePoolMetaKey {
			return NewError(ErrInvalid, "node pool %q: Meta key %q must be 1 to %d bytes", p.Name, k, MaxNodePoolMetaKey)
		}
		if len(p.Meta[k]) > MaxNodePoolMetaValue {
			return NewError(ErrInvalid, "node pool %q: Meta %q value longer than %d bytes", p.Name, k, MaxNodePoolMetaValue)
		}
	}
	if sc := p.SchedulerConfiguration; sc != nil {
		switch sc.SchedulerAlgorithm {
		case "", SchedulerAlgorithmBinpack, SchedulerAlgorithmSpread:
		default:
			return NewError(ErrInvalid, "node pool %q: SchedulerConfiguration.SchedulerAlgorithm %q must be %q or %q",
				p.Name, sc.SchedulerAlgorithm, SchedulerAlgorithmBinpack, SchedulerAlgorithmSpread)
		}
	}
	return nil
}

// Copy returns a deep copy.
func (p *NodePool) Copy() *NodePool {
	if p == nil {
		return nil
	}
	c := *p
	if p.Meta != nil {
		c.Meta = make(map[string]string, len(p.Meta))
		for k, v := range p.Meta {
			c.Meta[k] = v
		}
	}
	if p.SchedulerConfiguration != nil {
		sc := *p.SchedulerConfiguration
		if sc.MemoryOversubscriptionEnabled != nil {
			b := *sc.MemoryOversubscriptionEnabled
			sc.MemoryOversubscriptionEnabled = &b
		}
		c.SchedulerConfiguration = &sc
	}
	return &c
}

// NodePoolUpsertRequest is the Raft entry (NodePoolUpsertRequestType)
// that creates or updates node pools.
type NodePoolUpsertRequest struct {
	NodePools []*NodePool
}

// NodePoolDeleteRequest is the Raft entry (NodePoolDeleteRequestType)
// that deletes node pools by name.
type NodePoolDeleteRequest struct {
	Names []string
}

// NodePoolMissingError is the refusal of a job naming a node pool that
// does not exist, of kind ErrInvalid (HTTP 400), naming both.
func NodePoolMissingError(jobID, pool string) error {
	return NewError(ErrInvalid, "job %q: NodePool %q does not exist", jobID, pool)
}
