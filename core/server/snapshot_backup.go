package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/fsm"
	"github.com/drover-org/drover/core/server/snapshotfile"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// MaxRestoreSize bounds a snapshot file given to RestoreSnapshot.
const MaxRestoreSize int64 = 8 << 30

// SaveSnapshot writes a backup of the whole state (every table the FSM
// snapshot holds) to w in the snapshotfile format. Unless stale, the server
// must be the leader and first applies every committed entry (a barrier),
// so that the backup holds every acknowledged write.
func (s *Server) SaveSnapshot(ctx context.Context, w io.Writer, stale bool) (snapshotfile.Info, error) {
	if !stale {
		if !s.IsLeader() {
			return snapshotfile.Info{}, structs.NewError(structs.ErrNoLeader, "snapshot: this server is not the leader (use ?stale for its own state)")
		}
		if err := s.raft.Barrier(time.Minute).Error(); err != nil {
			return snapshotfile.Info{}, structs.NewError(structs.ErrUnavailable, "snapshot: raft barrier: %v", err)
		}
	}
	snap, err := s.State().Snapshot()
	if err != nil {
		return snapshotfile.Info{}, err
	}
	term, _ := strconv.ParseUint(s.raft.Stats()["term"], 10, 64)
	now := time.Now().UTC()
	meta := snapshotfile.Meta{
		ID:      fmt.Sprintf("%d-%d-%d", term, snap.LatestIndex(), now.UnixMilli()),
		Index:   snap.LatestIndex(),
		Term:    term,
		Region:  s.Region(),
		Created: now,
	}
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() { // owned here: SaveSnapshot waits for it below
		defer close(done)
		pw.CloseWithError(fsm.WriteSnapshot(pw, snap, meta.ID))
	}()
	info, err := snapshotfile.Write(w, meta, pr)
	pr.CloseWithError(errors.New("snapshot writer stopped"))
	<-done
	if err != nil {
		return snapshotfile.Info{}, fmt.Errorf("snapshot: %w", err)
	}
	s.logger.Info("snapshot saved", "index", info.Index, "term", info.Term, "bytes", info.Size)
	return info, nil
}

// RestoreSnapshot replaces the whole state with a backup's, on every server:
// the file is read to its end and checked (checksum, framing, then loaded
// into a scratch store as the FSM would) before anything changes, then
// handed to Raft's user restore, which installs it on the leader and sends
// it to the followers. A damaged file is refused with an error of kind
// structs.ErrInvalid and the state is untouched. Only the leader restores.
func (s *Server) RestoreSnapshot(ctx context.Context, r io.Reader) (snapshotfile.Info, error) {
	if !s.IsLeader() {
		return snapshotfile.Info{}, structs.NewError(structs.ErrNoLeader, "snapshot restore: this server is not the leader")
	}
	tmp, err := os.CreateTemp("", "drover-restore-*")
	if err != nil {
		return snapshotfile.Info{}, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	info, err := snapshotfile.Verify(r, tmp, MaxRestoreSize)
	if err != nil {
		if errors.Is(err, snapshotfile.ErrCorrupt) {
			return snapshotfile.Info{}, structs.NewError(structs.ErrInvalid, "snapshot restore refused, nothing changed: %v", err)
		}
		return snapshotfile.Info{}, structs.NewError(structs.ErrInvalid, "snapshot restore: reading the file: %v; nothing changed", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return snapshotfile.Info{}, err
	}
	if _, err := fsm.VerifySnapshot(tmp); err != nil {
		return snapshotfile.Info{}, structs.NewError(structs.ErrInvalid, "snapshot restore refused, nothing changed: its state does not load: %v", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return snapshotfile.Info{}, err
	}
	if err := s.checkRestoredCA(tmp); err != nil {
		return snapshotfile.Info{}, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return snapshotfile.Info{}, err
	}
	meta := &raft.SnapshotMeta{
		Version: raft.SnapshotVersionMax,
		ID:      info.ID,
		Index:   info.Index,
		Term:    info.Term,
		Size:    info.PayloadSize,
	}
	if err := s.raft.Restore(meta, tmp, time.Minute); err != nil {
		return snapshotfile.Info{}, structs.NewError(structs.ErrUnavailable, "snapshot restore: raft: %v", err)
	}
	// The leader's queues and loops were built from the old state.
	s.revokeLeadership()
	if err := s.establishLeadership(); err != nil {
		s.logger.Error("re-establishing leadership after a snapshot restore failed", "error", err)
		s.revokeLeadership()
	}
	s.logger.Info("snapshot restored", "id", info.ID, "index", info.Index, "bytes", info.Size)
	return info, nil
}

// checkRestoredCA refuses a snapshot whose cluster CA is not the one this
// server's certificates chain to: restored, it would have the servers
// issue certificates from a CA their peers do not trust, and the old
// clients could not reach servers whose certificates they do not trust.
// A fresh cluster takes a backup's CA with `drover operator snapshot
// extract-ca` (docs/backups.md). A server without the cluster PKI, or a
// snapshot without one, has nothing to compare.
func (s *Server) checkRestoredCA(payload io.Reader) error {
	if s.cfg.PKI == nil || s.cfg.PKI.Trust == nil {
		return nil
	}
	var stored *structs.ClusterPKI
	err := fsm.ReadSnapshot(payload, func(table string, obj any) error {
		if p, ok := obj.(*structs.ClusterPKI); ok && table == state.TablePKI {
			stored = p
		}
		return nil
	})
	if err != nil {
		return structs.NewError(structs.ErrInvalid, "snapshot restore refused, nothing changed: its state does not load: %v", err)
	}
	if stored == nil {
		return nil
	}
	if have := s.cfg.PKI.Trust.Fingerprint(); stored.CAFingerprint != have {
		return structs.NewError(structs.ErrInvalid,
			"snapshot restore refused, nothing changed: the snapshot's cluster CA %s is not this cluster's (%s); "+
				"start the fresh cluster's first server from the snapshot's CA (drover operator snapshot extract-ca) before restoring",
			stored.CAFingerprint, have)
	}
	return nil
}
