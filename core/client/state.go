package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/core/client/csi"
	"github.com/drover-org/drover/core/client/services"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// State files under Config.StateDir.
const (
	nodeIDFile   = "node-id"
	secretIDFile = "secret-id"
	allocsDir    = "allocs" // one <allocID>.json per alloc runner
)

// persistedAlloc is what a client restart needs to resume an alloc: the
// alloc as the server sent it and, per task, its state and driver handle.
type persistedAlloc struct {
	Alloc *structs.Allocation
	Tasks map[string]*persistedTask
	// CSI is how far the alloc's CSI volumes got, for their release.
	CSI []*csi.MountState `json:",omitempty"`
	// Services is the alloc's native services' check statuses.
	Services *services.Persisted `json:",omitempty"`
}

// persistedTask is one task's resumable state.
type persistedTask struct {
	State *structs.TaskState
	// Handle is the driver's TaskHandle, protobuf-encoded and kept
	// verbatim: its State field is the driver's private business.
	Handle []byte `json:",omitempty"`
}

func newPersistedTask(st *structs.TaskState, h *driverpb.TaskHandle) *persistedTask {
	pt := &persistedTask{State: st}
	if h != nil {
		if b, err := proto.Marshal(h); err == nil {
			pt.Handle = b
		}
	}
	return pt
}

// handle decodes the persisted handle; nil when there is none or it is
// unreadable (the task is then treated as lost).
func (pt *persistedTask) handle() *driverpb.TaskHandle {
	if pt == nil || len(pt.Handle) == 0 {
		return nil
	}
	var h driverpb.TaskHandle
	if err := proto.Unmarshal(pt.Handle, &h); err != nil {
		return nil
	}
	return &h
}

// stateStore keeps the client's durable state in plain files: the node's
// identity and one JSON file per alloc, each replaced atomically. The
// number of allocs on a node is small, and a file per alloc means a write
// never rewrites another alloc's state.
type stateStore struct {
	dir string
	mu  sync.Mutex
}

func openStateStore(dir string) (*stateStore, error) {
	if err := os.MkdirAll(filepath.Join(dir, allocsDir), 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	return &stateStore{dir: dir}, nil
}

// identity returns the node ID and secret persisted in the state dir,
// creating them on first use (id wins over a persisted ID when set).
func (s *stateStore) identity(id string) (nodeID, secretID string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(s.dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		return strings.TrimSpace(string(b)), err
	}
	if nodeID, err = read(nodeIDFile); err != nil {
		return "", "", fmt.Errorf("read node id: %w", err)
	}
	if id != "" && id != nodeID {
		nodeID = id
		if err := writeFileAtomic(filepath.Join(s.dir, nodeIDFile), []byte(nodeID+"\n")); err != nil {
			return "", "", fmt.Errorf("persist node id: %w", err)
		}
	}
	if nodeID == "" {
		nodeID = uuid.NewString()
		if err := writeFileAtomic(filepath.Join(s.dir, nodeIDFile), []byte(nodeID+"\n")); err != nil {
			return "", "", fmt.Errorf("persist node id: %w", err)
		}
	}
	if secretID, err = read(secretIDFile); err != nil {
		return "", "", fmt.Errorf("read secret id: %w", err)
	}
	if secretID == "" {
		secretID = uuid.NewString()
		if err := writeFileAtomic(filepath.Join(s.dir, secretIDFile), []byte(secretID+"\n")); err != nil {
			return "", "", fmt.Errorf("persist secret id: %w", err)
		}
	}
	return nodeID, secretID, nil
}

func (s *stateStore) allocPath(id string) string {
	return filepath.Join(s.dir, allocsDir, id+".json")
}

func (s *stateStore) putAlloc(p *persistedAlloc) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode alloc state: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return writeFileAtomic(s.allocPath(p.Alloc.ID), b)
}

func (s *stateStore) deleteAlloc(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Remove(s.allocPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// allocs loads every persisted alloc. An unreadable file is skipped and
// reported in the returned error list rather than blocking the others.
func (s *stateStore) allocs() ([]*persistedAlloc, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := os.ReadDir(filepath.Join(s.dir, allocsDir))
	if err != nil {
		return nil, []error{err}
	}
	var out []*persistedAlloc
	var errs []error
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, allocsDir, e.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var p persistedAlloc
		if err := json.Unmarshal(b, &p); err != nil || p.Alloc == nil || p.Alloc.ID == "" {
			errs = append(errs, fmt.Errorf("alloc state %s is unreadable: %v", e.Name(), err))
			continue
		}
		out = append(out, &p)
	}
	return out, errs
}

// writeFileAtomic replaces path with data so that a crash leaves either
// the old or the new content, never a torn file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
