package client

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// allocLogFile is the allocs' state log under Config.StateDir.
const allocLogFile = "allocs.log"

// compactMinBytes is the log size below which it is never rewritten: a
// small log costs little to read at a restart whatever its garbage.
const compactMinBytes = 1 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// allocLog is the allocs' durable state: an append-only file of records,
// each an alloc's whole state (or its deletion), the last one of an alloc
// winning. A record is framed by its length and CRC, so that a crash in
// the middle of an append leaves a torn tail that the next open drops,
// never a record that reads as valid.
//
// put returns once its record is on disk. Writers that arrive while an
// fsync is in flight join the next batch, written with one write and one
// fsync (a group commit): under a burst of allocs, one fsync carries many
// task state changes, and no write creates a file.
//
// The log is rewritten (to a temporary file, fsynced, then renamed over
// it) when garbage outweighs the live states, after a failed append (the
// file may then end in a partial record, and later appends must not
// follow it), and on first use.
type allocLog struct {
	dir, path string

	mu   sync.Mutex
	cond *sync.Cond
	// f is the log open for appends; nil until the first write and after
	// close.
	f    *os.File
	size int64 // bytes in the file
	// latest is each live alloc's last record; liveBytes their total
	// size.
	latest    map[string]logEntry
	liveBytes int64
	cur       *logBatch // the batch accumulating records
	flushing  bool      // a batch is being written
	rewrite   bool      // the next flush rewrites the whole log
	// legacy is the directory of one-file-per-alloc states an older
	// client wrote, removed once the log holds its states.
	legacy string
}

// logEntry is an alloc's last record, framed, and the batch that writes
// it (nil when it was read from disk).
type logEntry struct {
	rec   []byte
	batch *logBatch
}

// durable reports whether the entry is on disk.
func (e logEntry) durable() bool {
	return e.batch == nil || (e.batch.done && e.batch.err == nil)
}

// logBatch is the records of one group commit and, once written, the
// outcome its writers return.
type logBatch struct {
	buf  []byte
	done bool
	err  error
}

// openAllocLog reads the log in dir (and the states of an older client's
// allocs directory), dropping a torn tail.
func openAllocLog(dir string) (*allocLog, error) {
	l := &allocLog{dir: dir, path: filepath.Join(dir, allocLogFile), latest: map[string]logEntry{}, cur: &logBatch{}}
	l.cond = sync.NewCond(&l.mu)
	// A rewrite that a crash interrupted leaves its temporary file.
	if tmps, err := filepath.Glob(filepath.Join(dir, "."+allocLogFile+".tmp*")); err == nil {
		for _, t := range tmps {
			_ = os.Remove(t)
		}
	}
	data, err := os.ReadFile(l.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		// The first write creates the file by a rewrite, whose rename
		// and directory fsync make its name durable.
		l.rewrite = true
	case err != nil:
		return nil, fmt.Errorf("read alloc state log: %w", err)
	default:
		valid := l.replay(data)
		l.size = int64(valid)
		if valid < len(data) {
			l.rewrite = true // a torn tail: appends must not follow it
		}
	}
	if err := l.readLegacy(filepath.Join(dir, allocsDir)); err != nil {
		return nil, err
	}
	return l, nil
}

// frame encodes a record: length, CRC, then the alloc ID's length, the ID
// and the state (empty for a deletion).
func frame(id string, state []byte) []byte {
	n := 2 + len(id) + len(state)
	b := make([]byte, 8, 8+n)
	binary.BigEndian.PutUint32(b[0:4], uint32(n))
	b = binary.BigEndian.AppendUint16(b, uint16(len(id)))
	b = append(b, id...)
	b = append(b, state...)
	binary.BigEndian.PutUint32(b[4:8], crc32.Checksum(b[8:], crcTable))
	return b
}

// unframe decodes the record at the start of data; ok is false for a torn
// or corrupt one.
func unframe(data []byte) (id string, state []byte, size int, ok bool) {
	if len(data) < 8 {
		return "", nil, 0, false
	}
	n := int(binary.BigEndian.Uint32(data[0:4]))
	if n < 2 || len(data)-8 < n {
		return "", nil, 0, false
	}
	body := data[8 : 8+n]
	if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(data[4:8]) {
		return "", nil, 0, false
	}
	idLen := int(binary.BigEndian.Uint16(body[0:2]))
	if 2+idLen > n || idLen == 0 {
		return "", nil, 0, false
	}
	return string(body[2 : 2+idLen]), body[2+idLen:], 8 + n, true
}

// replay applies data's records and returns the length of its valid
// prefix.
func (l *allocLog) replay(data []byte) int {
	off := 0
	for off < len(data) {
		id, state, size, ok := unframe(data[off:])
		if !ok {
			break
		}
		l.apply(id, bytes.Clone(state), nil, nil)
		off += size
	}
	return off
}

