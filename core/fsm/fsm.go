// Package fsm is drover's Raft finite state machine: it decodes committed
// log entries, applies them to the state store and tells the leader's
// in-memory components (eval broker, blocked evals, periodic dispatcher)
// what changed. Snapshots stream the state store; a restore builds a fresh
// store and swaps it in.
package fsm

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// Hooks is how the leader's in-memory components learn about committed
// changes. The FSM calls them synchronously, in commit order, on the Raft
// apply goroutine, after the change is visible in the state store.
//
// Contract: implementations must not block and must not wait on Raft (an
// Apply waits for the FSM, which is waiting for the hook: a deadlock). The
// components are leader-only; on followers, or while disabled, they ignore
// the calls. Objects passed in are the stored ones and must not be
// modified.
type Hooks interface {
	// EvalsCommitted: pending evals are enqueued, blocked ones tracked, and
	// a complete eval without failed placements releases its job's blocked
	// evals.
	EvalsCommitted(evals []*structs.Evaluation)
	// AllocsClientUpdated: terminal client updates free capacity, which
	// unblocks evals waiting on the node or its class.
	AllocsClientUpdated(allocs []*structs.Allocation, index uint64)
	// NodeChanged: a registration, status, eligibility or drain change
	// may make room for blocked evals.
	NodeChanged(node *structs.Node, index uint64)
	// JobUpserted lets the periodic dispatcher add, update or remove the
	// job (a stopped or disabled periodic job is removed).
	JobUpserted(job *structs.Job)
	// JobDeleted: the job was purged.
	JobDeleted(ns, id string)
	// VolumesFreed: a CSI volume was registered or one of its claims was
	// freed, so evals blocked on a volume's claims may fit now.
	VolumesFreed(index uint64)
}

// NoopHooks ignores every change; followers and tests use it.
type NoopHooks struct{}

func (NoopHooks) EvalsCommitted([]*structs.Evaluation)              {}
func (NoopHooks) AllocsClientUpdated([]*structs.Allocation, uint64) {}
func (NoopHooks) NodeChanged(*structs.Node, uint64)                 {}
func (NoopHooks) JobUpserted(*structs.Job)                          {}
func (NoopHooks) JobDeleted(string, string)                         {}
func (NoopHooks) VolumesFreed(uint64)                               {}

// FSM applies Raft log entries to the state store. It implements raft.FSM.
type FSM struct {
	logger hclog.Logger
	hooks  Hooks
	// state is swapped by Restore while readers (RPCs, HTTP, workers) load
	// it from other goroutines.
	state atomic.Pointer[state.StateStore]
	// failed is the error of the first committed entry this FSM could not
	// apply. From then on it applies nothing and takes no snapshot: the
	// state must stay at the last entry applied, so that a restart meets
	// the bad entry again instead of skipping it.
	failed atomic.Pointer[error]
	// onFatal is told about that entry once (SetFatalHandler).
	onFatal func(error)
	// stream is the event stream fed from applied entries (events.go).
	stream eventFeed
}

var _ raft.FSM = (*FSM)(nil)

// New returns an FSM over an empty state store. A nil logger discards logs;
// nil hooks are NoopHooks.
func New(logger hclog.Logger, hooks Hooks) (*FSM, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if hooks == nil {
		hooks = NoopHooks{}
	}
	st, err := state.NewStateStore()
	if err != nil {
		return nil, err
	}
	f := &FSM{logger: logger, hooks: hooks}
	f.state.Store(st)
	return f, nil
}

// State returns the current state store. After a snapshot restore it is a
// different store; hold on to one only for the duration of a request.
func (f *FSM) State() *state.StateStore { return f.state.Load() }

// SetFatalHandler sets what the FSM calls, once, when a committed entry
// cannot be applied. It is called on Raft's apply goroutine and must not
// block or wait on Raft; the server starts its shutdown from it. Set it
// before Raft starts.
func (f *FSM) SetFatalHandler(fn func(error)) { f.onFatal = fn }

