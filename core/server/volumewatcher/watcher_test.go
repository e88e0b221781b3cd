package volumewatcher

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

const (
	writer = structs.CSIVolumeAccessModeSingleNodeWriter
	multi  = structs.CSIVolumeAccessModeMultiNodeMultiWriter
)

// Enabling starts workers only for volumes with claims; disabling stops
// them all and empties the map; both are idempotent.
func TestEnableDisable(t *testing.T) {
	h := newHarness(t, nil)
	h.volume("claimed", writer)
	h.volume("free", writer)
	h.claim("claimed", h.alloc(), structs.CSIVolumeClaimWrite, writer)

	h.w.SetEnabled(true)
	h.w.SetEnabled(true)
	waitFor(t, "a worker for the claimed volume", func() bool { return h.hasWorker("claimed") })
	before := h.w.passes.Load()
	h.gcClaim("free") // a write to the table: the loop looks again
	h.gcClaim("claimed")
	h.waitPasses(before, 1)
	if h.hasWorker("free") || h.w.Workers() != 1 {
		t.Fatalf("workers: %d, free volume has one: %v", h.w.Workers(), h.hasWorker("free"))
	}

	h.w.SetEnabled(false)
	if n := h.w.Workers(); n != 0 {
		t.Fatalf("workers after disable: %d", n)
	}
	h.w.SetEnabled(false)
	if calls := h.un.snapshot(); len(calls) != 0 {
		t.Fatalf("unpublished a running alloc's claim: %+v", calls)
	}
}

// Writes made while stepped down are reaped after the next step-up.
func TestLeadershipTransition(t *testing.T) {
	h := newHarness(t, nil)
	h.volume("v", writer)
	a := h.alloc()
	h.claim("v", a, structs.CSIVolumeClaimWrite, writer)

	h.w.SetEnabled(true)
	waitFor(t, "a worker", func() bool { return h.hasWorker("v") })
	h.w.SetEnabled(false)

	h.finish(a)
	h.gcClaim("v")
	if calls := h.un.snapshot(); len(calls) != 0 {
		t.Fatalf("unpublished while disabled: %+v", calls)
	}

	h.w.SetEnabled(true)
	waitFor(t, "the claim freed", func() bool { return h.freed("v", a.ID) })
	waitFor(t, "the worker gone", func() bool { return h.w.Workers() == 0 })
	if got := h.un.allocs(); !slices.Equal(got, []string{a.ID}) {
		t.Fatalf("unpublish calls: %v", got)
	}
}

// No release while the alloc runs; exactly one per past claim once its
// alloc is terminal or gone; a live reader stays.
func TestReap(t *testing.T) {
	h := newHarness(t, nil)
	h.volume("v", multi)
	reader, writerA, gced := h.alloc(), h.alloc(), h.alloc()
	h.claim("v", reader, structs.CSIVolumeClaimRead, multi)
	h.claim("v", writerA, structs.CSIVolumeClaimWrite, multi)
	h.claim("v", gced, structs.CSIVolumeClaimWrite, multi)

	h.w.SetEnabled(true)
	waitFor(t, "a worker", func() bool { return h.hasWorker("v") })
	before := h.w.passes.Load()
	h.gcClaim("v")
	h.waitPasses(before, 1)
	if calls := h.un.snapshot(); len(calls) != 0 {
		t.Fatalf("unpublished while every alloc runs: %+v", calls)
	}

	h.finish(writerA)
	h.ok(h.s().DeleteEval(h.next(), nil, []string{gced.ID}))
	h.gcClaim("v")
	waitFor(t, "the terminal and collected claims freed", func() bool {
		return h.freed("v", writerA.ID) && h.freed("v", gced.ID)
	})
	// The frees wrote the volume: wait for the worker to have looked
	// at the result before counting calls.
	before = h.w.passes.Load()
	h.gcClaim("v")
	h.waitPasses(before, 1)

	want := []string{writerA.ID, gced.ID}
	slices.Sort(want)
	if got := h.un.allocs(); !slices.Equal(got, want) {
		t.Fatalf("unpublish calls: %v, want %v", got, want)
	}
	for _, c := range h.un.snapshot() {
		if c.ns != ns || c.vol != "v" || c.claim.State != structs.CSIVolumeClaimStateUnpublishing {
			t.Errorf("call %+v", c)
		}
	}
	v := h.vol("v")
	if _, ok := v.ReadClaims[reader.ID]; !ok || len(v.PastClaims) != 0 || len(v.WriteClaims) != 0 {
		t.Fatalf("volume after reap: read %v, write %v, past %v", v.ReadClaims, v.WriteClaims, v.PastClaims)
	}
	if !h.hasWorker("v") {
		t.Error("the live reader's volume lost its worker")
	}
}

