// Package scheduler is what a scheduler plugin author imports: the Scheduler
// interface, the go-plugin glue that carries it over gRPC, and Serve, which a
// plugin's main function calls.
//
// A scheduler plugin is a program like this:
//
//	func main() { scheduler.Serve(mysched.New()) }
//
// The drover agent launches it, calls Info once per launch to learn which
// job types it serves, and routes every evaluation of those job types to
// Schedule.
package scheduler

import (
	"context"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Scheduler decides where the allocations of one job go. It is the one
// extension point of the scheduler plugin kind.
//
// # A pure function
//
// Schedule is a function of its request: the core puts everything a decision
// needs into the ScheduleRequest (the eval, the job, the candidate nodes with
// their usage, the job's allocations, older job versions, the scheduler
// configuration) and applies the returned plan itself. An implementation must
// therefore:
//
//   - do no I/O (no network, no files, no calls back into the core);
//   - read no clock: durations are measured against indexes and timestamps in
//     the request, never against time.Now;
//   - use no randomness that is not seeded from the request (the eval ID), so
//     the same request always yields an equal response. The core replays
//     evaluations, and golden tests depend on it.
//
// Because of this, a plugin may be killed, restarted or replaced between any
// two calls without losing anything: it holds no state the core needs.
//
// # Concurrency
//
// The core calls Schedule from several workers at once, for different evals.
// Implementations must be safe for concurrent use.
//
// # Info
//
// Info reports the plugin's name and version and the job types it serves,
// each with the number of scheduling attempts the core makes for one eval
// before failing it (max_attempts, at least 1). The core calls Info after
// every launch of the plugin process; the answer must not change during the
// life of the process. Name must be non-empty and at least one job type must
// be listed, or the core refuses to load the plugin. When two plugins serve
// the same job type, the one configured later wins. A type that places each
// task group's count on every candidate node (as system and sysbatch do)
// sets per_node: the core then counts count x nodes allocations against its
// per-job limit when the job is submitted.
//
// # Limits
//
// The request's max_placements (when not 0) is the most new allocations
// the plan may place; a scheduler stops there and counts the rest in
// QueuedAllocations, and the core places them with a follow-up eval. The
// core drops placements past the limit in any case.
//
// # Errors
//
// A returned error means "this attempt could not be made" (a malformed
// request, a bug): the core nacks the eval and retries it later, up to its
// delivery limit. A decision that the eval cannot be scheduled at all (for
// example a trigger the scheduler does not handle) is not an error: return a
// response whose Status is "failed" with a StatusDescription that says why.
// Placement failures are not errors either; they are reported in
// FailedTgAllocs and BlockedEvals.
//
// # Ownership
//
// The request belongs to the caller and must not be retained or modified
// after Schedule returns. The returned response belongs to the caller. Over
// gRPC both are copies, but in-process tests share memory, so the contract
// holds there too. Schedule must not return a nil response with a nil error.
//
// Every method takes the caller's context: over gRPC its deadline and
// cancellation reach the plugin process. A long computation should check
// ctx.Err() now and then and give up when it is set. The core bounds each
// Schedule call (the server's scheduler_call_timeout); a call that runs
// out is a failed attempt, retried up to the eval's delivery limit.
type Scheduler interface {
	// Info reports the plugin's name, version and served job types.
	Info(ctx context.Context) (*schedulerpb.InfoResponse, error)
	// Schedule makes one scheduling attempt for one evaluation.
	Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error)
}