// Failed returns the error of the entry the FSM stopped at, or nil.
func (f *FSM) Failed() error {
	if p := f.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Encode builds a log entry: the message type byte and the MessagePack of
// msg, in the checksummed envelope (see codec.go) that Apply verifies.
func Encode(t structs.MessageType, msg any) ([]byte, error) {
	b, err := marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("fsm: encode %s: %w", typeName(t), err)
	}
	out := make([]byte, entryHeaderSize, entryHeaderSize+1+len(b))
	out = append(append(out, byte(t)), b...)
	seal(out)
	return out, nil
}

// applyEntry applies one committed entry. The returned value is the entry's
// response: nil, or the error the state store refused the entry with (for
// example structs.ErrNotFound for a status update of an unknown node),
// which the server hands back to the caller.
//
// An entry of an unknown type is skipped with a warning when it carries
// structs.IgnoreUnknownTypeFlag (a newer server's optional entry). Any
// other entry that cannot be applied (unknown type, empty, undecodable)
// stops the FSM: applying the rest of the log without it would make this
// server diverge from the others. So does an entry whose checksum does not
// match its bytes: it was altered after it was written, and applying it
// would serve what no server was asked to store. The error names the index
// and type, is logged once and handed to the fatal handler; every later
// entry is refused with it.
func (f *FSM) applyEntry(l *raft.Log) (resp any) {
	if l.Type != raft.LogCommand {
		return nil
	}
	if err := f.Failed(); err != nil {
		return err
	}
	data, err := open(l.Data)
	if err != nil {
		return f.stop(l.Index, rawTypeName(l.Data), err)
	}
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if bad, ok := p.(*badEntry); ok {
			resp = f.stop(l.Index, typeName(bad.t), bad.err)
			return
		}
		// An applier or the state store failed on this entry. A panic
		// inside the entry's transaction aborts it, so nothing of the
		// entry is written; one in a hook after the commit leaves the
		// entry applied here, and a restart rebuilds the state from the
		// last snapshot, which this stop keeps before the entry.
		f.logger.Error("panic applying Raft log entry", "index", l.Index, "panic", p, "stack", string(debug.Stack()))
		resp = f.stop(l.Index, typeName(structs.MessageType(data[0])), fmt.Errorf("panic: %v", p))
	}()
	if len(data) == 0 {
		return f.stop(l.Index, "none", errors.New("empty entry"))
	}
	t := structs.MessageType(data[0])
	if t == structs.IgnoreUnknownTypeFlag && len(data) == 1 {
		// The flag alone, without a payload, marks an entry with nothing
		// to apply (Nomad uses it for test setup). With a payload it is
		// a flagged NodeRegister (type 0).
		return nil
	}
	ignoreUnknown := t&structs.IgnoreUnknownTypeFlag != 0
	t &^= structs.IgnoreUnknownTypeFlag
	apply, ok := appliers[t]
	if !ok {
		if ignoreUnknown {
			f.logger.Warn("ignoring unknown message type", "type", uint8(t), "index", l.Index)
			return nil
		}
		return f.stop(l.Index, typeName(t), errors.New("unknown message type"))
	}
	return apply(f, l.Index, data[1:])
}

// rawTypeName names the type an entry whose envelope is damaged claims to
// be, for the stop error: it cannot be trusted, but it helps find the
// entry.
func rawTypeName(buf []byte) string {
	if len(buf) > entryHeaderSize && buf[0] == entryMarker {
		return typeName(structs.MessageType(buf[entryHeaderSize]))
	}
	return "unknown"
}

// badEntry is what decode panics with for a payload it cannot read; Apply
// recovers it before anything was written (every applier decodes first).
type badEntry struct {
	t   structs.MessageType
	err error
}

