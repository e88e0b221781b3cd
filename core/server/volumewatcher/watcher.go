// Package volumewatcher is the leader's reaper of CSI volume claims.
//
// While enabled (on the leader), one loop runs a blocking query on the CSI
// volumes table and, for every volume that holds claims, wakes a
// per-volume worker. A worker re-reads its volume, records a past claim
// for every claim whose allocation is gone or terminal on its client, and
// hands the past claims, in order, to the Unpublisher, which drives each
// through node detach, controller detach and free, writing through Raft
// the states where they stop, all in one write. The watcher is the one owner of a release: a
// client only reports that its node unpublished a claim (a write of the
// volume that wakes the worker), and the worker takes the claim from
// there to freed.
//
// A release that fails is retried by the worker itself after a backoff
// (doubling up to a cap), so claims reach freed without waiting for another
// write to the volume. A release that waits for a client (ErrWaiting) is
// no failure: the client's report wakes the worker at once. A worker exits when its volume is gone or holds no
// claims, when the watcher is disabled, or after an idle period without
// notifications and without a pending retry; a later write to the volume
// starts a new one.
//
// The watcher only wakes on writes to the volumes table: an allocation
// turning terminal is seen on the next write to its volume. That is the
// client's unpublish, or, for a claim no client will release, the write the
// state store makes of the volume when the allocation ends on a node that
// is down or gone, is reaped, or its node goes down or is deleted.
package volumewatcher

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// Unpublisher releases the past claims of one volume (the server's
// release: node detach, controller detach, free), in the order given, and
// writes the states they reach together. It returns one error per claim:
// nil when the claim is freed, one wrapping ErrWaiting when its release
// waits for a write to the volume, any other when it failed and is to be
// retried.
type Unpublisher interface {
	UnpublishClaims(ctx context.Context, namespace, volumeID string, claims []*structs.CSIVolumeClaim) []error
}

// ErrWaiting, wrapped in an Unpublisher's error, says the release waits
// for something that writes the volume when it happens (a client's report
// that its node unpublished the claim, the node going down). It is no
// failure: the worker releases again on that write, at once, and
// otherwise only after MaxBackoff, as a safety net.
var ErrWaiting = errors.New("release waits for a write to the volume")

// Defaults of Config.
const (
	DefaultRate       = 1.0
	DefaultBurst      = 3
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = time.Minute
	DefaultIdle       = 5 * time.Minute
)

// Config configures a Watcher. Zero durations and rates take the defaults.
type Config struct {
	// State returns the server's current state store. It can be replaced
	// on snapshot restore, so the watcher calls it on each read.
	State func() *state.StateStore
	// Unpublisher releases past claims.
	Unpublisher Unpublisher
	// Logger logs failed releases (warn); nil logs nothing.
	Logger hclog.Logger

	// Rate is the number of passes per second a volume's worker makes
	// (default 1), Burst how many it may make at once (default 3).
	Rate  float64
	Burst int
	// Backoff is the delay before a worker retries a failed release
	// (default 1s); it doubles on each further failure up to MaxBackoff
	// (default 1m) and starts over after a pass without failure.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Idle is how long a worker waits without notifications and without a
	// pending retry before it exits (default 5m).
	Idle time.Duration
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Rate <= 0 {
		c.Rate = DefaultRate
	}
	if c.Burst <= 0 {
		c.Burst = DefaultBurst
	}
	if c.Backoff <= 0 {
		c.Backoff = DefaultBackoff
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.MaxBackoff < c.Backoff {
		c.MaxBackoff = c.Backoff
	}
	if c.Idle <= 0 {
		c.Idle = DefaultIdle
	}
}

// Watcher reaps CSI volume claims while enabled. The zero value is not
// usable; use New.
type Watcher struct {
	cfg    Config
	logger hclog.Logger

	// enableMu serialises SetEnabled and Stop, so that a step-down has
	// finished (every goroutine stopped) before a step-up starts again.
	enableMu sync.Mutex
	stopped  bool

	mu  sync.Mutex
	run *period // nil while disabled

	// passes counts the workers' passes over their volumes (tests wait on
	// it to know a worker has looked).
	passes atomic.Uint64
}

// period is one enabled stretch: the loop and the workers it started,
// stopped together by cancel and waited for by wg.
type period struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// workers is guarded by Watcher.mu.
	workers map[volKey]*worker
}

type volKey struct{ ns, id string }

// New returns a disabled watcher.
func New(cfg Config) *Watcher {
	cfg.setDefaults()
	return &Watcher{cfg: cfg, logger: cfg.Logger.Named("volumewatcher")}
}

// SetEnabled starts the watcher (leader step-up: true) or stops it
// (step-down: false). Disabling cancels every worker, waits for them and
// the loop to return and forgets them. It is idempotent; after Stop it
// does nothing.
func (w *Watcher) SetEnabled(enabled bool) {
	w.enableMu.Lock()
	defer w.enableMu.Unlock()
	if enabled {
		w.enable()
	} else {
		w.disable()
	}
}

