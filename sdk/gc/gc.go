// Package gc is what a garbage-collection plugin author imports: the
// Collector interface, the page bounds and the checks both sides of a
// connection make, the go-plugin glue that carries a Collector over gRPC,
// and Serve, which a plugin's main function calls.
//
// A GC plugin is a program like this:
//
//	func main() { gc.Serve(mygc.New()) }
//
// The drover leader runs the core GC jobs (eval-gc, job-gc, node-gc, ...).
// Each job reads its candidates from the state store, hands them to the
// plugin that decides its collection one page at a time (Decide), re-checks
// every decision against the current state and applies the reaps through
// Raft in bounded batches. The plugin decides; it never writes anything and
// never talks to a CSI driver.
package gc

import (
	"context"
	"time"

	"github.com/drover-org/drover/sdk/proto/gcpb"
)

// Collector decides what to reap. It is the one extension point of the GC
// plugin kind.
//
// # A pure function
//
// Decide is a function of its request: the page carries every fact a
// decision reads (an eval comes with its allocations and its job's facts, a
// job with all its evals and allocations, a node with its count of live
// allocations) and the clock (now_unix_nano) and thresholds in force. An
// implementation must do no I/O, read no clock (measure against
// now_unix_nano) and use no randomness, so the same page always yields the
// same decisions. Golden tests depend on it, and the core may ask again.
//
// # Decisions
//
// A response holds at most one decision per object of the page; an object
// without one is kept. Every decision names an object of the page (kind,
// namespace, id, and volume_id for a claim), echoes its modify_index, and
// has action keep or reap (release for a CSI claim). Whatever the plugin
// decides, ValidateResponse holds it to a safety floor: an allocation whose
// client status is not terminal, a non-terminal eval, an eval or job whose
// listed allocations are not all reaped with it, a node that is not down or
// still has live allocations, a claim whose allocation still runs, a token
// that has not expired, ... are never reaped. A response that breaks the
// floor or names an object outside the page is refused as a whole.
//
// # Info
//
// Info reports the plugin's name and version and the collections it
// decides. The core asks a plugin only about the collections it lists; when
// two plugins list the same collection, the one configured later wins. The
// answer must not change during the life of the process.
//
// # Errors and concurrency
//
// A returned error means the page could not be decided; the core keeps
// everything and tries again on the next tick. Decide may be called for
// several collections at once and must be safe for concurrent use. The
// request belongs to the caller and must not be retained or modified.
type Collector interface {
	Info(ctx context.Context) (*gcpb.InfoResponse, error)
	Decide(ctx context.Context, req *gcpb.DecideRequest) (*gcpb.DecideResponse, error)
}

// Statuses the facts carry (Nomad's spellings).
const (
	ClientPending  = "pending"
	ClientRunning  = "running"
	ClientComplete = "complete"
	ClientFailed   = "failed"
	ClientLost     = "lost"
	ClientUnknown  = "unknown"

	DesiredRun   = "run"
	DesiredStop  = "stop"
	DesiredEvict = "evict"

	EvalBlocked  = "blocked"
	EvalPending  = "pending"
	EvalComplete = "complete"
	EvalFailed   = "failed"
	EvalCanceled = "canceled"

	JobPending = "pending"
	JobRunning = "running"
	JobDead    = "dead"

	NodeInitializing = "initializing"
	NodeReady        = "ready"
	NodeDown         = "down"
	NodeDisconnected = "disconnected"
)

// ClientTerminal reports whether an allocation's client status is terminal:
// the client has finished with it (complete, failed) or it is lost. Only
// such an allocation may be collected, whatever its desired status.
func ClientTerminal(status string) bool {
	return status == ClientComplete || status == ClientFailed || status == ClientLost
}

// EvalTerminal reports whether an eval status is terminal.
func EvalTerminal(status string) bool {
	return status == EvalComplete || status == EvalFailed || status == EvalCanceled
}

// DefaultThresholds are Nomad's defaults for the agent's GC thresholds
// (server block: eval_gc_threshold, batch_eval_gc_threshold,
// job_gc_threshold, node_gc_threshold, deployment_gc_threshold,
// csi_volume_claim_gc_threshold, csi_plugin_gc_threshold,
// acl_token_gc_threshold).
func DefaultThresholds() *gcpb.Thresholds {
	return &gcpb.Thresholds{
		EvalNs:           int64(time.Hour),
		BatchEvalNs:      int64(24 * time.Hour),
		JobNs:            int64(4 * time.Hour),
		NodeNs:           int64(24 * time.Hour),
		DeploymentNs:     int64(time.Hour),
		CsiVolumeClaimNs: int64(5 * time.Minute),
		CsiPluginNs:      int64(time.Hour),
		AclTokenNs:       int64(time.Hour),
	}
}

// ForceThreshold is the threshold force GC (`drover system gc`) sends for
// every collection, as Nomad's does: everything up to a millisecond ago is
// old.
const ForceThreshold = time.Millisecond
