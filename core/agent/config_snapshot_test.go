package agent

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSnapshotScheduleConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		block   *SnapshotConfig
		dataDir string
		want    string // error substring; "" for none
		retain  int
		every   time.Duration
		path    string
	}{
		{"defaults", &SnapshotConfig{}, "/data", "", 24, time.Hour, filepath.Join("/data", "server", "snapshots")},
		{"set", &SnapshotConfig{Interval: "30m", Retain: 3, Path: "/backups"}, "", "", 3, 30 * time.Minute, "/backups"},
		{"bad duration", &SnapshotConfig{Interval: "often"}, "/d", `server.snapshot.interval: "often" is not a duration`, 0, 0, ""},
		{"too often", &SnapshotConfig{Interval: "1s"}, "/d", "server.snapshot.interval: must be between 10s and 168h0m0s", 0, 0, ""},
		{"too rare", &SnapshotConfig{Interval: "200h"}, "/d", "server.snapshot.interval: must be between", 0, 0, ""},
		{"retain negative", &SnapshotConfig{Retain: -1}, "/d", "server.snapshot.retain: must be between 1 and 1000, got -1", 0, 0, ""},
		{"retain huge", &SnapshotConfig{Retain: 5000}, "/d", "server.snapshot.retain: must be between 1 and 1000", 0, 0, ""},
		{"no path", &SnapshotConfig{}, "", "server.snapshot.path: required", 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &ServerConfig{Snapshot: tc.block}
			got, err := sc.snapshotSchedule(tc.dataDir)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v; want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Retain != tc.retain || got.Interval != tc.every || got.Path != tc.path {
				t.Errorf("schedule %+v; want retain %d interval %s path %s", got, tc.retain, tc.every, tc.path)
			}
		})
	}
	if s, err := (&ServerConfig{}).snapshotSchedule("/d"); s != nil || err != nil {
		t.Errorf("no block: %v, %v; want nothing", s, err)
	}
}

func TestSnapshotConfigMerge(t *testing.T) {
	a := &ServerConfig{Snapshot: &SnapshotConfig{Interval: "2h", Retain: 5}}
	b := &ServerConfig{Snapshot: &SnapshotConfig{Retain: 9, Path: "/p"}}
	r := mergeServer(a, b)
	if got := *r.Snapshot; got != (SnapshotConfig{Interval: "2h", Retain: 9, Path: "/p"}) {
		t.Errorf("merged %+v", got)
	}
}

// TestSnapshotBlockParses: the block decodes from HCL, and a bad value is
// refused when the config is validated, naming the key.
func TestSnapshotBlockParses(t *testing.T) {
	src := "data_dir = \"/d\"\nserver {\n  enabled = true\n  snapshot {\n    interval = \"%s\"\n    retain = 4\n    path = \"/snaps\"\n  }\n}\n"
	cfg, err := ParseConfig("agent.hcl", []byte(strings.Replace(src, "%s", "2h", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Server.Snapshot; got == nil || *got != (SnapshotConfig{Interval: "2h", Retain: 4, Path: "/snaps"}) {
		t.Fatalf("parsed %+v", got)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg, err = ParseConfig("agent.hcl", []byte(strings.Replace(src, "%s", "1ms", 1)))
	if err == nil {
		err = cfg.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), "server.snapshot.interval") {
		t.Fatalf("error %v; want one naming server.snapshot.interval", err)
	}
}
