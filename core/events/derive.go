package events

import (
	"encoding/json"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// State tables the events are derived from (core/state's names; repeated
// here so that this package does not import the state store).
const (
	tableJobs       = "jobs"
	tableAllocs     = "allocs"
	tableEvals      = "evals"
	tableNodes      = "nodes"
	tableCSIVolumes = "csi_volumes"
	tableCSIPlugins = "csi_plugins"
	tableACLTokens  = "acl_tokens"
	tableACLPolicy  = "acl_policies"
	tableNamespaces = "namespaces"
	tableDeploys    = "deployments"
	tableServices   = "service_registrations"
)

// entryTypes names the event of each changed table for the entry types
// that have a name of their own (Nomad's); other changes get the table's
// generic type (see genericType).
var entryTypes = map[structs.MessageType]map[string]string{
	structs.NodeRegisterRequestType:                 {tableNodes: TypeNodeRegistration},
	structs.NodeDeregisterRequestType:               {tableNodes: TypeNodeDeregistration},
	structs.NodeUpdateStatusRequestType:             {tableNodes: TypeNodeEvent},
	structs.NodeUpdateDrainRequestType:              {tableNodes: TypeNodeDrain},
	structs.NodeUpdateEligibilityRequestType:        {tableNodes: TypeNodeEligibility},
	structs.JobRegisterRequestType:                  {tableJobs: TypeJobRegistered},
	structs.JobDeregisterRequestType:                {tableJobs: TypeJobDeregistered},
	structs.JobBatchDeregisterRequestType:           {tableJobs: TypeJobBatchDeregistered},
	structs.JobScaleRequestType:                     {tableJobs: TypeJobRegistered},
	structs.ApplyPlanResultsRequestType:             {tableAllocs: TypePlanResult, tableEvals: TypePlanResult, tableDeploys: TypePlanResult},
	structs.AllocClientUpdateRequestType:            {tableAllocs: TypeAllocationUpdated},
	structs.AllocUpdateDesiredTransitionRequestType: {tableAllocs: TypeAllocationDesiredStatus},
	structs.CSIVolumeRegisterRequestType:            {tableCSIVolumes: TypeCSIVolumeRegistered},
	structs.CSIVolumeDeregisterRequestType:          {tableCSIVolumes: TypeCSIVolumeDeregistered},
	structs.CSIVolumeClaimBatchRequestType:          {tableCSIVolumes: TypeCSIVolumeClaim},

	structs.DeploymentStatusUpdateRequestType: {tableDeploys: TypeDeploymentUpdate},
	structs.DeploymentPromoteRequestType:      {tableDeploys: TypeDeploymentPromotion, tableAllocs: TypeDeploymentPromotion},
	structs.DeploymentAllocHealthRequestType:  {tableDeploys: TypeDeploymentAllocHealth, tableAllocs: TypeDeploymentAllocHealth},
}

// genericType is the event of a change that its entry type does not name.
func genericType(table string, deleted bool) string {
	switch table {
	case tableJobs:
		if deleted {
			return TypeJobDeregistered
		}
		return TypeJobRegistered
	case tableAllocs:
		if deleted {
			return TypeAllocationDeleted
		}
		return TypeAllocationUpdated
	case tableEvals:
		if deleted {
			return TypeEvalDeleted
		}
		return TypeEvalUpdated
	case tableNodes:
		if deleted {
			return TypeNodeDeregistration
		}
		return TypeNodeEvent
	case tableCSIVolumes:
		if deleted {
			return TypeCSIVolumeDeregistered
		}
		return TypeCSIVolumeClaim
	case tableCSIPlugins:
		if deleted {
			return TypeCSIPluginDeleted
		}
		return TypeCSIPluginUpdated
	case tableACLTokens:
		if deleted {
			return TypeACLTokenDeleted
		}
		return TypeACLTokenUpserted
	case tableACLPolicy:
		if deleted {
			return TypeACLPolicyDeleted
		}
		return TypeACLPolicyUpserted
	case tableNamespaces:
		if deleted {
			return TypeNamespaceDeleted
		}
		return TypeNamespaceUpserted
	case tableDeploys:
		if deleted {
			return TypeDeploymentDeleted
		}
		return TypeDeploymentUpdate
	case tableServices:
		if deleted {
			return TypeServiceDeregistration
		}
		return TypeServiceRegistration
	}
	return ""
}

// FromChanges derives the events of one applied entry from the changes its
// transactions made. Payloads are the stored objects, except where a
// secret must not travel (node SecretID, ACL token SecretID, volume
// Secrets) or an object would repeat another event's (an allocation's
// Job): those are shallow copies.
func FromChanges(t structs.MessageType, changes memdb.Changes) []*Event {
	names := entryTypes[t&^structs.IgnoreUnknownTypeFlag]
	var out []*Event
	for _, ch := range changes {
		obj := ch.After
		deleted := obj == nil
		if deleted {
			obj = ch.Before
		}
		typ, ok := names[ch.Table]
		if !ok {
			typ = genericType(ch.Table, deleted)
		}
		if typ == "" {
			continue
		}
		if e := toEvent(ch.Table, typ, obj); e != nil {
			out = append(out, e)
		}
	}
	return out
}

func toEvent(table, typ string, obj any) *Event {
	switch o := obj.(type) {
	case *structs.Job:
		return &Event{Topic: TopicJob, Type: typ, Key: o.ID, Namespace: o.Namespace,
			Payload: map[string]any{"Job": o}}
	case *structs.Allocation:
		return &Event{Topic: TopicAllocation, Type: typ, Key: o.ID, Namespace: o.Namespace,
			FilterKeys: nonEmpty(o.JobID, o.DeploymentID), Payload: map[string]any{"Allocation": AllocationPayload{o}}}
	case *structs.Evaluation:
		return &Event{Topic: TopicEvaluation, Type: typ, Key: o.ID, Namespace: o.Namespace,
			FilterKeys: nonEmpty(o.JobID, o.DeploymentID), Payload: map[string]any{"Evaluation": o}}
	case *structs.Deployment:
		return &Event{Topic: TopicDeployment, Type: typ, Key: o.ID, Namespace: o.Namespace,
			FilterKeys: nonEmpty(o.JobID), Payload: map[string]any{"Deployment": o}}
	case *structs.Node:
		c := *o
		c.SecretID = ""
		return &Event{Topic: TopicNode, Type: typ, Key: o.ID, Payload: map[string]any{"Node": NodePayload{&c}}}
	case *structs.CSIVolume:
		c := *o
		c.Secrets = nil
		return &Event{Topic: TopicCSIVolume, Type: typ, Key: o.ID, Namespace: o.Namespace,
			FilterKeys: nonEmpty(o.PluginID), Payload: map[string]any{"Volume": &c}}
	case *structs.CSIPlugin:
		return &Event{Topic: TopicCSIPlugin, Type: typ, Key: o.ID, Payload: map[string]any{"Plugin": o}}
	case *structs.ACLToken:
		c := *o
		c.SecretID = ""
		return &Event{Topic: TopicACLToken, Type: typ, Key: o.AccessorID, Payload: map[string]any{"ACLToken": &c}}
	case *structs.ACLPolicy:
		return &Event{Topic: TopicACLPolicy, Type: typ, Key: o.Name, Payload: map[string]any{"ACLPolicy": o}}
	case *structs.Namespace:
		return &Event{Topic: TopicNamespace, Type: typ, Key: o.Name, Payload: map[string]any{"Namespace": o}}
	case *structs.ServiceRegistration:
		return &Event{Topic: TopicService, Type: typ, Key: o.ServiceName, Namespace: o.Namespace,
			FilterKeys: nonEmpty(o.JobID, o.AllocID, o.NodeID), Payload: map[string]any{"Service": o}}
	}
	return nil
}

func nonEmpty(keys ...string) []string {
	out := keys[:0:0]
	for _, k := range keys {
		if k != "" {
			out = append(out, k)
		}
	}
	return out
}

// AllocationPayload is an allocation event's payload: the stored
// allocation, encoded without its Job (the Job events carry it). It holds
// the stored object rather than a copy: the copy without the Job is made
// when the event is first encoded, so the events of a large write (a GC
// entry deletes thousands of allocations) cost no copies while no one
// subscribes.
type AllocationPayload struct{ Alloc *structs.Allocation }

// MarshalJSON encodes the allocation without its Job.
func (p AllocationPayload) MarshalJSON() ([]byte, error) {
	if p.Alloc == nil {
		return []byte("null"), nil
	}
	c := *p.Alloc
	c.Job = nil
	return json.Marshal(&c)
}

// NodePayload is a node event's payload: the node (its SecretID blanked)
// as the node routes show it, with Nomad's synthetic Drain flag, true
// exactly while DrainStrategy is set, and its legacy Resources and
// Reserved blocks (Nomad's clients read them from the events too).
type NodePayload struct{ Node *structs.Node }

// MarshalJSON encodes the node with Drain, Resources and Reserved.
func (p NodePayload) MarshalJSON() ([]byte, error) {
	if p.Node == nil {
		return []byte("null"), nil
	}
	res, reserved := p.Node.LegacyResources()
	return json.Marshal(struct {
		*structs.Node
		Drain     bool
		Resources *structs.LegacyResources
		Reserved  *structs.LegacyResources
	}{p.Node, p.Node.DrainStrategy != nil, res, reserved})
}
