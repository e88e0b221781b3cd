package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// RotatingLog writes one log stream the way the client reads task logs
// (TaskConfig.log_rotation in driver.proto): to <base>.<n>, where a file
// never grows past maxSize (a write that would cross the limit is split)
// and only the newest maxFiles files are kept. Files are never renamed,
// so a reader that follows <base>.<n> and then <base>.<n+1> reads the
// stream in order. One writer owns a stream; it is not safe for
// concurrent use.
type RotatingLog struct {
	base     string
	maxFiles int
	maxSize  int64

	f    *os.File
	idx  int
	size int64
}

// OpenRotatingLog resumes the stream at its newest file, as a restarted
// task appends to the log of its earlier runs.
func OpenRotatingLog(base string, maxFiles int, maxSize int64) (*RotatingLog, error) {
	if maxFiles < 1 || maxSize < 1 {
		return nil, fmt.Errorf("log rotation needs max_files and max_file_size of at least 1, got %d and %d", maxFiles, maxSize)
	}
	r := &RotatingLog{base: base, maxFiles: maxFiles, maxSize: maxSize}
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

func (r *RotatingLog) path(idx int) string { return r.base + "." + strconv.Itoa(idx) }

// indices lists the stream's existing file numbers, ascending.
func (r *RotatingLog) indices() ([]int, error) {
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

func (r *RotatingLog) open(mode int) error {
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
func (r *RotatingLog) Write(p []byte) (int, error) {
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
func (r *RotatingLog) rotate() error {
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
func (r *RotatingLog) purge() {
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

// Close closes the current file.
func (r *RotatingLog) Close() error { return r.f.Close() }