// stop records the first entry the FSM cannot apply and reports it.
func (f *FSM) stop(index uint64, typ string, cause error) error {
	err := fmt.Errorf("fsm: cannot apply Raft log entry at index %d (type %s): %w; "+
		"this server stops rather than skip it and diverge from the others", index, typ, cause)
	if !f.failed.CompareAndSwap(nil, &err) {
		return f.Failed()
	}
	f.logger.Error("cannot apply committed Raft log entry; stopping", "index", index, "type", typ, "error", cause)
	if f.onFatal != nil {
		f.onFatal(err)
	}
	return err
}

// CheckEntry decodes an encoded entry (as Encode builds it) with the
// decoder Apply uses, without applying it. The server checks every entry
// before proposing it: an entry that reached the log but cannot be decoded
// stops every server, on every restart.
func CheckEntry(buf []byte) error {
	buf, err := open(buf)
	if err != nil {
		return fmt.Errorf("fsm: %w", err)
	}
	if len(buf) == 0 {
		return errors.New("fsm: empty entry")
	}
	t := structs.MessageType(buf[0])
	if t == structs.IgnoreUnknownTypeFlag && len(buf) == 1 {
		return nil
	}
	ignoreUnknown := t&structs.IgnoreUnknownTypeFlag != 0
	t &^= structs.IgnoreUnknownTypeFlag
	check, ok := checkers[t]
	switch {
	case !ok && ignoreUnknown:
		return nil
	case !ok:
		return fmt.Errorf("fsm: unknown message type %d", uint8(t))
	}
	if err := check(buf[1:]); err != nil {
		return fmt.Errorf("fsm: %s entry does not decode: %w", typeName(t), err)
	}
	return nil
}

// check decodes as decode does and refuses nil elements of typed lists and
// maps, which the appliers and the state store read element by element.
func check[T any](buf []byte) error {
	req := new(T)
	if err := unmarshal(buf, req); err != nil {
		return err
	}
	return structs.CheckNoNilElements(req)
}

