// Package csivolumes is the server side of CSI volumes: registering,
// creating, deleting and deregistering volumes, and the claims of
// allocations and their release.
//
// Everything here runs on the leader; the server forwards from followers
// and authenticates clients before it calls in. A Volumes holds the
// leader's in-memory state of volumes: the claim locks (one volume's
// claims, releases and writes are serialized) and the queue of controller
// calls that controller clients long-poll (Queue). The release of a claim
// has one driver, the volume watcher (Volumes is its Unpublisher), or
// `volume detach`; a client only reports how far its node got. What a
// release does next is decided by the pure functions of decide.go.
package csivolumes

import (
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// Config is what Volumes needs of the server.
type Config struct {
	// State returns the current state store.
	State func() *state.StateStore
	// Apply writes an entry through Raft and returns its index.
	Apply func(structs.MessageType, any) (uint64, error)
	// NewEval returns a new evaluation of job with the trigger.
	NewEval func(*structs.Job, string) *structs.Evaluation
	Logger  hclog.Logger
	// MaxWaiterEvals bounds the evals one volume write carries (zero:
	// 128; see waiterEvals).
	MaxWaiterEvals int
}

// Volumes is the leader's side of CSI volumes and claims.
type Volumes struct {
	state   func() *state.StateStore
	apply   func(structs.MessageType, any) (uint64, error)
	newEval func(*structs.Job, string) *structs.Evaluation
	logger  hclog.Logger

	maxWaiterEvals int

	locks claimLocks
	queue *Queue
}

// New returns the Volumes of a server; its queue is off until SetEnabled.
func New(cfg Config) *Volumes {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MaxWaiterEvals <= 0 {
		cfg.MaxWaiterEvals = 128
	}
	return &Volumes{
		state: cfg.State, apply: cfg.Apply, newEval: cfg.NewEval, logger: cfg.Logger,
		maxWaiterEvals: cfg.MaxWaiterEvals, queue: NewQueue(),
	}
}

// Queue returns the controller call queue.
func (vs *Volumes) Queue() *Queue { return vs.queue }

// SetEnabled turns the controller queue on at step-up and off at
// step-down, when every waiting call fails with ErrNoLeader.
func (vs *Volumes) SetEnabled(on bool) { vs.queue.SetEnabled(on) }

// Wait waits for the calls given up on while their client ran them
// (their plugins stay locked until the client reports, see Queue).
func (vs *Volumes) Wait() { vs.queue.lingering.Wait() }
