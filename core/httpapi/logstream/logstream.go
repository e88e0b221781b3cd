// Package logstream writes a task's log bytes as the body of Nomad's
// /v1/client/fs/logs answer: raw bytes when plain, else Nomad's framed JSON
// stream (one Frame object per chunk, empty frames as heartbeats while a
// followed stream is idle). It knows nothing of allocations, ACLs or
// forwarding: core/httpapi parses the request and feeds a Writer.
package logstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Log streaming limits: a frame carries at most MaxFrameData bytes, and an
// idle followed stream sends an empty frame every heartbeat so that proxies
// and clients see the connection alive (Nomad's client skips them).
const (
	MaxFrameData     = 64 * 1024
	DefaultHeartbeat = 10 * time.Second
)

// Frame is one object of Nomad's framed log stream. Every field is omitted
// when empty so that a heartbeat encodes as {}.
type Frame struct {
	Offset    int64  `json:",omitempty"`
	Data      []byte `json:",omitempty"`
	File      string `json:",omitempty"`
	FileEvent string `json:",omitempty"`
}

// LogFile is the File a frame names for a task's stdout or stderr, as
// Nomad's client shows it.
func LogFile(task, logType string) string {
	return fmt.Sprintf("alloc/logs/%s.%s.0", task, logType)
}

// Writer turns the client's byte stream into the HTTP response: raw bytes
// when plain, Nomad's JSON frames otherwise. The response starts on the
// first write (or Start), so that an error before any byte still gets its
// status. Its methods are safe to call concurrently.
type Writer struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	enc     *json.Encoder
	plain   bool
	file    string
	pos     int64
	started bool
	lastOut time.Time
}

// NewWriter writes to w. file names the log in every frame, and pos is the
// offset of the first byte written (frames carry the offset past their data).
func NewWriter(w http.ResponseWriter, plain bool, file string, pos int64) *Writer {
	return &Writer{
		w:     w,
		rc:    http.NewResponseController(w),
		enc:   json.NewEncoder(w),
		plain: plain,
		file:  file,
		pos:   pos,
	}
}

// Started reports whether the response has begun: its status is sent.
func (lw *Writer) Started() bool {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.started
}

// Start sends the 200 and headers if nothing was sent yet.
func (lw *Writer) Start() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.startLocked()
}

func (lw *Writer) startLocked() {
	if lw.started {
		return
	}
	lw.started = true
	if lw.plain {
		lw.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		lw.w.Header().Set("Content-Type", "application/json")
	}
	lw.w.WriteHeader(http.StatusOK)
}

// Write sends p at once, in frames of at most MaxFrameData bytes.
func (lw *Writer) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.startLocked()
	lw.lastOut = time.Now()
	if lw.plain {
		n, err := lw.w.Write(p)
		if err == nil {
			err = lw.flush()
		}
		return n, err
	}
	written := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), MaxFrameData)]
		lw.pos += int64(len(chunk))
		if err := lw.enc.Encode(Frame{Offset: lw.pos, Data: chunk, File: lw.file}); err != nil {
			return written, err
		}
		written += len(chunk)
		p = p[len(chunk):]
	}
	return written, lw.flush()
}

// flush pushes buffered bytes to the caller; a writer that cannot flush
// (a test recorder) is fine.
func (lw *Writer) flush() error {
	if err := lw.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// Heartbeat sends an empty frame whenever the stream was idle for every,
// until ctx ends; the caller runs it on a goroutine it waits for.
func (lw *Writer) Heartbeat(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			lw.mu.Lock()
			if now.Sub(lw.lastOut) >= every {
				lw.startLocked()
				lw.lastOut = now
				if lw.enc.Encode(Frame{}) == nil {
					_ = lw.flush()
				}
			}
			lw.mu.Unlock()
		}
	}
}
