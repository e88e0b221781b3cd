package services

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
)

// Registrar sends the node's native service registrations to the
// servers: one queue per node, so the updates of every alloc leave in
// shared requests of at most structs.MaxRegistrationsPerRequest entries.
//
// An upsert of a registration supersedes a pending one with the same ID
// (the newest check results win). Deletions (every registration of an
// alloc) leave before upserts, so that an alloc whose task service went
// away can delete all of its registrations and upsert the rest. A failed
// request keeps its entries, unless newer ones replaced them, and is
// retried with backoff until it succeeds: the servers may be unreachable
// or electing a leader.
type Registrar struct {
	send   func(ctx context.Context, args *structs.ServiceRegistrationNodeArgs) error
	nodeID string
	secret string
	retry  func(failures int) time.Duration
	logger hclog.Logger

	mu      sync.Mutex
	upserts map[string]*structs.ServiceRegistration // by registration ID
	deletes []string                                // alloc IDs, in order

	kick chan struct{}
}

// NewRegistrar is the registrar of a node: send makes one request to the
// servers, retry is the wait after the n-th consecutive failure.
func NewRegistrar(send func(context.Context, *structs.ServiceRegistrationNodeArgs) error, nodeID, secret string, retry func(failures int) time.Duration, logger hclog.Logger) *Registrar {
	return &Registrar{
		send: send, nodeID: nodeID, secret: secret, retry: retry, logger: logger,
		upserts: map[string]*structs.ServiceRegistration{},
		kick:    make(chan struct{}, 1),
	}
}

// upsert queues registrations; the registrar keeps the pointers, so the
// caller hands over values it no longer touches.
func (r *Registrar) upsert(regs ...*structs.ServiceRegistration) {
	if len(regs) == 0 {
		return
	}
	r.mu.Lock()
	for _, s := range regs {
		r.upserts[s.ID] = s
	}
	r.mu.Unlock()
	r.rekick()
}

// deregisterAlloc queues the deletion of every registration of an alloc
// and drops its pending upserts: the alloc is going away.
func (r *Registrar) deregisterAlloc(allocID string) {
	r.mu.Lock()
	for id, s := range r.upserts {
		if s.AllocID == allocID {
			delete(r.upserts, id)
		}
	}
	if !slices.Contains(r.deletes, allocID) {
		r.deletes = append(r.deletes, allocID)
	}
	r.mu.Unlock()
	r.rekick()
}

// replaceAlloc deletes every registration of an alloc and then upserts
// regs (the alloc's remaining registrations): the only way to drop some
// of an alloc's registrations with the node's update request.
func (r *Registrar) replaceAlloc(allocID string, regs []*structs.ServiceRegistration) {
	r.mu.Lock()
	for id, s := range r.upserts {
		if s.AllocID == allocID {
			delete(r.upserts, id)
		}
	}
	if !slices.Contains(r.deletes, allocID) {
		r.deletes = append(r.deletes, allocID)
	}
	for _, s := range regs {
		r.upserts[s.ID] = s
	}
	r.mu.Unlock()
	r.rekick()
}

func (r *Registrar) rekick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Pending reports how many entries wait to be sent.
func (r *Registrar) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.upserts) + len(r.deletes)
}

// Run sends until ctx ends, then makes one last bounded attempt, so that a
// clean shutdown of the dev agent (which kills its tasks) deregisters them.
func (r *Registrar) Run(ctx context.Context) {
	failures := 0
	for {
		select {
		case <-ctx.Done():
			r.finalFlush()
			return
		case <-r.kick:
		}
		if err := r.flush(ctx); err != nil {
			failures++
			wait := r.retry(failures)
			r.logger.Warn("failed to update service registrations; retrying", "error", err, "retry_in", wait)
			if !waitOrDone(ctx, wait) {
				r.finalFlush()
				return
			}
			r.rekick()
			continue
		}
		failures = 0
	}
}

func (r *Registrar) finalFlush() {
	ctx, cancel := context.WithTimeout(context.Background(), finalFlushTimeout)
	defer cancel()
	if err := r.flush(ctx); err != nil {
		r.logger.Warn("service registrations not updated at shutdown", "error", err)
	}
}

// finalFlushTimeout bounds the last attempt at shutdown.
const finalFlushTimeout = 2 * time.Second

// flush sends everything pending: deletions first, then upserts, each in
// requests of at most MaxRegistrationsPerRequest entries. It stops at the
// first failure, keeping what was not sent.
func (r *Registrar) flush(ctx context.Context) error {
	for {
		args, upserts := r.next()
		if args == nil {
			return nil
		}
		if err := r.send(ctx, args); err != nil {
			if !refused(err) {
				return err
			}
			// The servers refuse something in the request (a name too
			// long once interpolated, say): it would be refused forever
			// and hold up the node's other registrations. Each entry
			// goes alone, and those refused are dropped with the reason.
			if err := r.sendEach(ctx, args); err != nil {
				return err
			}
		}
		r.mu.Lock()
		for _, id := range args.DeleteAllocIDs {
			if i := slices.Index(r.deletes, id); i >= 0 {
				r.deletes = slices.Delete(r.deletes, i, i+1)
			}
		}
		for _, s := range upserts {
			if r.upserts[s.ID] == s {
				delete(r.upserts, s.ID)
			}
		}
		r.mu.Unlock()
	}
}

// refused reports whether the servers refused a request for its content,
// which no retry changes.
func refused(err error) bool {
	return errors.Is(err, structs.ErrInvalid) || errors.Is(err, structs.ErrTooLarge)
}

// sendEach sends the entries of a refused request one by one, dropping
// those refused; it fails on the first other error.
func (r *Registrar) sendEach(ctx context.Context, args *structs.ServiceRegistrationNodeArgs) error {
	one := func(a *structs.ServiceRegistrationNodeArgs, what string) error {
		err := r.send(ctx, a)
		if err != nil && refused(err) {
			r.logger.Error("servers refused a service registration update; dropping it", "entry", what, "error", err)
			return nil
		}
		return err
	}
	for _, id := range args.DeleteAllocIDs {
		if err := one(&structs.ServiceRegistrationNodeArgs{NodeID: r.nodeID, SecretID: r.secret, DeleteAllocIDs: []string{id}}, "delete of alloc "+id); err != nil {
			return err
		}
	}
	for _, s := range args.Upsert {
		if err := one(&structs.ServiceRegistrationNodeArgs{NodeID: r.nodeID, SecretID: r.secret, Upsert: []*structs.ServiceRegistration{s}}, s.ID); err != nil {
			return err
		}
	}
	return nil
}

// next builds the next request from what is pending (nil: nothing).
func (r *Registrar) next() (*structs.ServiceRegistrationNodeArgs, []*structs.ServiceRegistration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	args := &structs.ServiceRegistrationNodeArgs{NodeID: r.nodeID, SecretID: r.secret}
	if len(r.deletes) > 0 {
		n := min(len(r.deletes), structs.MaxRegistrationsPerRequest)
		args.DeleteAllocIDs = slices.Clone(r.deletes[:n])
		return args, nil
	}
	if len(r.upserts) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(r.upserts))
	for id := range r.upserts {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, strings.Compare)
	ids = ids[:min(len(ids), structs.MaxRegistrationsPerRequest)]
	for _, id := range ids {
		args.Upsert = append(args.Upsert, r.upserts[id])
	}
	return args, args.Upsert
}

// waitOrDone waits d; it reports false when ctx ended first.
func waitOrDone(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
