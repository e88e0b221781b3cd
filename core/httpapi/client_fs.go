package httpapi

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/httpapi/logstream"
)

// The allocation file system, /v1/client/fs/{ls,stat,cat,readat,stream}/
// <alloc>?path=...: read-fs in the allocation's namespace. The client
// resolves every path beneath the allocation directory without following
// a symlink (core/client/fs.go).

// onFS authorizes read-fs on the path's allocation, then runs fn with
// the local client's file system API (or forwards the request).
func (s clientHandlers) onFS(w http.ResponseWriter, r *http.Request, fn func(c clientFS, allocID, path string)) {
	s.onAlloc(w, r, acl.NamespaceCapabilityReadFS, func(allocID string) {
		c, ok := s.client.(clientFS)
		if !ok {
			s.writeError(w, errNoClientSupport)
			return
		}
		fn(c, allocID, r.URL.Query().Get("path"))
	})
}

// fsList serves GET /v1/client/fs/ls/<alloc>?path=.
func (s clientHandlers) fsList(w http.ResponseWriter, r *http.Request) {
	s.onFS(w, r, func(c clientFS, allocID, path string) {
		files, err := c.AllocFSList(allocID, path)
		if err != nil {
			s.writeError(w, err)
			return
		}
		writeJSON(w, r, http.StatusOK, files)
	})
}

// fsStat serves GET /v1/client/fs/stat/<alloc>?path=.
func (s clientHandlers) fsStat(w http.ResponseWriter, r *http.Request) {
	s.onFS(w, r, func(c clientFS, allocID, path string) {
		fi, err := c.AllocFSStat(allocID, path)
		if err != nil {
			s.writeError(w, err)
			return
		}
		writeJSON(w, r, http.StatusOK, fi)
	})
}

// writeFileHeaders marks a task's file as opaque bytes: a browser must
// never render a file a task wrote (HTML, say) as a page of the API's
// origin.
func writeFileHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
}

// fsCat serves GET /v1/client/fs/cat/<alloc>?path=: the whole file.
func (s clientHandlers) fsCat(w http.ResponseWriter, r *http.Request) {
	s.onFS(w, r, func(c clientFS, allocID, path string) {
		f, err := c.AllocFSOpen(allocID, path)
		if err != nil {
			s.writeError(w, err)
			return
		}
		defer f.Close()
		writeFileHeaders(w)
		_, _ = io.Copy(w, f)
	})
}

// fsReadAt serves GET /v1/client/fs/readat/<alloc>?path=&offset=&limit=:
// limit bytes from offset (limit <= 0: to the end).
func (s clientHandlers) fsReadAt(w http.ResponseWriter, r *http.Request) {
	offset, err := int64Param(r, "offset")
	if err == nil && offset < 0 {
		err = badRequest("offset: must not be negative")
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	limit, err := int64Param(r, "limit")
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.onFS(w, r, func(c clientFS, allocID, path string) {
		f, err := c.AllocFSOpen(allocID, path)
		if err != nil {
			s.writeError(w, err)
			return
		}
		defer f.Close()
		n := int64(1<<63 - 1)
		if limit > 0 {
			n = limit
		}
		writeFileHeaders(w)
		_, _ = io.Copy(w, io.NewSectionReader(f, offset, n))
	})
}

// int64Param reads an optional integer query parameter (0 when absent).
func int64Param(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, badRequest("%s: must be an integer, got %q", name, v)
	}
	return n, nil
}

// fsStream serves GET /v1/client/fs/stream/<alloc>?path=&offset=&origin=
// &follow=: the file in Nomad's framed JSON stream (heartbeats while a
// followed stream is idle). follow defaults to true, as Nomad's; plain=true
// sends the raw bytes.
func (s clientHandlers) fsStream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	origin := q.Get("origin")
	switch origin {
	case "":
		origin = "start"
	case "start", "end":
	default:
		s.writeError(w, badRequest("origin: must be start or end, got %q", origin))
		return
	}
	offset, err := int64Param(r, "offset")
	if err == nil && offset < 0 {
		err = badRequest("offset: must not be negative")
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	follow := true
	if q.Get("follow") != "" {
		if follow, err = parseBool(r, "follow"); err != nil {
			s.writeError(w, err)
			return
		}
	}
	plain, err := parseBool(r, "plain")
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.onFS(w, r, func(c clientFS, allocID, path string) {
		fs, err := c.AllocFSStream(allocID, path, origin, offset)
		if err != nil {
			s.writeError(w, err)
			return
		}
		defer fs.Close()
		w.Header().Set("X-Content-Type-Options", "nosniff")
		lw := logstream.NewWriter(w, plain, path, fs.Offset())
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(s.stopping, cancel)()
		var hb sync.WaitGroup
		if follow && !plain {
			hb.Add(1)
			go func() {
				defer hb.Done()
				lw.Heartbeat(ctx, logHandlers(s).heartbeatEvery())
			}()
		}
		err = fs.Copy(ctx, follow, lw)
		cancel()
		hb.Wait()
		if err != nil && !lw.Started() {
			s.writeError(w, err)
			return
		}
		if err != nil {
			s.logger.Warn("file stream ended with error", "alloc_id", allocID, "path", path, "error", err)
		}
		lw.Start() // an empty file is still a 200
	})
}
