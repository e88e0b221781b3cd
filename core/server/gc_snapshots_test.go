package server

import (
	"context"
	"testing"

	"github.com/drover-org/drover/plugins/gc"
)

// TestGCDefersSnapshots: while a GC job runs the Raft snapshot threshold
// is raised, and it is put back after, with the other reloadable settings
// untouched; a threshold already higher stays.
func TestGCDefersSnapshots(t *testing.T) {
	s := testServer(t, func(c *Config) { c.SnapshotThreshold = 100; c.GC = &gcRouter{col: gc.New()} })
	before := s.raft.ReloadableConfig()
	if before.SnapshotThreshold != 100 {
		t.Fatalf("threshold %d, want the configured 100", before.SnapshotThreshold)
	}
	restore := collector{s}.deferSnapshots()
	during := s.raft.ReloadableConfig()
	if during.SnapshotThreshold != gcSnapshotThreshold || during.TrailingLogs != before.TrailingLogs || during.SnapshotInterval != before.SnapshotInterval {
		t.Fatalf("during GC: %+v, want the threshold raised to %d and nothing else changed (before %+v)", during, gcSnapshotThreshold, before)
	}
	restore()
	if after := s.raft.ReloadableConfig(); after != before {
		t.Fatalf("after GC: %+v, want %+v back", after, before)
	}

	// A GC run goes through it: the threshold is back after ForceGC.
	if err := s.ForceGC(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after := s.raft.ReloadableConfig(); after != before {
		t.Fatalf("after ForceGC: %+v, want %+v back", after, before)
	}

	high := testServer(t, func(c *Config) { c.SnapshotThreshold = gcSnapshotThreshold * 2 })
	r := collector{high}.deferSnapshots()
	if got := high.raft.ReloadableConfig().SnapshotThreshold; got != gcSnapshotThreshold*2 {
		t.Fatalf("a higher threshold was lowered to %d", got)
	}
	r()
}
