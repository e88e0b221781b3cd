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
	// allocsDir held one <allocID>.json per alloc before the state log
	// (allocLogFile); a client reads it once and removes it.
	allocsDir = "allocs"
)

// persistedAlloc is what a client restart needs to resume an alloc: the
// alloc as the server sent it and, per task, its state and driver handle.
type persistedAlloc struct {
	Alloc *structs.Allocation
	Tasks map[string]*persistedTask
	// CSI is how far the alloc's CSI volumes got, for their release.
	CSI []*csi.MountState `json:",omitempty"`
	// HostVolumes are the alloc's host volume binds, for their release.
	HostVolumes []*hostMount `json:",omitempty"`
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
// identity, each in a file replaced atomically, and the allocs' states in
// one append-only log (see allocLog). An alloc's state is written many
// times in its life (every task state change), so that a write is one
// append to an open file, with one fsync shared by every write that
// waited for it, rather than a new file, its fsync and a rename each.
type stateStore struct {
	dir string
	mu  sync.Mutex
	log *allocLog
	// encoded caches each alloc's last JSON-encoded *structs.Allocation:
	// the server's version is shared and never modified, so the pointer
	// names the bytes, and most writes change only the task states.
	encoded map[string]encodedAlloc
}

type encodedAlloc struct {
	alloc *structs.Allocation
	json  []byte
	// logged: the log holds json as the alloc's record.
	logged bool
}

// The log keeps an alloc's state in two records: the alloc as the server
// sent it, under allocKey(id), written when the client gets a new version
// of it, and the rest (task states and handles, CSI, services) under id,
// written at every change. The alloc is most of the bytes (the job is in
// it) and rarely changes. A record under id that holds the alloc itself
// (an older client's) is read as well.
const allocKeySuffix = "/alloc"

func allocKey(id string) string { return id + allocKeySuffix }

func openStateStore(dir string) (*stateStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	log, err := openAllocLog(dir)
	if err != nil {
		return nil, err
	}
	return &stateStore{dir: dir, log: log, encoded: map[string]encodedAlloc{}}, nil
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

// putAlloc records p durably: it returns once p is on disk.
func (s *stateStore) putAlloc(p *persistedAlloc) error {
	id := p.Alloc.ID
	s.mu.Lock()
	enc, ok := s.encoded[id]
	s.mu.Unlock()
	if !ok || enc.alloc != p.Alloc {
		b, err := json.Marshal(p.Alloc)
		if err != nil {
			return fmt.Errorf("encode alloc state: %w", err)
		}
		enc = encodedAlloc{alloc: p.Alloc, json: b}
		s.mu.Lock()
		s.encoded[id] = enc
		s.mu.Unlock()
	}
	rest, err := json.Marshal(&persistedAllocRest{Tasks: p.Tasks, CSI: p.CSI, HostVolumes: p.HostVolumes, Services: p.Services})
	if err != nil {
		return fmt.Errorf("encode alloc state: %w", err)
	}
	if enc.logged {
		return s.log.put(id, rest)
	}
	// The alloc first: a write torn between the two keeps the alloc
	// alone, never task states without their alloc.
	if err := s.log.putAll(logPut{id: allocKey(id), state: enc.json}, logPut{id: id, state: rest}); err != nil {
		return err
	}
	s.mu.Lock()
	if cur, ok := s.encoded[id]; ok && cur.alloc == enc.alloc {
		cur.logged = true
		s.encoded[id] = cur
	}
	s.mu.Unlock()
	return nil
}

// persistedAllocRest is persistedAlloc without its alloc, encoded apart.
type persistedAllocRest struct {
	Tasks       map[string]*persistedTask
	CSI         []*csi.MountState   `json:",omitempty"`
	HostVolumes []*hostMount        `json:",omitempty"`
	Services    *services.Persisted `json:",omitempty"`
}

func (s *stateStore) deleteAlloc(id string) error {
	s.mu.Lock()
	delete(s.encoded, id)
	s.mu.Unlock()
	return s.log.putAll(logPut{id: id}, logPut{id: allocKey(id)})
}

// allocs loads every persisted alloc. An unreadable state is skipped and
// reported in the returned error list rather than blocking the others.
func (s *stateStore) allocs() ([]*persistedAlloc, []error) {
	var out []*persistedAlloc
	var errs []error
	live := s.log.live()
	var orphans []string
	for id, b := range live {
		if aid, ok := strings.CutSuffix(id, allocKeySuffix); ok {
			if _, ok := live[aid]; !ok {
				orphans = append(orphans, id) // a torn write's alloc alone
			}
			continue
		}
		var p persistedAlloc
		err := json.Unmarshal(b, &p)
		if ab, ok := live[allocKey(id)]; err == nil && p.Alloc == nil && ok {
			err = json.Unmarshal(ab, &p.Alloc)
		}
		if err != nil || p.Alloc == nil || p.Alloc.ID == "" {
			errs = append(errs, fmt.Errorf("alloc state %s is unreadable: %v", id, err))
			continue
		}
		out = append(out, &p)
	}
	for _, id := range orphans {
		if err := s.log.put(id, nil); err != nil {
			errs = append(errs, fmt.Errorf("drop alloc record %s: %w", id, err))
		}
	}
	return out, errs
}

// close releases the log's file; a later write opens it again.
func (s *stateStore) close() error { return s.log.close() }

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
