package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// SnapshotSchedule is the agent's `server { snapshot { … } }` block (a
// drover extension): the leader writes a backup (the format of GET
// /v1/operator/snapshot) into Path every Interval and keeps the newest
// Retain. The agent bounds it (core/agent/config_snapshot.go).
type SnapshotSchedule struct {
	Interval time.Duration
	Retain   int
	Path     string
}

const (
	scheduledPrefix = "drover-snapshot-"
	scheduledSuffix = ".snap"
)

// runScheduledSnapshots is a leader loop: it ends with leadership.
func (s *Server) runScheduledSnapshots(ctx context.Context) {
	sch := s.cfg.ScheduledSnapshot
	t := time.NewTicker(sch.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.writeScheduledSnapshot(ctx); err != nil {
			s.logger.Error("scheduled snapshot failed", "path", sch.Path, "error", err)
		}
	}
}

// writeScheduledSnapshot writes one backup into the schedule's directory
// (a temporary file, synced, then renamed, then the directory synced) and
// removes the oldest beyond Retain. It returns the file's path.
func (s *Server) writeScheduledSnapshot(ctx context.Context) (string, error) {
	sch := s.cfg.ScheduledSnapshot
	if err := os.MkdirAll(sch.Path, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(sch.Path, ".tmp-"+scheduledPrefix+"*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	defer tmp.Close()
	info, err := s.SaveSnapshot(ctx, tmp, true)
	if err != nil {
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	// Names sort by time: UTC, fixed width.
	name := filepath.Join(sch.Path, fmt.Sprintf("%s%s-%020d%s", scheduledPrefix, info.Created.Format("20060102T150405.000000000Z"), info.Index, scheduledSuffix))
	if err := os.Rename(tmp.Name(), name); err != nil {
		return "", err
	}
	if d, err := os.Open(sch.Path); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	if err := pruneSnapshots(sch.Path, sch.Retain); err != nil {
		return name, fmt.Errorf("removing old snapshots: %w", err)
	}
	s.logger.Info("scheduled snapshot written", "file", name, "index", info.Index, "bytes", info.Size)
	return name, nil
}

// pruneSnapshots removes all but the newest retain scheduled snapshots in
// dir; other files are left alone.
func pruneSnapshots(dir string, retain int) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); e.Type().IsRegular() && strings.HasPrefix(n, scheduledPrefix) && strings.HasSuffix(n, scheduledSuffix) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for len(names) > retain {
		if err := os.Remove(filepath.Join(dir, names[0])); err != nil {
			return err
		}
		names = names[1:]
	}
	return nil
}
