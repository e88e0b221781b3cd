// Package raftstore sets up what Raft keeps on disk and how fast it times
// out: the bbolt log store (checked before it is opened, so a damaged file
// stops the server instead of crashing it or starting an empty cluster)
// and the timers scaled by raft_multiplier. It knows nothing of the
// server: the server passes a path and a raft.Config and gets a store or
// an error of kind structs.ErrInvalid back.
package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/drover-org/drover/core/structs"
)

// LockWait bounds the wait for raft.db's file lock. Another agent on
// the same data dir holds it for as long as it runs, so waiting longer only
// hides that mistake.
const LockWait = 5 * time.Second

// Open checks the Raft log store at path (see Check) and opens it for
// writing, waiting at most LockWait for its file lock. A missing file is
// created: a first start.
func Open(path string) (*raftboltdb.BoltStore, error) {
	if err := Check(path); err != nil {
		return nil, err
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{Timeout: LockWait}})
	if err != nil {
		return nil, fmt.Errorf("raft log store %s: %w", path, err)
	}
	return bolt, nil
}

// Check makes sure the Raft log store at path can be opened safely
// before the server opens it for writing. bbolt trusts its file: a
// truncated or damaged one makes it fault (SIGBUS/SIGSEGV, which kill the
// process outright) or panic, and an empty one is silently initialised as a
// new database, which bootstraps a new, empty cluster and so loses every
// job. Neither may happen: the server refuses to start instead and says
// what to do. A missing file is a first start and is fine.
//
// The check reads only: the file is opened read-only and nothing is
// written, so the operator can still copy it away or repair it.
func Check(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("raft log store %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return badRaftDB(path, "is not a regular file")
	}
	if fi.Size() == 0 {
		return badRaftDB(path, "is empty (0 bytes), which a server's log store never is: it was truncated or its creation was cut short")
	}
	if err := checkBoltLayout(path, fi.Size()); err != nil {
		return badRaftDB(path, "is corrupted: "+err.Error())
	}
	if err := scanBolt(path); err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			return structs.NewError(structs.ErrInvalid,
				"raft log store %s is locked by another process: is another drover agent running with data_dir %s?",
				path, filepath.Dir(filepath.Dir(filepath.Dir(path))))
		}
		return badRaftDB(path, "is corrupted: "+err.Error())
	}
	return nil
}

func badRaftDB(path, what string) error {
	dir := filepath.Dir(path)
	return structs.NewError(structs.ErrInvalid,
		"raft log store %s %s; refusing to start, since opening it would crash the server or start an empty cluster "+
			"and lose every job. The file was left untouched. If other servers of this cluster are healthy, remove %s "+
			"(and the snapshots in %s) and join this server to them again to re-replicate; on a lone server restore %s "+
			"from a backup, or remove the directory %s to start over with an empty state",
		path, what, path, filepath.Join(dir, "snapshots"), path, dir)
}

// bbolt's on-disk layout (go.etcd.io/bbolt, file format version 2): every
// page starts with a 16-byte header (id u64, flags u16, count u16, overflow
// u32); pages 0 and 1 hold the meta record, whose fields are read below.
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltPageHeader   = 16
	boltMetaSize     = 64 // through the checksum
	boltMetaSummed   = 56 // the checksum covers the bytes before it
	boltFreelistFlag = 0x10
	boltNoFreelist   = ^uint64(0)
)

type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // high-water mark: pages [0, pgid) are in use
	txid     uint64
}