// A pass hands all the volume's past claims to the Unpublisher in one
// call, in allocation ID order, so that what they reach is written at
// once.
func TestPassReleasesInOneCall(t *testing.T) {
	h := newHarness(t, nil)
	h.volume("v", multi)
	var ids []string
	for range 3 {
		a := h.alloc()
		h.claim("v", a, structs.CSIVolumeClaimWrite, multi)
		h.finish(a)
		ids = append(ids, a.ID)
	}
	slices.Sort(ids)

	h.w.SetEnabled(true)
	waitFor(t, "the claims freed", func() bool {
		return h.freed("v", ids[0]) && h.freed("v", ids[1]) && h.freed("v", ids[2])
	})
	h.un.mu.Lock()
	batches := slices.Clone(h.un.batches)
	h.un.mu.Unlock()
	if len(batches) != 1 || !slices.Equal(batches[0], ids) {
		t.Fatalf("unpublish calls: %v, want one of %v", batches, ids)
	}
}

// A failing release is retried with a doubling backoff, without any
// further write, until it succeeds.
func TestRetryBackoff(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Backoff = 10 * time.Millisecond
		c.MaxBackoff = 40 * time.Millisecond
	})
	h.volume("v", writer)
	a := h.alloc()
	h.claim("v", a, structs.CSIVolumeClaimWrite, writer)
	h.finish(a)
	h.un.setFail(4)

	h.w.SetEnabled(true)
	waitFor(t, "the claim freed", func() bool { return h.freed("v", a.ID) })
	waitFor(t, "the worker gone", func() bool { return h.w.Workers() == 0 })

	calls := h.un.snapshot()
	if len(calls) != 5 {
		t.Fatalf("attempts: %d, want 5 (4 failures, 1 success)", len(calls))
	}
	for i, min := range []time.Duration{10, 20, 40, 40} {
		if gap := calls[i+1].at.Sub(calls[i].at); gap < min*time.Millisecond {
			t.Errorf("retry %d after %v, want at least %v", i+1, gap, min*time.Millisecond)
		}
	}
}

// A release that waits for a write to the volume (a client's report) is
// no failure: the write releases it at once, however long the backoff,
// and nothing retries it meanwhile.
func TestWaitEndsWithWrite(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Backoff = time.Hour
		c.MaxBackoff = time.Hour
	})
	h.volume("v", writer)
	a := h.alloc()
	h.claim("v", a, structs.CSIVolumeClaimWrite, writer)
	h.finish(a)
	h.un.mu.Lock()
	h.un.fail, h.un.failWith = -1, fmt.Errorf("node n1 has not unpublished: %w", ErrWaiting)
	h.un.mu.Unlock()

	h.w.SetEnabled(true)
	waitFor(t, "a waiting release", func() bool { return h.w.passes.Load() >= 1 && len(h.un.snapshot()) == 1 })
	// A write that changes nothing the release waits for: released
	// again (a failure would wait out its hour), still waiting.
	before := h.w.passes.Load()
	h.gcClaim("v")
	h.waitPasses(before, 1)
	if n := len(h.un.snapshot()); n < 2 {
		t.Fatalf("attempts after a write: %d, want 2", n)
	}
	// The report: the release passes.
	h.un.setFail(0)
	h.gcClaim("v")
	waitFor(t, "the claim freed", func() bool { return h.freed("v", a.ID) })
}

