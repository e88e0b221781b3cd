// Package events is drover's event stream: the events derived from every
// Raft entry the FSM applies, kept in a bounded in-memory ring on every
// server (followers apply the same log, so each serves its own), and the
// subscriptions that read them, as Nomad's /v1/event/stream.
//
// The publisher (the FSM, on Raft's apply goroutine) never waits on a
// subscriber: it writes the entry's batch into the ring and wakes readers.
// A subscriber that falls a whole ring behind is dropped with
// ErrSubscriberLagged and must resume from an index.
package events

import (
	"encoding/json"
	"sync"
)

// Topics, as Nomad names them.
const (
	TopicJob        = "Job"
	TopicAllocation = "Allocation"
	TopicEvaluation = "Evaluation"
	TopicNode       = "Node"
	TopicDeployment = "Deployment"
	TopicCSIVolume  = "CSIVolume"
	TopicCSIPlugin  = "CSIPlugin"
	TopicACLToken   = "ACLToken"
	TopicACLPolicy  = "ACLPolicy"
	TopicNamespace  = "Namespace"
	TopicService    = "Service"
	// TopicAll subscribes to every topic (management tokens only).
	TopicAll = "*"
)

// Topics lists every topic a subscription may name.
var Topics = []string{
	TopicJob, TopicAllocation, TopicEvaluation, TopicNode, TopicDeployment,
	TopicCSIVolume, TopicCSIPlugin, TopicACLToken, TopicACLPolicy, TopicNamespace,
	TopicService,
}

// Event types, as Nomad names them where Nomad has the event.
const (
	TypeJobRegistered           = "JobRegistered"
	TypeJobDeregistered         = "JobDeregistered"
	TypeJobBatchDeregistered    = "JobBatchDeregistered"
	TypeEvalUpdated             = "EvaluationUpdated"
	TypeAllocationUpdated       = "AllocationUpdated"
	TypeAllocationDesiredStatus = "AllocationUpdateDesiredStatus"
	TypePlanResult              = "PlanResult"
	TypeNodeRegistration        = "NodeRegistration"
	TypeNodeDeregistration      = "NodeDeregistration"
	TypeNodeEligibility         = "NodeEligibility"
	TypeNodeDrain               = "NodeDrain"
	TypeNodeEvent               = "NodeStreamEvent"
	TypeCSIVolumeRegistered     = "CSIVolumeRegistered"
	TypeCSIVolumeDeregistered   = "CSIVolumeDeregistered"
	TypeCSIVolumeClaim          = "CSIVolumeClaim"
	TypeCSIPluginUpdated        = "CSIPluginUpdated"
	TypeCSIPluginDeleted        = "CSIPluginDeleted"
	TypeACLTokenUpserted        = "ACLTokenUpserted"
	TypeACLTokenDeleted         = "ACLTokenDeleted"
	TypeACLPolicyUpserted       = "ACLPolicyUpserted"
	TypeACLPolicyDeleted        = "ACLPolicyDeleted"
	TypeNamespaceUpserted       = "NamespaceUpserted"
	TypeNamespaceDeleted        = "NamespaceDeleted"
	TypeDeploymentUpdate        = "DeploymentStatusUpdate"
	TypeDeploymentPromotion     = "DeploymentPromotion"
	TypeDeploymentAllocHealth   = "DeploymentAllocHealth"
	TypeDeploymentDeleted       = "DeploymentDeleted"
	TypeServiceRegistration     = "ServiceRegistration"
	TypeServiceDeregistration   = "ServiceDeregistration"
	// Deletions by entries that have no type of their own (GC reaps,
	// eval deletes).
	TypeEvalDeleted       = "EvaluationDeleted"
	TypeAllocationDeleted = "AllocationDeleted"
)

// Event is one change of one object, as Nomad's api.Event decodes it.
// Payload maps one key (the object's kind: "Job", "Allocation",
// "Evaluation", "Node", "Volume", "Plugin", "ACLToken", "ACLPolicy",
// "Namespace") to the stored object, which must not be modified.
type Event struct {
	Topic      string
	Type       string
	Key        string
	Namespace  string
	FilterKeys []string
	Index      uint64
	Payload    map[string]any

	// enc caches the JSON of the event: every subscriber sends the same
	// bytes, so an event is encoded once however many read it.
	enc *encoded
}

type encoded struct {
	once sync.Once
	b    []byte
	err  error
}

// JSON returns the event's JSON, encoded once and shared.
func (e *Event) JSON() ([]byte, error) {
	if e.enc == nil {
		// Events built outside a Batch (tests) encode every time.
		return json.Marshal(e)
	}
	e.enc.once.Do(func() { e.enc.b, e.enc.err = json.Marshal(e) })
	return e.enc.b, e.enc.err
}

// Batch is the events of one Raft entry, all at its index.
type Batch struct {
	Index  uint64
	Events []*Event
}

// newBatch readies the events of a batch for shared encoding.
func newBatch(index uint64, evs []*Event) *Batch {
	for _, e := range evs {
		e.Index = index
		if e.enc == nil {
			e.enc = new(encoded)
		}
	}
	return &Batch{Index: index, Events: evs}
}