// checkers decode each type as its applier does (see appliers).
var checkers = map[structs.MessageType]func([]byte) error{
	structs.NodeRegisterRequestType:                 check[structs.NodeRegisterRequest],
	structs.NodeDeregisterRequestType:               check[structs.NodeDeregisterRequest],
	structs.NodeUpdateStatusRequestType:             check[structs.NodeUpdateStatusRequest],
	structs.NodeUpdateDrainRequestType:              check[structs.NodeUpdateDrainRequest],
	structs.NodeUpdateEligibilityRequestType:        check[structs.NodeUpdateEligibilityRequest],
	structs.JobRegisterRequestType:                  check[structs.JobRegisterRequest],
	structs.JobDeregisterRequestType:                check[structs.JobDeregisterRequest],
	structs.JobBatchDeregisterRequestType:           check[structs.JobBatchDeregisterRequest],
	structs.JobScaleRequestType:                     check[structs.JobScaleRequest],
	structs.EvalUpdateRequestType:                   check[structs.EvalUpdateRequest],
	structs.EvalDeleteRequestType:                   check[structs.EvalDeleteRequest],
	structs.AllocClientUpdateRequestType:            check[structs.AllocUpdateRequest],
	structs.ApplyPlanResultsRequestType:             checkPlanResults,
	structs.AllocUpdateDesiredTransitionRequestType: check[structs.AllocUpdateDesiredTransitionRequest],
	structs.SchedulerConfigRequestType:              check[structs.SchedulerSetConfigRequest],
	structs.PKIInitRequestType:                      check[structs.PKIInitRequest],
	structs.PKITokensRequestType:                    check[structs.PKITokensRequest],

	structs.ACLPolicyUpsertRequestType:    check[structs.ACLPolicyUpsertRequest],
	structs.ACLPolicyDeleteRequestType:    check[structs.ACLPolicyDeleteRequest],
	structs.ACLTokenUpsertRequestType:     check[structs.ACLTokenUpsertRequest],
	structs.ACLTokenDeleteRequestType:     check[structs.ACLTokenDeleteRequest],
	structs.ACLTokenBootstrapRequestType:  check[structs.ACLTokenBootstrapRequest],
	structs.OneTimeTokenUpsertRequestType: check[structs.OneTimeTokenUpsertRequest],
	structs.OneTimeTokenDeleteRequestType: check[structs.OneTimeTokenDeleteRequest],
	structs.OneTimeTokenExpireRequestType: check[structs.OneTimeTokenExpireRequest],
	structs.ACLRoleUpsertRequestType:      check[structs.ACLRoleUpsertRequest],
	structs.ACLRoleDeleteRequestType:      check[structs.ACLRoleDeleteRequest],

	structs.VariableApplyRequestType:        check[structs.VariableApplyRequest],
	structs.RootKeyUpsertRequestType:        check[structs.RootKeyUpsertRequest],
	structs.RootKeyStateRequestType:         check[structs.RootKeyStateRequest],
	structs.VariablesRekeyRequestType:       check[structs.VariablesRekeyRequest],
	structs.RootKeyDeleteRequestType:        check[structs.RootKeyDeleteRequest],
	structs.ACLAuthMethodUpsertRequestType:  check[structs.ACLAuthMethodUpsertRequest],
	structs.ACLAuthMethodDeleteRequestType:  check[structs.ACLAuthMethodDeleteRequest],
	structs.ACLBindingRuleUpsertRequestType: check[structs.ACLBindingRuleUpsertRequest],
	structs.ACLBindingRuleDeleteRequestType: check[structs.ACLBindingRuleDeleteRequest],
	structs.AutopilotConfigRequestType:      check[structs.AutopilotSetConfigRequest],

	structs.NamespaceUpsertRequestType: check[structs.NamespaceUpsertRequest],
	structs.NamespaceDeleteRequestType: check[structs.NamespaceDeleteRequest],

	structs.NodePoolUpsertRequestType: check[structs.NodePoolUpsertRequest],
	structs.NodePoolDeleteRequestType: check[structs.NodePoolDeleteRequest],

	structs.CSIVolumeRegisterRequestType:   check[structs.CSIVolumeRegisterRequest],
	structs.CSIVolumeDeregisterRequestType: check[structs.CSIVolumeDeregisterRequest],
	structs.CSIVolumeClaimBatchRequestType: check[structs.CSIVolumeClaimBatchRequest],
	structs.CSIPluginDeleteRequestType:     check[structs.CSIPluginDeleteRequest],

	structs.GCReapRequestType:                checkGCReap,
	structs.ReconcileJobSummariesRequestType: checkReconcileJobSummaries,

	structs.DeploymentStatusUpdateRequestType: checkDeploymentStatusUpdate,
	structs.DeploymentPromoteRequestType:      checkDeploymentPromote,
	structs.DeploymentAllocHealthRequestType:  checkDeploymentAllocHealth,
	structs.DeploymentDeleteRequestType:       checkDeploymentDelete,

	structs.ServiceRegistrationUpsertRequestType:           check[structs.ServiceRegistrationUpsertRequest],
	structs.ServiceRegistrationDeleteByIDRequestType:       check[structs.ServiceRegistrationDeleteByIDRequest],
	structs.ServiceRegistrationDeleteByNodeIDRequestType:   check[structs.ServiceRegistrationDeleteByNodeIDRequest],
	structs.ServiceRegistrationDeleteByAllocIDsRequestType: check[structs.ServiceRegistrationDeleteByAllocIDsRequest],
}

