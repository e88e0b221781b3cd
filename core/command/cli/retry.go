package cli

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"syscall"
	"time"
)

// A following command (an eval monitor, a drain monitor) outlives short
// outages of its agent: a leader election answers 503 "No cluster leader"
// for a second or two, a restarting agent refuses connections. Such
// failures are retried with backoff for up to transientBudget in a row;
// only a failure that lasts longer, or one that is not transient, ends the
// command.
const (
	transientBudget   = 2 * time.Minute
	transientBackoff  = 200 * time.Millisecond
	transientMaxDelay = 5 * time.Second
)

// IsTransient reports whether err is a failure a client retries: the
// agent or its servers briefly unable to answer (502, 503, 504), or the
// agent unreachable for a moment (connection refused or reset, the
// connection dropped mid-answer). A 4xx, a 500 and a cancelled context are
// answers, not outages.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	// Only the transport's failures: a body that does not decode is the
	// agent's answer, even when it is cut short.
	var ue *url.Error
	if !errors.As(err, &ue) {
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Retrier retries transient failures of one following loop. A success
// resets it, so each outage gets the whole budget.
type Retrier struct {
	Budget   time.Duration // how long one run of failures may last
	Backoff  time.Duration // the first wait; doubles up to maxDelay
	MaxDelay time.Duration

	Since time.Time     // start of the current run of failures
	delay time.Duration // the next wait
}

func NewRetrier() *Retrier {
	return &Retrier{Budget: transientBudget, Backoff: transientBackoff, MaxDelay: transientMaxDelay}
}

// Do runs fn until it succeeds, fails for good, the run of transient
// failures outlasts the budget, or ctx ends. It returns fn's last error.
func (r *Retrier) Do(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			r.Since, r.delay = time.Time{}, 0
			return nil
		}
		if !IsTransient(err) || ctx.Err() != nil {
			r.Since = time.Time{}
			return err
		}
		now := time.Now()
		if r.Since.IsZero() {
			r.Since, r.delay = now, r.Backoff
		}
		if now.Add(r.delay).Sub(r.Since) > r.Budget {
			r.Since = time.Time{}
			return err
		}
		t := time.NewTimer(r.delay)
		select {
		case <-ctx.Done():
			t.Stop()
			r.Since = time.Time{}
			return err
		case <-t.C:
		}
		r.delay = min(2*r.delay, r.MaxDelay)
	}
}
