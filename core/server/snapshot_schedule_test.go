package server

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/server/snapshotfile"
)

func scheduledFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), scheduledPrefix) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// TestScheduledSnapshotRetention writes five scheduled snapshots with
// retain = 2: the two newest stay, each a sound file, and a file that is
// not a scheduled snapshot is left alone.
func TestScheduledSnapshotRetention(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snaps")
	s := testServer(t, func(c *Config) {
		c.ScheduledSnapshot = &SnapshotSchedule{Interval: time.Hour, Retain: 2, Path: dir}
	})
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var written []string
	var before uint64
	for i := range 5 {
		if _, err := s.Jobs().Register(ctx, testJob("j"+string(rune('a'+i)), "sysbatch"), false, 0); err != nil {
			t.Fatal(err)
		}
		before = s.State().LatestIndex()
		name, err := s.writeScheduledSnapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		written = append(written, filepath.Base(name))
	}
	got := scheduledFiles(t, dir)
	if !slices.Equal(got, written[3:]) {
		t.Fatalf("files kept %v, want the newest two of %v", got, written)
	}
	var last uint64
	for _, n := range got {
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		info, err := snapshotfile.Verify(f, nopWriter{}, 0)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if info.Index <= last {
			t.Errorf("%s: index %d not after %d", n, info.Index, last)
		}
		last = info.Index
	}
	if last < before {
		t.Errorf("newest snapshot at index %d, older than the state it was taken of (%d)", last, before)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Errorf("a foreign file was removed: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("directory holds %d entries (temporary files left?)", len(ents))
	}
}

// TestScheduledSnapshotLeaderLoop: the leader writes on its own.
func TestScheduledSnapshotLeaderLoop(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snaps")
	testServer(t, func(c *Config) {
		c.ScheduledSnapshot = &SnapshotSchedule{Interval: 20 * time.Millisecond, Retain: 1, Path: dir}
	})
	waitFor(t, 20*time.Second, "a scheduled snapshot", func() bool { return len(scheduledFiles(t, dir)) == 1 })
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