// appliers dispatches on the message type. Each decodes its payload and
// returns the entry's response.
var appliers = map[structs.MessageType]func(f *FSM, index uint64, buf []byte) any{
	structs.NodeRegisterRequestType:                 (*FSM).applyNodeRegister,
	structs.NodeDeregisterRequestType:               (*FSM).applyNodeDeregister,
	structs.NodeUpdateStatusRequestType:             (*FSM).applyNodeUpdateStatus,
	structs.NodeUpdateDrainRequestType:              (*FSM).applyNodeUpdateDrain,
	structs.NodeUpdateEligibilityRequestType:        (*FSM).applyNodeUpdateEligibility,
	structs.JobRegisterRequestType:                  (*FSM).applyJobRegister,
	structs.JobDeregisterRequestType:                (*FSM).applyJobDeregister,
	structs.JobBatchDeregisterRequestType:           (*FSM).applyJobBatchDeregister,
	structs.JobScaleRequestType:                     (*FSM).applyJobScale,
	structs.EvalUpdateRequestType:                   (*FSM).applyEvalUpdate,
	structs.EvalDeleteRequestType:                   (*FSM).applyEvalDelete,
	structs.AllocClientUpdateRequestType:            (*FSM).applyAllocClientUpdate,
	structs.ApplyPlanResultsRequestType:             (*FSM).applyPlanResults,
	structs.AllocUpdateDesiredTransitionRequestType: (*FSM).applyAllocDesiredTransition,
	structs.SchedulerConfigRequestType:              (*FSM).applySchedulerConfig,
	structs.PKIInitRequestType:                      (*FSM).applyPKIInit,
	structs.PKITokensRequestType:                    (*FSM).applyPKITokens,

	structs.ACLPolicyUpsertRequestType:    (*FSM).applyACLPolicyUpsert,
	structs.ACLPolicyDeleteRequestType:    (*FSM).applyACLPolicyDelete,
	structs.ACLTokenUpsertRequestType:     (*FSM).applyACLTokenUpsert,
	structs.ACLTokenDeleteRequestType:     (*FSM).applyACLTokenDelete,
	structs.ACLTokenBootstrapRequestType:  (*FSM).applyACLTokenBootstrap,
	structs.OneTimeTokenUpsertRequestType: (*FSM).applyOneTimeTokenUpsert,
	structs.OneTimeTokenDeleteRequestType: (*FSM).applyOneTimeTokenDelete,
	structs.OneTimeTokenExpireRequestType: (*FSM).applyOneTimeTokenExpire,
	structs.ACLRoleUpsertRequestType:      (*FSM).applyACLRoleUpsert,
	structs.ACLRoleDeleteRequestType:      (*FSM).applyACLRoleDelete,

	structs.VariableApplyRequestType:        (*FSM).applyVariable,
	structs.RootKeyUpsertRequestType:        (*FSM).applyRootKeyUpsert,
	structs.RootKeyStateRequestType:         (*FSM).applyRootKeyState,
	structs.VariablesRekeyRequestType:       (*FSM).applyVariablesRekey,
	structs.RootKeyDeleteRequestType:        (*FSM).applyRootKeyDelete,
	structs.ACLAuthMethodUpsertRequestType:  (*FSM).applyACLAuthMethodUpsert,
	structs.ACLAuthMethodDeleteRequestType:  (*FSM).applyACLAuthMethodDelete,
	structs.ACLBindingRuleUpsertRequestType: (*FSM).applyACLBindingRuleUpsert,
	structs.ACLBindingRuleDeleteRequestType: (*FSM).applyACLBindingRuleDelete,
	structs.AutopilotConfigRequestType:      (*FSM).applyAutopilotConfig,

	structs.NamespaceUpsertRequestType: (*FSM).applyNamespaceUpsert,
	structs.NamespaceDeleteRequestType: (*FSM).applyNamespaceDelete,

	structs.NodePoolUpsertRequestType: (*FSM).applyNodePoolUpsert,
	structs.NodePoolDeleteRequestType: (*FSM).applyNodePoolDelete,

	structs.CSIVolumeRegisterRequestType:   (*FSM).applyCSIVolumeRegister,
	structs.CSIVolumeDeregisterRequestType: (*FSM).applyCSIVolumeDeregister,
	structs.CSIVolumeClaimBatchRequestType: (*FSM).applyCSIVolumeClaimBatch,
	structs.CSIPluginDeleteRequestType:     (*FSM).applyCSIPluginDelete,

	structs.GCReapRequestType:                (*FSM).applyGCReap,
	structs.ReconcileJobSummariesRequestType: (*FSM).applyReconcileJobSummaries,

	structs.DeploymentStatusUpdateRequestType: (*FSM).applyDeploymentStatusUpdate,
	structs.DeploymentPromoteRequestType:      (*FSM).applyDeploymentPromote,
	structs.DeploymentAllocHealthRequestType:  (*FSM).applyDeploymentAllocHealth,
	structs.DeploymentDeleteRequestType:       (*FSM).applyDeploymentDelete,

	structs.ServiceRegistrationUpsertRequestType:           (*FSM).applyServiceRegistrationUpsert,
	structs.ServiceRegistrationDeleteByIDRequestType:       (*FSM).applyServiceRegistrationDeleteByID,
	structs.ServiceRegistrationDeleteByNodeIDRequestType:   (*FSM).applyServiceRegistrationDeleteByNodeID,
	structs.ServiceRegistrationDeleteByAllocIDsRequestType: (*FSM).applyServiceRegistrationDeleteByAllocIDs,
}

