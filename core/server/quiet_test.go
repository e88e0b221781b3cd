package server

import (
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// TestWriteQuiet: a write in flight makes the tracker busy, and its end
// restarts the quiet period; nested writes end it only when the last one
// ends.
func TestWriteQuiet(t *testing.T) {
	q := newWriteQuiet()
	if idle, _ := q.idle(); !idle {
		t.Fatal("new tracker busy")
	}
	_, before := q.idle()
	end1 := q.begin()
	end2 := q.begin()
	if idle, _ := q.idle(); idle {
		t.Fatal("idle with two writes in flight")
	}
	end1()
	if idle, _ := q.idle(); idle {
		t.Fatal("idle with one write in flight")
	}
	end2()
	idle, since := q.idle()
	if !idle {
		t.Fatal("busy with no write in flight")
	}
	if since.Before(before) {
		t.Fatalf("quiet since %v, before the writes ended (%v)", since, before)
	}
}

func TestBothIdle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	t1 := t0.Add(time.Second)
	rep := func(idle bool, at time.Time) func() (bool, time.Time) {
		return func() (bool, time.Time) { return idle, at }
	}
	for _, c := range []struct {
		name      string
		a, b      func() (bool, time.Time)
		wantIdle  bool
		wantSince time.Time
	}{
		{"both idle, later second", rep(true, t0), rep(true, t1), true, t1},
		{"both idle, later first", rep(true, t1), rep(true, t0), true, t1},
		{"first busy", rep(false, t0), rep(true, t0), false, t0},
		{"second busy", rep(true, t0), rep(false, t1), false, t1},
	} {
		idle, since := bothIdle(c.a, c.b)()
		if idle != c.wantIdle || !since.Equal(c.wantSince) {
			t.Errorf("%s: got (%v, %v), want (%v, %v)", c.name, idle, since, c.wantIdle, c.wantSince)
		}
	}
}

// TestGCYieldsToWrites: on a running server, a Raft write in flight holds
// a GC step back (collector.quiet is busy) and restarts the quiet period when
// it ends; GC's own entries do neither.
func TestGCYieldsToWrites(t *testing.T) {
	s := testServer(t, nil)
	quiet := collector{s}.quiet()
	waitFor(t, 10*time.Second, "quiet", func() bool { idle, _ := quiet(); return idle })
	end := s.writes.begin()
	if idle, _ := quiet(); idle {
		t.Fatal("quiet while a write is in flight")
	}
	end()
	if idle, _ := quiet(); !idle {
		t.Fatal("busy after the write ended")
	}

	_, s0 := s.writes.idle()
	if _, _, err := s.gcApply(structs.GCReapRequestType, &structs.GCReapRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, s1 := s.writes.idle(); !s1.Equal(s0) {
		t.Fatalf("a GC entry restarted the quiet period (%v -> %v)", s0, s1)
	}
	if _, _, err := s.raftApplyResponse(structs.GCReapRequestType, &structs.GCReapRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, s2 := s.writes.idle(); !s2.After(s0) {
		t.Fatalf("another write did not restart the quiet period (%v -> %v)", s0, s2)
	}
}