// apply makes state id's latest (nil or empty: deleted), rec its record
// when already framed, written by batch (nil: read from disk). Called with
// mu held, or before the log is shared.
func (l *allocLog) apply(id string, state, rec []byte, batch *logBatch) {
	if old, ok := l.latest[id]; ok {
		l.liveBytes -= int64(len(old.rec))
		delete(l.latest, id)
	}
	if len(state) > 0 {
		if rec == nil {
			rec = frame(id, state)
		}
		l.latest[id] = logEntry{rec: rec, batch: batch}
		l.liveBytes += int64(len(rec))
	}
}

// readLegacy loads the <allocID>.json files of an older client's state
// directory, for allocs the log does not hold (the log is newer).
func (l *allocLog) readLegacy(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read alloc state dir: %w", err)
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if e.IsDir() || !ok || id == "" || strings.HasPrefix(id, ".") {
			continue
		}
		if _, ok := l.latest[id]; ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || len(b) == 0 {
			continue // unreadable: as before, the alloc is not restored
		}
		l.apply(id, b, nil, nil)
	}
	l.legacy, l.rewrite = dir, true
	return nil
}

// live returns each live alloc's state.
func (l *allocLog) live() map[string][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string][]byte, len(l.latest))
	for id, e := range l.latest {
		_, state, _, _ := unframe(e.rec)
		out[id] = state
	}
	return out
}

// put records id's state (nil: its deletion) and returns once the record
// is on disk. A state equal to the alloc's last one, already on disk, is
// not written again: a runner persists at every change of what it
// reports, and some of them change nothing it keeps.
func (l *allocLog) put(id string, state []byte) error {
	return l.putAll(logPut{id: id, state: state})
}

// logPut is one record of a putAll.
type logPut struct {
	id    string
	state []byte
}

// putAll is put of several records, appended in order in one batch: a
// torn write keeps a prefix of them.
func (l *allocLog) putAll(puts ...logPut) error {
	recs := make([][]byte, len(puts))
	for i, p := range puts {
		recs[i] = frame(p.id, p.state)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.cur
	wrote := false
	for i, p := range puts {
		old, ok := l.latest[p.id]
		if ok && old.durable() && bytes.Equal(old.rec, recs[i]) {
			continue
		}
		l.apply(p.id, p.state, recs[i], b)
		b.buf = append(b.buf, recs[i]...)
		wrote = true
	}
	if !wrote {
		return nil
	}
	for !b.done {
		if l.flushing {
			l.cond.Wait()
			continue
		}
		// Not flushing and not done: b is still the accumulating batch.
		l.flush()
	}
	return b.err
}

// flush writes the accumulating batch, with mu held and no flush in
// flight; it releases mu while writing.
func (l *allocLog) flush() {
	b := l.cur
	l.cur = &logBatch{}
	l.flushing = true
	rewrite := l.rewrite || (l.size > compactMinBytes && l.size > 4*l.liveBytes)
	var all []byte
	if rewrite {
		all = make([]byte, 0, l.liveBytes)
		for _, e := range l.latest {
			all = append(all, e.rec...)
		}
	}
	l.mu.Unlock()
	var err error
	if rewrite {
		err = l.writeAll(all)
	} else {
		err = l.appendBatch(b.buf)
	}
	l.mu.Lock()
	switch {
	case rewrite && err == nil:
		l.size, l.rewrite = int64(len(all)), false
		if l.legacy != "" {
			_ = os.RemoveAll(l.legacy)
			l.legacy = ""
		}
	case err == nil:
		l.size += int64(len(b.buf))
	default:
		l.rewrite = true
	}
	b.done, b.err = true, err
	l.flushing = false
	l.cond.Broadcast()
}

// appendBatch appends buf to the log and fsyncs it.
func (l *allocLog) appendBatch(buf []byte) error {
	if l.f == nil {
		f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("open alloc state log: %w", err)
		}
		l.f = f
	}
	if _, err := l.f.Write(buf); err != nil {
		return fmt.Errorf("append alloc state: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("sync alloc state: %w", err)
	}
	return nil
}

// writeAll replaces the log with data: a crash leaves the old log or the
// new one, and the rename is durable when it returns.
func (l *allocLog) writeAll(data []byte) error {
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
	if err := writeFileAtomic(l.path, data); err != nil {
		return fmt.Errorf("rewrite alloc state log: %w", err)
	}
	d, err := os.Open(l.dir)
	if err != nil {
		return fmt.Errorf("sync state dir: %w", err)
	}
	defer d.Close()
	// Some file systems cannot fsync a directory (EINVAL): their
	// renames are as durable as they get.
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync state dir: %w", err)
	}
	return nil
}

// close releases the log's file once no flush is in flight.
func (l *allocLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.flushing {
		l.cond.Wait()
	}
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
