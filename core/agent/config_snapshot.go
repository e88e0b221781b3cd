package agent

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/drover-org/drover/core/server"
)

// Bounds of `server { snapshot { … } }`, a drover extension: scheduled
// backups written by the leader (docs/backups.md).
const (
	minSnapshotInterval     = 10 * time.Second
	maxSnapshotInterval     = 7 * 24 * time.Hour
	defaultSnapshotInterval = time.Hour
	maxSnapshotRetain       = 1000
	defaultSnapshotRetain   = 24
)

// SnapshotConfig is the server's `snapshot { interval retain path }` block.
type SnapshotConfig struct {
	// Interval between two backups (duration string, 10s..168h, default 1h).
	Interval string `hcl:"interval,optional"`
	// Retain is how many backups are kept, newest first (1..1000, default 24).
	Retain int `hcl:"retain,optional"`
	// Path is the directory written to (default <data_dir>/server/snapshots;
	// required in -dev mode without a data_dir).
	Path string `hcl:"path,optional"`
}

// snapshotSchedule checks the block and returns the server's schedule
// (nil without a block). Errors name the key and its rule.
func (sc *ServerConfig) snapshotSchedule(dataDir string) (*server.SnapshotSchedule, error) {
	if sc == nil || sc.Snapshot == nil {
		return nil, nil
	}
	b := sc.Snapshot
	out := &server.SnapshotSchedule{Interval: defaultSnapshotInterval, Retain: defaultSnapshotRetain, Path: b.Path}
	if b.Interval != "" {
		d, err := time.ParseDuration(b.Interval)
		switch {
		case err != nil:
			return nil, fmt.Errorf("server.snapshot.interval: %q is not a duration (such as \"1h\")", b.Interval)
		case d < minSnapshotInterval || d > maxSnapshotInterval:
			return nil, fmt.Errorf("server.snapshot.interval: must be between %s and %s, got %q", minSnapshotInterval, maxSnapshotInterval, b.Interval)
		}
		out.Interval = d
	}
	switch {
	case b.Retain < 0 || b.Retain > maxSnapshotRetain:
		return nil, fmt.Errorf("server.snapshot.retain: must be between 1 and %d, got %d", maxSnapshotRetain, b.Retain)
	case b.Retain > 0:
		out.Retain = b.Retain
	}
	if out.Path == "" {
		if dataDir == "" {
			return nil, fmt.Errorf("server.snapshot.path: required when the agent has no data_dir")
		}
		out.Path = filepath.Join(dataDir, "server", "snapshots")
	}
	return out, nil
}

func mergeSnapshot(a, b *SnapshotConfig) *SnapshotConfig {
	if b == nil {
		return a
	}
	r := SnapshotConfig{}
	if a != nil {
		r = *a
	}
	str(&r.Interval, b.Interval)
	num(&r.Retain, b.Retain)
	str(&r.Path, b.Path)
	return &r
}