// Stop disables the watcher for good (server shutdown).
func (w *Watcher) Stop() {
	w.enableMu.Lock()
	defer w.enableMu.Unlock()
	w.stopped = true
	w.disable()
}

// Workers returns the number of per-volume workers running.
func (w *Watcher) Workers() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.run == nil {
		return 0
	}
	return len(w.run.workers)
}

func (w *Watcher) enable() {
	if w.stopped {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.run != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &period{ctx: ctx, cancel: cancel, workers: map[volKey]*worker{}}
	w.run = p
	p.wg.Add(1)
	go w.watch(p)
}

func (w *Watcher) disable() {
	w.mu.Lock()
	p := w.run
	w.run = nil
	w.mu.Unlock()
	if p == nil {
		return
	}
	p.cancel()
	p.wg.Wait()
}

// watch is the loop of one period: a blocking query on the volumes table,
// and on each answer a notification for the volumes that changed.
func (w *Watcher) watch(p *period) {
	defer p.wg.Done()
	var (
		minIndex uint64 // the index of the last answer
		seen     uint64 // the table's index at the last read
		last     *state.StateStore
	)
	for {
		store := w.cfg.State()
		if store == nil {
			if !sleep(p.ctx, w.cfg.Backoff) {
				return
			}
			continue
		}
		var (
			vols     []*structs.CSIVolume
			from     *state.StateStore
			full     bool
			tableIdx uint64
		)
		// A store other than the one last read (the first, or a snapshot
		// restore) is read whole and always answers: anything may have
		// changed, whatever its index. Otherwise only the volumes written
		// since the last read are, so that a write costs what it changed,
		// not the size of the table. The index reported is the table's
		// plus one, so that an empty table (index 0) still blocks.
		index, err := store.BlockingQuery(p.ctx, minIndex, func(ws memdb.WatchSet, s *state.StateStore) (uint64, error) {
			full = s != last
			// The volumes and the table's index come from one read:
			// an index read apart could count a write the list missed.
			after := seen
			if full {
				after = 0
			}
			vs, idx, err := s.CSIVolumesModifiedAfter(ws, after)
			if err != nil {
				return 0, err
			}
			vols, from, tableIdx = vs, s, idx
			i := tableIdx + 1
			if full && i <= minIndex {
				i = minIndex + 1
			}
			return i, nil
		})
		if p.ctx.Err() != nil {
			return
		}
		if err != nil {
			w.logger.Warn("failed to list CSI volumes", "error", err)
			if !sleep(p.ctx, w.cfg.Backoff) {
				return
			}
			continue
		}
		if index <= minIndex {
			// No progress (a store abandoned without a successor):
			// do not spin on it.
			if !sleep(p.ctx, w.cfg.Backoff) {
				return
			}
			continue
		}
		w.notify(p, vols, full, from)
		minIndex, seen, last = index, tableIdx, from
	}
}

// notify wakes the worker of every volume in vols that changed since its
// worker last heard, starting one for a volume with claims that has none,
// and wakes the workers of volumes that are gone. all says vols is the
// whole table (of a new store): every worker is woken.
func (w *Watcher) notify(p *period, vols []*structs.CSIVolume, all bool, store *state.StateStore) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.run != p {
		return // disabled meanwhile
	}
	var present map[volKey]struct{}
	if all {
		present = make(map[volKey]struct{}, len(vols))
	}
	for _, v := range vols {
		k := volKey{v.Namespace, v.ID}
		if all {
			present[k] = struct{}{}
		}
		wk := p.workers[k]
		switch {
		case wk == nil && !v.InUse():
			continue
		case wk == nil:
			wk = w.startWorker(p, k)
		case !all && !wk.goneSeen && wk.seen >= v.ModifyIndex:
			continue
		}
		wk.seen, wk.goneSeen = v.ModifyIndex, false
		wk.poke()
	}
	// A deletion leaves nothing in a partial read: the workers' own
	// volumes are looked up instead (there are far fewer workers than
	// volumes).
	for k, wk := range p.workers {
		if wk.goneSeen {
			continue
		}
		gone := false
		if all {
			_, ok := present[k]
			gone = !ok
		} else if v, err := store.CSIVolumeRaw(nil, k.ns, k.id); err == nil && v == nil {
			gone = true
		}
		if gone {
			wk.goneSeen = true
			wk.poke()
		}
	}
}

// startWorker starts the worker of k. The caller holds w.mu.
func (w *Watcher) startWorker(p *period, k volKey) *worker {
	wk := &worker{
		w:       w,
		p:       p,
		key:     k,
		notifyC: make(chan struct{}, 1),
		limiter: newLimiter(w.cfg.Rate, w.cfg.Burst),
		logger:  w.logger.With("namespace", k.ns, "volume_id", k.id),
	}
	p.workers[k] = wk
	p.wg.Add(1)
	go wk.run()
	return wk
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