// checkBoltLayout checks what bbolt reads without bounds checks when it
// opens a file: a valid meta page, a file long enough for every page the
// meta says is in use, and a freelist that fits its page. bbolt itself
// checks only the meta's checksum.
func checkBoltLayout(path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	read := func(off int64, n int) ([]byte, error) {
		if off < 0 || off+int64(n) > size {
			return nil, fmt.Errorf("the file ends at byte %d, before byte %d", size, off+int64(n))
		}
		b := make([]byte, n)
		_, err := f.ReadAt(b, off)
		return b, err
	}
	first, err := read(0, boltPageHeader+boltMetaSize)
	if err != nil {
		return err
	}
	m0, err0 := parseBoltMeta(first[boltPageHeader:])
	pageSize := int64(os.Getpagesize())
	if err0 == nil {
		pageSize = int64(m0.pageSize)
	}
	var m1 boltMeta
	second, err1 := read(pageSize, boltPageHeader+boltMetaSize)
	if err1 == nil {
		m1, err1 = parseBoltMeta(second[boltPageHeader:])
	}
	meta := m0
	switch {
	case err0 != nil && err1 != nil:
		return fmt.Errorf("no valid meta page (page 0: %v; page 1: %v)", err0, err1)
	case err0 != nil || (err1 == nil && m1.txid > m0.txid):
		meta = m1 // bbolt uses the valid meta of the latest transaction
	}
	ps := int64(meta.pageSize)
	if meta.pgid < 4 || meta.root < 2 || meta.root >= meta.pgid {
		return fmt.Errorf("meta page names page %d as root of %d pages", meta.root, meta.pgid)
	}
	if need := int64(meta.pgid) * ps; size < need {
		return fmt.Errorf("the file is %d bytes but its %d pages of %d bytes need %d: it was truncated", size, meta.pgid, ps, need)
	}
	if meta.freelist == boltNoFreelist {
		return nil
	}
	if meta.freelist < 2 || meta.freelist >= meta.pgid {
		return fmt.Errorf("meta page names page %d as freelist of %d pages", meta.freelist, meta.pgid)
	}
	hdr, err := read(int64(meta.freelist)*ps, boltPageHeader+8)
	if err != nil {
		return err
	}
	if flags := binary.LittleEndian.Uint16(hdr[8:]); flags != boltFreelistFlag {
		return fmt.Errorf("freelist page %d has page flags %#x", meta.freelist, flags)
	}
	count := uint64(binary.LittleEndian.Uint16(hdr[10:]))
	ids := int64(boltPageHeader)
	if count == 0xFFFF { // the real count is the first element
		count = binary.LittleEndian.Uint64(hdr[boltPageHeader:])
		ids += 8
	}
	overflow := int64(binary.LittleEndian.Uint32(hdr[12:]))
	if int64(meta.freelist)+overflow >= int64(meta.pgid) || count > uint64((overflow+1)*ps) ||
		ids+int64(count)*8 > (overflow+1)*ps {
		return fmt.Errorf("freelist page %d lists %d pages, more than it holds", meta.freelist, count)
	}
	return nil
}

func parseBoltMeta(b []byte) (boltMeta, error) {
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != boltMagic {
		return boltMeta{}, errors.New("not a bbolt database (bad magic)")
	}
	if v := le.Uint32(b[4:]); v != boltVersion {
		return boltMeta{}, fmt.Errorf("bbolt file format version %d, want %d", v, boltVersion)
	}
	h := fnv.New64a()
	_, _ = h.Write(b[:boltMetaSummed])
	if h.Sum64() != le.Uint64(b[boltMetaSummed:]) {
		return boltMeta{}, errors.New("meta page checksum mismatch")
	}
	m := boltMeta{pageSize: le.Uint32(b[8:]), root: le.Uint64(b[16:]), freelist: le.Uint64(b[32:]),
		pgid: le.Uint64(b[40:]), txid: le.Uint64(b[48:])}
	if m.pageSize < 512 || m.pageSize&(m.pageSize-1) != 0 {
		return boltMeta{}, fmt.Errorf("invalid page size %d", m.pageSize)
	}
	return m, nil
}

// scanBolt opens the file read-only and reads every key and value of every
// bucket, which walks every page of the tree. bbolt panics on a damaged
// page, and a page pointer gone astray faults; both are turned into an
// error here (SetPanicOnFault makes a fault a recoverable panic in this
// goroutine), and the read-only transaction and file are released.
func scanBolt(path string) (err error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: LockWait})
	if err != nil {
		return err
	}
	defer db.Close()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading it failed: %v", r)
		}
	}()
	return db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error { return scanBucket(b) })
	})
}

func scanBucket(b *bbolt.Bucket) error {
	var sum byte
	err := b.ForEach(func(k, v []byte) error {
		for _, c := range k {
			sum ^= c
		}
		if v == nil {
			if nested := b.Bucket(k); nested != nil {
				return scanBucket(nested)
			}
			return nil
		}
		for _, c := range v {
			sum ^= c
		}
		return nil
	})
	// The reads are the point (they fault on a bad page); the sink keeps
	// the compiler from dropping them.
	scanSink.Add(uint32(sum))
	return err
}

var scanSink atomic.Uint32
