package rawexec

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// rotator writes one log stream to <base>.<n>: a file never grows past
// maxSize (a write that would cross the limit is split), and only the
// newest maxFiles files are kept. Files are never renamed, so a reader
// that follows <base>.<n> and then <base>.<n+1> reads the stream in order.
// It is used by the shim alone, which owns its task's streams.
type rotator struct {
	base     string
	maxFiles int
	maxSize  int64

	f    *os.File
	idx  int
	size int64
}

// openRotator resumes the stream at its newest file, as a restarted task
// appends to the log of its earlier runs.
func openRotator(base string, maxFiles int, maxSize int64) (*rotator, error) {
	if maxFiles < 1 || maxSize < 1 {
		return nil, fmt.Errorf("log rotation needs max_files and max_file_size of at least 1, got %d and %d", maxFiles, maxSize)
	}
	r := &rotator{base: base, maxFiles: maxFiles, maxSize: maxSize}
	idxs, err := r.indices()
	if err != nil {
		return nil, err
	}
	if len(idxs) > 0 {
		r.idx = idxs[len(idxs)-1]
	}
	if err := r.open(os.O_APPEND); err != nil {
		return nil, err
	}
	r.purge()
	return r, nil
}

func (r *rotator) path(idx int) string { return r.base + "." + strconv.Itoa(idx) }

// indices lists the stream's existing file numbers, ascending.
func (r *rotator) indices() ([]int, error) {
	dir, prefix := filepath.Dir(r.base), filepath.Base(r.base)+"."
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open task log: %w", err)
	}
	var out []int
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, prefix) {
			continue
		}
		n, err := strconv.Atoi(name[len(prefix):])
		if err != nil || n < 0 || strconv.Itoa(n) != name[len(prefix):] {
			continue
		}
		out = append(out, n)
	}
	// ReadDir sorts by name, which is not numeric order.
	sort.Ints(out)
	return out, nil
}

func (r *rotator) open(mode int) error {
	f, err := os.OpenFile(r.path(r.idx), os.O_WRONLY|os.O_CREATE|mode, 0o644)
	if err != nil {
		return fmt.Errorf("open task log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("open task log: %w", err)
	}
	r.f, r.size = f, fi.Size()
	return nil
}

// Write implements io.Writer.
func (r *rotator) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if r.size >= r.maxSize {
			if err := r.rotate(); err != nil {
				return written, err
			}
		}
		chunk := p[:min(int64(len(p)), r.maxSize-r.size)]
		n, err := r.f.Write(chunk)
		written += n
		r.size += int64(n)
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// rotate moves to the next file. It is created empty: a file with its
// number could only be a leftover of a stream that was cut short.
func (r *rotator) rotate() error {
	_ = r.f.Close()
	r.idx++
	if err := r.open(os.O_TRUNC); err != nil {
		return err
	}
	r.purge()
	return nil
}

// purge removes the files that fall out of the newest maxFiles. A removal
// that fails is retried at the next rotation.
func (r *rotator) purge() {
	idxs, err := r.indices()
	if err != nil {
		return
	}
	for _, n := range idxs {
		if n <= r.idx-r.maxFiles {
			_ = os.Remove(r.path(n))
		}
	}
}

func (r *rotator) Close() error { return r.f.Close() }

// logDrainTimeout bounds how long the shim reads a stream after the task's
// process group is gone: only a process that left the group can still
// hold the pipe open, and it must not keep the exit from being recorded.
const logDrainTimeout = 2 * time.Second

// logPump copies a task's output pipe into its log.
type logPump struct {
	r    *os.File // the pipe's read end
	w    io.WriteCloser
	done chan struct{}
}

func startLogPump(r *os.File, w io.WriteCloser) *logPump {
	p := &logPump{r: r, w: w, done: make(chan struct{})}
	go p.run()
	return p
}

// run reads until the pipe closes. It keeps reading when the log cannot be
// written (a full disk): a task blocked on a full pipe would hang instead.
func (p *logPump) run() {
	defer close(p.done)
	buf := make([]byte, 32*1024)
	for {
		n, err := p.r.Read(buf)
		if n > 0 {
			_, _ = p.w.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// finish waits for the pipe to drain, or cuts it off after timeout, then
// closes both ends.
func (p *logPump) finish(timeout time.Duration) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		_ = p.r.SetReadDeadline(time.Now())
		<-p.done
	}
	_ = p.r.Close()
	_ = p.w.Close()
}
