package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/safefs"
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
	root, err := ar.dir.open()
	if errors.Is(err, os.ErrNotExist) {
		return nil // no alloc dir (yet, or any more): no logs
	}
	if err != nil {
		return logsErr(err)
	}
	defer root.Close()
	ls := &logStream{
		root:   root,
		dir:    filepath.Join(sharedDirName, logDirName),
		prefix: task + "." + logType + ".",
		dead:   tr.dead,
		poll:   c.cfg.LogPollInterval,
		stop:   c.ctx.Done(),
	}
	return ls.copy(ctx, origin, offset, follow, w)
}

// logsErr gives a refusal to read a task's log (a symlink, FIFO or hard
// link a task planted in its place) its kind: the client will not serve
// that file.
func logsErr(err error) error {
	if errors.Is(err, safefs.ErrUnsafePath) {
		return structs.NewError(structs.ErrPermissionDenied, "read logs: %v", err)
	}
	return fmt.Errorf("read logs: %w", err)
}

// logStream reads a rotated log (prefix + index) as one stream.
//
// The log directory is writable by the tasks, so every file is opened
// beneath the allocation directory root (trusted) without following a
// symlink, and only regular files of one link are read: a task that
// planted a link to a host file, a FIFO or a device in place of a log
// file gets a refusal naming it, never the host file's content, and the
// reader never blocks.
type logStream struct {
	root        *safefs.Dir
	dir, prefix string // dir is relative to root
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
	entries, err := s.root.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, logsErr(err)
	}
	var out []logFile
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, s.prefix) {
			continue
		}
		idx, err := strconv.Atoi(strings.TrimPrefix(name, s.prefix))
		if err != nil || idx < 0 {
			continue
		}
		if !e.Type().IsRegular() {
			return nil, logsErr(&fs.PathError{Op: "open", Path: filepath.Join(s.root.Name(), s.dir, name),
				Err: fmt.Errorf("%w: not a regular file", safefs.ErrUnsafePath)})
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

// rel is the file index's path relative to root.
func (s *logStream) rel(index int) string {
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
		return err
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
		n, exists, err := s.copyFrom(cur, off, w)
		off += n
		if err != nil {
			return err
		}
		next, ok := s.next(cur, exists)
		if ok && exists {
			// A later file exists, so cur is complete; what the writer
			// added to it since the read above is still to be copied.
			m, _, err := s.copyFrom(cur, off, w)
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
	if _, err := s.root.Lstat(s.rel(cur + 1)); err == nil {
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

// copyFrom copies the file index from off to its current end. A missing
// file is empty: the task may not have written yet.
func (s *logStream) copyFrom(index int, off int64, w io.Writer) (n int64, exists bool, err error) {
	f, err := s.root.Open(s.rel(index))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, logsErr(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, true, logsErr(err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink == 0 {
		// Rotation deleted it between the open and now: gone, as if the
		// open had not found it.
		return 0, false, nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		// A hard link to a file elsewhere: log files have one name.
		return 0, true, logsErr(&fs.PathError{Op: "open", Path: f.Name(), Err: fmt.Errorf("%w: has %d links", safefs.ErrUnsafePath, st.Nlink)})
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, true, logsErr(err)
	}
	n, err = io.Copy(w, f)
	if err != nil {
		return n, true, fmt.Errorf("write logs: %w", err)
	}
	return n, true, nil
}