// decode unmarshals an entry's payload. A payload that does not decode is
// a corrupt or incompatible log: decode panics with a *badEntry, which
// Apply turns into a stop (see Apply); appliers thus stay straight-line.
func decode[T any](t structs.MessageType, _ uint64, buf []byte) *T {
	req := new(T)
	if err := unmarshal(buf, req); err != nil {
		panic(&badEntry{t: t, err: fmt.Errorf("decode: %w", err)})
	}
	return req
}

func typeName(t structs.MessageType) string {
	switch t &^ structs.IgnoreUnknownTypeFlag {
	case structs.NodeRegisterRequestType:
		return "NodeRegister"
	case structs.NodeDeregisterRequestType:
		return "NodeDeregister"
	case structs.NodeUpdateStatusRequestType:
		return "NodeUpdateStatus"
	case structs.NodeUpdateDrainRequestType:
		return "NodeUpdateDrain"
	case structs.NodeUpdateEligibilityRequestType:
		return "NodeUpdateEligibility"
	case structs.JobRegisterRequestType:
		return "JobRegister"
	case structs.JobDeregisterRequestType:
		return "JobDeregister"
	case structs.JobBatchDeregisterRequestType:
		return "JobBatchDeregister"
	case structs.JobScaleRequestType:
		return "JobScale"
	case structs.EvalUpdateRequestType:
		return "EvalUpdate"
	case structs.EvalDeleteRequestType:
		return "EvalDelete"
	case structs.AllocClientUpdateRequestType:
		return "AllocClientUpdate"
	case structs.ApplyPlanResultsRequestType:
		return "ApplyPlanResults"
	case structs.AllocUpdateDesiredTransitionRequestType:
		return "AllocUpdateDesiredTransition"
	case structs.SchedulerConfigRequestType:
		return "SchedulerConfig"
	case structs.PKIInitRequestType:
		return "PKIInit"
	case structs.PKITokensRequestType:
		return "PKITokens"
	default:
		if n, ok := aclTypeNames[t&^structs.IgnoreUnknownTypeFlag]; ok {
			return n
		}
		if n, ok := varTypeNames[t&^structs.IgnoreUnknownTypeFlag]; ok {
			return n
		}
		if n, ok := aclAuthTypeNames[t&^structs.IgnoreUnknownTypeFlag]; ok {
			return n
		}
		if n, ok := namespaceTypeNames[t&^structs.IgnoreUnknownTypeFlag]; ok {
			return n
		}
		if n, ok := nodePoolTypeNames[t&^structs.IgnoreUnknownTypeFlag]; ok {
			return n
		}
		if n, ok := csiTypeNames[t&^structs.IgnoreUnknownTypeFlag]; ok {
			return n
		}
		if n, ok := gcTypeNames[t&^structs.IgnoreUnknownTypeFlag]; ok {
			return n
		}
		if n, ok := deploymentTypeNames[t&^structs.IgnoreUnknownTypeFlag]; ok {
			return n
		}
		if n, ok := serviceTypeNames[t&^structs.IgnoreUnknownTypeFlag]; ok {
			return n
		}
	}
	return fmt.Sprintf("MessageType(%d)", uint8(t))
}
