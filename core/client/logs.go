package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Log origins of AllocLogs.
const (
	LogOriginStart = "start"
	LogOriginEnd   = "end"
)

// AllocLogs writes a task's stdout or stderr log (logType "stdout" or
// "stderr") to w, starting offset bytes from the origin ("start", the
// default, or "end"). The task's log files (<task>.<type>.0, .1, …) read as
// one stream. With follow it keeps writing what the task appends until ctx
// ends, the client shuts down, or the task is dead and its log drained;
// each of those ends is a nil error.
//
// Unknown allocs and tasks are structs.ErrNotFound; bad arguments are
// structs.ErrInvalid.
func (c *Client) AllocLogs(ctx context.Context, allocID, task, logType, origin string, offset int64, follow bool, w io.Writer) error {
	if logType != "stdout" && logType != "stderr" {
		return structs.NewError(structs.ErrInvalid, "log type must be \"stdout\" or \"stderr\", not %q", logType)
	}
	if origin == "" {
		origin = LogOriginStart
	}
	if origin != LogOriginStart && origin != LogOriginEnd {
		return structs.NewError(structs.ErrInvalid, "origin must be %q or %q, not %q", LogOriginStart, LogOriginEnd, origin)
	}
	if offset < 0 {
		return structs.NewError(structs.ErrInvalid, "offset must not be negative")
	}
	ar := c.runner(allocID)
	if ar == nil {
		return structs.NewError(structs.ErrNotFound, "unknown allocation %q", allocID)
	}
	tr := ar.task(task)
	if tr == nil {
		return structs.NewError(structs.ErrNotFound, "unknown task %q in allocation %q", task, allocID)
	}
	ls := &logStream{
		dir:    ar.dir.logDir(),
		prefix: task + "." + logType + ".",
		dead:   tr.dead,
		poll:   c.cfg.LogPollInterval,
		stop:   c.ctx.Done(),
	}
	return ls.copy(ctx, origin, offset, follow, w)
}

// logStream reads a rotated log (prefix + index) as one stream.
type logStream struct {
	dir, prefix string
	// dead reports whether the writer is gone for good.
	dead func() bool
	poll time.Duration
	stop <-chan struct{}
}

type logFile struct {
	index int
	size  int64
}

// files lists the stream's files in index order.
func (s *logStream) files() ([]logFile, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []logFile
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, s.prefix) {
			continue
		}
		idx, err := strconv.Atoi(strings.TrimPrefix(name, s.prefix))
		if err != nil || idx < 0 {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, logFile{index: idx, size: info.Size()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].index < out[j].index })
	return out, nil
}

func (s *logStream) path(index int) string {
	return filepath.Join(s.dir, s.prefix+strconv.Itoa(index))
}

// seek turns a stream position into a file index and an offset in it.
func (s *logStream) seek(origin string, offset int64) (int, int64, error) {
	files, err := s.files()
	if err != nil || len(files) == 0 {
		return 0, 0, err
	}
	var total int64
	for _, f := range files {
		total += f.size
	}
	pos := offset
	if origin == LogOriginEnd {
		pos = total - offset
	}
	pos = max(0, min(pos, total))
	for i, f := range files {
		if pos < f.size || i == len(files)-1 {
			return f.index, min(pos, f.size), nil
		}
		pos -= f.size
	}
	return 0, 0, nil // unreachable: files is not empty
}

func (s *logStream) copy(ctx context.Context, origin string, offset int64, follow bool, w io.Writer) error {
	cur, off, err := s.seek(origin, offset)
	if err != nil {
		return fmt.Errorf("read logs: %w", err)
	}
	var ticker *time.Ticker
	if follow {
		ticker = time.NewTicker(s.poll)
		defer ticker.Stop()
	}
	for {
		// Sampled before reading: if the task was dead already, whatever
		// it wrote is in the file now, and one empty read proves the log
		// drained.
		wasDead := follow && s.dead()
		n, exists, err := copyFileFrom(s.path(cur), off, w)
		off += n
		if err != nil {
			return err
		}
		next, ok := s.next(cur, exists)
		if ok && exists {
			// A later file exists, so cur is complete; what the writer
			// added to it since the read above is still to be copied.
			m, _, err := copyFileFrom(s.path(cur), off, w)
			n += m
			if err != nil {
				return err
			}
		}
		if n > 0 {
			if f, ok := w.(interface{ Flush() }); ok {
				f.Flush()
			}
		}
		if ok {
			cur, off = next, 0
			continue
		}
		if !follow || (n == 0 && wasDead) {
			return nil
		}
		if n > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.stop:
			return nil
		case <-ticker.C:
		}
	}
}

// next returns the file that follows cur in the stream, if one exists.
// Usually that is cur+1; when cur itself is gone (a reader that fell
// behind the rotation, which deleted it) it is the oldest file after cur.
func (s *logStream) next(cur int, curExists bool) (int, bool) {
	if _, err := os.Stat(s.path(cur + 1)); err == nil {
		return cur + 1, true
	}
	if curExists {
		return 0, false
	}
	files, err := s.files()
	if err != nil {
		return 0, false
	}
	for _, f := range files {
		if f.index > cur {
			return f.index, true
		}
	}
	return 0, false
}

// copyFileFrom copies path from off to its current end. A missing file is
// empty: the task may not have written yet.
func copyFileFrom(path string, off int64, w io.Writer) (n int64, exists bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read logs: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, true, fmt.Errorf("read logs: %w", err)
	}
	n, err = io.Copy(w, f)
	if err != nil {
		return n, true, fmt.Errorf("write logs: %w", err)
	}
	return n, true, nil
}