// A volume deleted while its worker backs off stops the worker without
// waiting for the retry.
func TestDeleteStopsWorker(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Backoff = time.Hour
		c.MaxBackoff = time.Hour
	})
	h.volume("v", writer)
	a := h.alloc()
	h.claim("v", a, structs.CSIVolumeClaimWrite, writer)
	h.finish(a)
	h.un.setFail(-1)

	h.w.SetEnabled(true)
	waitFor(t, "a failed attempt", func() bool { return len(h.un.snapshot()) == 1 })
	if !h.hasWorker("v") {
		t.Fatal("no worker while a retry is pending")
	}
	h.ok(h.s().DeleteCSIVolumes(h.next(), ns, []string{"v"}, true))
	waitFor(t, "the worker gone", func() bool { return h.w.Workers() == 0 })
	if n := len(h.un.snapshot()); n != 1 {
		t.Fatalf("attempts: %d", n)
	}
}

// A worker without notifications exits after Idle; the next write starts
// a new one.
func TestIdleExit(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Idle = 20 * time.Millisecond })
	h.volume("v", writer)
	a := h.alloc()
	h.claim("v", a, structs.CSIVolumeClaimWrite, writer)

	h.w.SetEnabled(true)
	waitFor(t, "a worker", func() bool { return h.hasWorker("v") })
	waitFor(t, "the idle worker gone", func() bool { return h.w.Workers() == 0 })

	h.finish(a)
	h.gcClaim("v")
	waitFor(t, "the claim freed by a new worker", func() bool { return h.freed("v", a.ID) })
	waitFor(t, "the worker gone", func() bool { return h.w.Workers() == 0 })
	if got := h.un.allocs(); !slices.Equal(got, []string{a.ID}) {
		t.Fatalf("unpublish calls: %v", got)
	}
}

// A snapshot restore replaces the store: the watcher follows it and reaps
// what the new store holds.
func TestStoreReplaced(t *testing.T) {
	h := newHarness(t, nil)
	h.w.SetEnabled(true)

	// Build the successor: same node and job, one terminal claim.
	old := h.s()
	next, err := state.NewStateStore()
	h.ok(err)
	h.ok(next.UpsertNode(h.next(), h.node.Copy()))
	h.ok(next.UpsertJob(h.next(), h.job.Copy()))
	h.store.Store(next) // the test's writes go to next; the watcher still reads old
	h.volume("v", writer)
	a := h.alloc()
	h.claim("v", a, structs.CSIVolumeClaimWrite, writer)
	h.finish(a)
	h.live.Store(next)
	old.Abandon(next)

	waitFor(t, "the claim freed in the new store", func() bool { return h.freed("v", a.ID) })
	if got := h.un.allocs(); !slices.Equal(got, []string{a.ID}) {
		t.Fatalf("unpublish calls: %v", got)
	}
}

// Stop ends everything; enabling afterwards does nothing.
func TestStop(t *testing.T) {
	h := newHarness(t, nil)
	h.volume("v", writer)
	h.claim("v", h.alloc(), structs.CSIVolumeClaimWrite, writer)
	h.w.SetEnabled(true)
	waitFor(t, "a worker", func() bool { return h.hasWorker("v") })
	h.w.Stop()
	h.w.SetEnabled(true)
	if n := h.w.Workers(); n != 0 {
		t.Fatalf("workers after stop: %d", n)
	}
	h.w.Stop()
}

func TestLimiter(t *testing.T) {
	l := newLimiter(1, 3)
	start := time.Now()
	for range 3 {
		must(t, l.wait(t.Context()))
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("burst waited %v", d)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.wait(ctx); err == nil {
		t.Fatal("a fourth token at once, or no error for a cancelled wait")
	}
}
