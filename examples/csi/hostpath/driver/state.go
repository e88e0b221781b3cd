package hostpath

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// stateVersion is written into every state file; a file of another version
// is refused rather than misread.
const stateVersion = 1

// volumeRecord is what the controller knows of one volume.
type volumeRecord struct {
	ID            string            `json:"id"`
	Name          string            `json:"name"`
	CapacityBytes int64             `json:"capacity_bytes"`
	Parameters    map[string]string `json:"parameters,omitempty"`
	CreatedAt     time.Time         `json:"created_at"`
	// Publishes maps a node ID to the controller publish to that node.
	Publishes map[string]publishRecord `json:"publishes,omitempty"`
}

// publishRecord is one ControllerPublishVolume that has not been undone.
type publishRecord struct {
	NodeID     string    `json:"node_id"`
	ReadOnly   bool      `json:"read_only"`
	AccessMode string    `json:"access_mode"`
	At         time.Time `json:"at"`
}

type controllerState struct {
	Version int                      `json:"version"`
	Volumes map[string]*volumeRecord `json:"volumes"`
}

// controllerStore guards the controller's records. Every RPC that reads or
// changes them holds mu for its whole length, disk writes included: the
// driver is small and its RPCs are rare, and one lock makes each RPC atomic.
type controllerStore struct {
	mu   sync.Mutex
	path string
	st   controllerState
}

func loadControllerStore(path string) (*controllerStore, error) {
	s := &controllerStore{path: path, st: controllerState{Version: stateVersion, Volumes: map[string]*volumeRecord{}}}
	if err := readState(path, &s.st); err != nil {
		return nil, err
	}
	if s.st.Version != stateVersion {
		return nil, fmt.Errorf("state file %s has version %d, want %d", path, s.st.Version, stateVersion)
	}
	if s.st.Volumes == nil {
		s.st.Volumes = map[string]*volumeRecord{}
	}
	return s, nil
}

func (s *controllerStore) save() error { return writeState(s.path, &s.st) }

// byName finds a volume by its CreateVolume name; linear, which is fine for
// the handful of volumes a hostpath driver holds.
func (s *controllerStore) byName(name string) *volumeRecord {
	for _, v := range s.st.Volumes {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// stageRecord is one NodeStageVolume that has not been undone.
type stageRecord struct {
	VolumeID    string `json:"volume_id"`
	StagingPath string `json:"staging_path"`
	AccessMode  string `json:"access_mode"`
}

// nodePublishRecord is one NodePublishVolume that has not been undone.
type nodePublishRecord struct {
	VolumeID    string `json:"volume_id"`
	TargetPath  string `json:"target_path"`
	StagingPath string `json:"staging_path"`
	ReadOnly    bool   `json:"read_only"`
	AccessMode  string `json:"access_mode"`
}

type nodeState struct {
	Version int `json:"version"`
	// Stages maps a staging path to the volume staged there; a volume may
	// be staged at several paths. (Files of earlier versions of the driver
	// keyed it by volume ID: loadNodeStore re-keys them.)
	Stages map[string]stageRecord `json:"stages"`
	// Publishes maps a target path to the volume published there.
	Publishes map[string]nodePublishRecord `json:"publishes"`
}

type nodeStore struct {
	mu   sync.Mutex
	path string
	st   nodeState
}

func loadNodeStore(path string) (*nodeStore, error) {
	s := &nodeStore{path: path, st: nodeState{Version: stateVersion}}
	if err := readState(path, &s.st); err != nil {
		return nil, err
	}
	if s.st.Version != stateVersion {
		return nil, fmt.Errorf("state file %s has version %d, want %d", path, s.st.Version, stateVersion)
	}
	stages := make(map[string]stageRecord, len(s.st.Stages))
	for _, rec := range s.st.Stages {
		stages[rec.StagingPath] = rec
	}
	s.st.Stages = stages
	if s.st.Publishes == nil {
		s.st.Publishes = map[string]nodePublishRecord{}
	}
	return s, nil
}

func (s *nodeStore) save() error { return writeState(s.path, &s.st) }

// stagesOf lists the stages of one volume.
func (s *nodeStore) stagesOf(volumeID string) []stageRecord {
	var out []stageRecord
	for _, r := range s.st.Stages {
		if r.VolumeID == volumeID {
			out = append(out, r)
		}
	}
	return out
}

// publishesOf lists the node publishes of one volume.
func (s *nodeStore) publishesOf(volumeID string) []nodePublishRecord {
	var out []nodePublishRecord
	for _, p := range s.st.Publishes {
		if p.VolumeID == volumeID {
			out = append(out, p)
		}
	}
	return out
}

// readState loads a state file into v; a missing file leaves v as it is.
func readState(path string, v any) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read state file: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("state file %s is corrupt: %w", path, err)
	}
	return nil
}

// writeState replaces the state file atomically: the new content goes to a
// temporary file in the same directory, is synced, renamed over the old file,
// and the directory is synced so the rename itself survives a crash.
func writeState(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write state file %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync state file %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close state file %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace state file %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync state directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync state directory %s: %w", dir, err)
	}
	return nil
}
