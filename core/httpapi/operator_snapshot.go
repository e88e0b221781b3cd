package httpapi

import (
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/drover-org/drover/core/server/snapshotfile"
	"github.com/drover-org/drover/core/structs"
)

// snapshotPath is the backup route; its PUT body is a snapshot file, bounded
// by the server (Snapshots) rather than by Config.MaxBodyBytes: it goes to
// Raft's user restore, never into the log.
const snapshotPath = "/v1/operator/snapshot"

// Snapshots is what a server offers for backups (core/server.Server).
type Snapshots interface {
	SaveSnapshot(ctx context.Context, w io.Writer, stale bool) (snapshotfile.Info, error)
	RestoreSnapshot(ctx context.Context, r io.Reader) (snapshotfile.Info, error)
}

func (s operatorHandlers) snapshots(w http.ResponseWriter) (Snapshots, bool) {
	sn, ok := s.srv.(Snapshots)
	if !ok || s.srv == nil {
		writeText(w, http.StatusNotImplemented, "This agent runs no server")
		return nil, false
	}
	return sn, true
}

// snapshotSave is GET /v1/operator/snapshot: the whole state as a snapshot
// file (docs/backups.md). A follower hands the request to the leader
// unless ?stale (leaderReads). The file streams as it is written; a
// failure midway cuts it short, which its checksum reveals to the reader.
func (s operatorHandlers) snapshotSave(w http.ResponseWriter, r *http.Request) {
	sn, ok := s.snapshots(w)
	if !ok {
		return
	}
	stale, err := parseStale(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if !stale {
		if c, ok := s.srv.(Cluster); ok && !c.IsLeader() {
			s.writeError(w, structs.NewError(structs.ErrNoLeader, "No cluster leader"))
			return
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set(headerIndex, strconv.FormatUint(s.srv.State().LatestIndex(), 10))
	if _, err := sn.SaveSnapshot(r.Context(), w, stale); err != nil {
		s.logger.Error("snapshot save failed", "error", err)
		// Nothing written yet only if the barrier failed; otherwise the
		// truncated body is refused by its checksum.
		s.writeError(w, err)
	}
}

// snapshotRestore is PUT /v1/operator/snapshot: the body, a snapshot
// file, replaces the whole state on every server once it has been checked
// end to end. A follower passes the request to the leader.
func (s operatorHandlers) snapshotRestore(w http.ResponseWriter, r *http.Request) {
	sn, ok := s.snapshots(w)
	if !ok {
		return
	}
	if c, ok := s.srv.(Cluster); ok && !c.IsLeader() && r.Header.Get(headerForwarded) == "" {
		leader := c.LeaderHTTPAddr(r.Context())
		if leader == "" {
			s.writeError(w, structs.NewError(structs.ErrNoLeader, "No cluster leader"))
			return
		}
		s.proxyToLeader(w, r, leader)
		return
	}
	info, err := sn.RestoreSnapshot(r.Context(), r.Body)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, r, http.StatusOK, map[string]any{"Index": info.Index, "Term": info.Term, "ID": info.ID, "SHA256": info.SHA256, "Size": info.Size})
}
