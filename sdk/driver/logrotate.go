package driver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/drover-org/drover/sdk/safefs"
)

// RotatingLog writes one log stream the way the client reads task logs
// (TaskConfig.log_rotation in driver.proto): to <base>.<n>, where a file
// never grows past maxSize (a write that would cross the limit is split)
// and only the newest maxFiles files are kept. Files are never renamed,
// so a reader that follows <base>.<n> and then <base>.<n+1> reads the
// stream in order. One writer owns a stream; it is not safe for
// concurrent use.
//
// The log directory is the allocation's alloc/logs, which its tasks can
// write to: a task may plant a symlink, a FIFO or a hard link where the
// writer will open its next file. Every file is therefore opened beneath
// the directory without following a symlink (sdk/safefs), a new file
// replaces whatever entry stands at its name (the entry, never what it
// points to) and is created exclusively, and the file a writer resumes
// must be a regular file with a single link.
type RotatingLog struct {
	dir      *safefs.Dir // the log directory, held open
	prefix   string      // "<task>.<stream>."
	maxFiles int
	maxSize  int64

	f    *os.File // nil after a failed rotation: the next write retries it
	idx  int
	size int64
}

// OpenRotatingLog resumes the stream at its newest file, as a restarted
// task appends to the log of its earlier runs. base's directory is
// trusted (opened by path); when a task can replace that directory, use
// OpenRotatingLogIn with a directory the task cannot write, such as the
// allocation directory.
func OpenRotatingLog(base string, maxFiles int, maxSize int64) (*RotatingLog, error) {
	if err := checkRotation(maxFiles, maxSize); err != nil {
		return nil, err
	}
	dir, err := safefs.Open(filepath.Dir(base))
	if err != nil {
		return nil, fmt.Errorf("open task log: %w", err)
	}
	defer dir.Close()
	return OpenRotatingLogIn(dir, filepath.Base(base), maxFiles, maxSize)
}

// OpenRotatingLogIn is OpenRotatingLog for the stream whose base path is
// rel, relative to root (say "alloc/logs/web.stdout" beneath the
// allocation directory): no component of rel may be a symlink. The log's
// directory is held open until Close, so root may be closed at once.
func OpenRotatingLogIn(root *safefs.Dir, rel string, maxFiles int, maxSize int64) (*RotatingLog, error) {
	if err := checkRotation(maxFiles, maxSize); err != nil {
		return nil, err
	}
	d, base := filepath.Split(rel)
	if base == "" || base == "." || base == ".." {
		return nil, fmt.Errorf("open task log: %q is not a file name", rel)
	}
	dir, err := root.OpenDir(d)
	if err != nil {
		return nil, fmt.Errorf("open task log: %w", err)
	}
	r := &RotatingLog{dir: dir, prefix: base + ".", maxFiles: maxFiles, maxSize: maxSize}
	idxs, err := r.indices()
	if err != nil {
		_ = dir.Close()
		return nil, err
	}
	if len(idxs) > 0 {
		r.idx = idxs[len(idxs)-1]
		err = r.resume()
	} else {
		err = r.create()
	}
	if err != nil {
		_ = dir.Close()
		return nil, err
	}
	r.purge()
	return r, nil
}

func checkRotation(maxFiles int, maxSize int64) error {
	if maxFiles < 1 || maxSize < 1 {
		return fmt.Errorf("log rotation needs max_files and max_file_size of at least 1, got %d and %d", maxFiles, maxSize)
	}
	return nil
}

func (r *RotatingLog) name(idx int) string { return r.prefix + strconv.Itoa(idx) }

// indices lists the stream's existing file numbers, ascending, whatever
// the entries are (a planted link is replaced when its number comes).
func (r *RotatingLog) indices() ([]int, error) {
	entries, err := r.dir.ReadDir(".")
	if err != nil {
		return nil, fmt.Errorf("open task log: %w", err)
	}
	var out []int
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, r.prefix) {
			continue
		}
		n, err := strconv.Atoi(name[len(r.prefix):])
		if err != nil || n < 0 || strconv.Itoa(n) != name[len(r.prefix):] {
			continue
		}
		out = append(out, n)
	}
	// ReadDir sorts by name, which is not numeric order.
	sort.Ints(out)
	return out, nil
}

// resume appends to the file r.idx. One that is not a regular file of a
// single link (a task's symlink, FIFO or hard link) is not appended to:
// it is replaced by a new file.
func (r *RotatingLog) resume() error {
	f, err := r.dir.OpenFile(r.name(r.idx), os.O_WRONLY|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, safefs.ErrUnsafePath) {
		return r.create()
	}
	if err != nil {
		return fmt.Errorf("open task log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("open task log: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
		_ = f.Close()
		return r.create()
	}
	r.f, r.size = f, fi.Size()
	return nil
}

// create starts the file r.idx empty: whatever entry has its name could
// only be a leftover of a stream that was cut short, or planted, so it is
// removed (never followed) and the file created exclusively. A task that
// plants another entry in between makes the creation fail; it is retried
// at the next write.
func (r *RotatingLog) create() error {
	name := r.name(r.idx)
	if err := r.dir.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("open task log: %w", err)
	}
	f, err := r.dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("open task log: %w", err)
	}
	r.f, r.size = f, 0
	return nil
}

// Write implements io.Writer.
func (r *RotatingLog) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if r.f == nil || r.size >= r.maxSize {
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

// rotate moves to the next file (or, after a failed rotation, tries the
// same one again).
func (r *RotatingLog) rotate() error {
	if r.f != nil {
		_ = r.f.Close()
		r.f = nil
		r.idx++
	}
	if err := r.create(); err != nil {
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
			_ = r.dir.Remove(r.name(n))
		}
	}
}

// Close closes the current file and the log directory.
func (r *RotatingLog) Close() error {
	var err error
	if r.f != nil {
		err = r.f.Close()
		r.f = nil
	}
	if cerr := r.dir.Close(); err == nil {
		err = cerr
	}
	return err
}
