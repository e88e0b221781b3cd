package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/state/persist"
)

// A snapshot as the FSM writes it: the state store's stream (state.Persist)
// cut into frames and sealed with a checksum, so that a snapshot altered on
// disk or on its way to a follower is refused before its state replaces
// the current one.
//
//	"DRVRFSMS"         magic (8 bytes; the state stream's own is "DRVRSNAP")
//	1                  format version
//	uvarint n, n bytes the snapshot's ID (the sink's), for errors
//	frames             uvarint n (1..snapFrameMax), then n bytes of the state stream
//	0                  the end
//	4 bytes            CRC-32C (Castagnoli), big-endian, of every byte before it
//
// A snapshot taken by an older drover is the bare state stream (it starts
// with "DRVRSNAP") and still restores, without a check.
const (
	snapMagic     = "DRVRFSMS"
	snapVersion   = 1
	snapIDMax     = 256
	snapFrameMax  = 4 << 20
	snapChunkSize = 256 << 10
)

// ErrSnapshotChecksum is returned by Restore for a snapshot whose bytes do
// not match the checksum it was written with.
var ErrSnapshotChecksum = errors.New("snapshot checksum mismatch")

// Snapshot captures the state for Raft. It only takes a memdb snapshot (a
// pointer copy); the encoding happens in Persist, concurrently with Apply.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.Failed(); err != nil {
		// Raft would record the snapshot at its last applied index, past
		// the entry that failed, and the restart would skip it.
		return nil, err
	}
	snap, err := f.State().Snapshot()
	if err != nil {
		return nil, err
	}
	return &fsmSnapshot{snap: snap}, nil
}

type fsmSnapshot struct{ snap *state.StateSnapshot }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	fw, err := newFrameWriter(sink, sink.ID())
	if err == nil {
		err = s.snap.Persist(fw)
	}
	if err == nil {
		err = fw.close()
	}
	if err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

// Restore replaces the state with a snapshot's. The snapshot is loaded into
// a fresh store, its checksum verified, and only then swapped in; the old
// store is abandoned, which wakes its blocking queries so that they
// continue on the new one. A snapshot that fails its checksum leaves the
// state as it was.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	br := bufio.NewReaderSize(rc, snapChunkSize)
	var src io.Reader = br
	var fr *frameReader
	if head, _ := br.Peek(len(snapMagic)); string(head) == snapMagic {
		var err error
		if fr, err = newFrameReader(br); err != nil {
			return fmt.Errorf("fsm: restore: %w", err)
		}
		src = fr
	}
	fresh, err := state.NewStateStore()
	if err != nil {
		return err
	}
	err = fresh.Restore(src)
	if fr != nil {
		// The state decoder stops at its end record; what follows up to
		// the checksum is read here. A checksum failure is the error to
		// report even when the damage also made the decoder fail.
		if cerr := fr.finish(); cerr != nil {
			return fmt.Errorf("fsm: restore snapshot %q: %w; the current state is kept", fr.id, cerr)
		}
	}
	if err != nil {
		return fmt.Errorf("fsm: restore: %w", err)
	}
	f.stream.attach(fresh)
	old := f.state.Swap(fresh)
	old.Abandon(fresh)
	f.logger.Info("restored state from snapshot", "index", fresh.LatestIndex())
	return nil
}

// frameWriter writes the framed, checksummed snapshot.
type frameWriter struct {
	w   io.Writer
	crc uint32
	n   [binary.MaxVarintLen64]byte
}

func newFrameWriter(w io.Writer, id string) (*frameWriter, error) {
	if len(id) > snapIDMax {
		id = id[:snapIDMax]
	}
	fw := &frameWriter{w: w}
	head := append([]byte(snapMagic), snapVersion)
	head = binary.AppendUvarint(head, uint64(len(id)))
	head = append(head, id...)
	return fw, fw.raw(head)
}

func (fw *frameWriter) raw(p []byte) error {
	fw.crc = crc32.Update(fw.crc, castagnoli, p)
	_, err := fw.w.Write(p)
	return err
}

// Write writes p as one or more frames.
func (fw *frameWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), snapFrameMax)]
		n := binary.PutUvarint(fw.n[:], uint64(len(chunk)))
		if err := fw.raw(fw.n[:n]); err != nil {
			return written, err
		}
		if err := fw.raw(chunk); err != nil {
			return written, err
		}
		written += len(chunk)
		p = p[len(chunk):]
	}
	return written, nil
}

// close writes the end frame and the checksum.
func (fw *frameWriter) close() error {
	if err := fw.raw([]byte{0}); err != nil {
		return err
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], fw.crc)
	_, err := fw.w.Write(sum[:])
	return err
}

// frameReader reads the frames back as the state stream, hashing every
// byte; at the end frame it compares the checksum, and returns io.EOF only
// when it matches.
type frameReader struct {
	r    *bufio.Reader
	id   string
	crc  uint32
	left int   // bytes left in the current frame
	err  error // sticky: io.EOF after a sound end, or what went wrong
}

func newFrameReader(r *bufio.Reader) (*frameReader, error) {
	fr := &frameReader{r: r}
	head := make([]byte, len(snapMagic)+1)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, fmt.Errorf("reading snapshot header: %w", err)
	}
	fr.crc = crc32.Update(0, castagnoli, head)
	if v := head[len(snapMagic)]; v != snapVersion {
		return nil, fmt.Errorf("unknown snapshot format %d (this drover reads format %d)", v, snapVersion)
	}
	n, err := fr.uvarint()
	if err != nil {
		return nil, fmt.Errorf("reading snapshot header: %w", err)
	}
	if n > snapIDMax {
		return nil, fmt.Errorf("snapshot header names an ID of %d bytes, more than %d: the header is damaged", n, snapIDMax)
	}
	id := make([]byte, n)
	if _, err := io.ReadFull(r, id); err != nil {
		return nil, fmt.Errorf("reading snapshot header: %w", err)
	}
	fr.crc = crc32.Update(fr.crc, castagnoli, id)
	fr.id = string(id)
	return fr, nil
}

func (fr *frameReader) uvarint() (uint64, error) {
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		b, err := fr.r.ReadByte()
		if err != nil {
			return 0, err
		}
		fr.crc = crc32.Update(fr.crc, castagnoli, []byte{b})
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return x, nil
		}
	}
	return 0, errors.New("frame length overflows")
}

func (fr *frameReader) Read(p []byte) (int, error) {
	if fr.err != nil {
		return 0, fr.err
	}
	if fr.left == 0 {
		n, err := fr.uvarint()
		switch {
		case err != nil:
			return 0, fr.fail(err)
		case n > snapFrameMax:
			return 0, fr.fail(fmt.Errorf("%w: a frame of %d bytes, more than %d: the snapshot is damaged", ErrSnapshotChecksum, n, snapFrameMax))
		case n == 0:
			return 0, fr.end()
		}
		fr.left = int(n)
	}
	n, err := fr.r.Read(p[:min(len(p), fr.left)])
	fr.crc = crc32.Update(fr.crc, castagnoli, p[:n])
	fr.left -= n
	if err != nil {
		return n, fr.fail(err)
	}
	return n, nil
}

// end checks the checksum after the end frame.
func (fr *frameReader) end() error {
	var sum [4]byte
	if _, err := io.ReadFull(fr.r, sum[:]); err != nil {
		return fr.fail(err)
	}
	if want := binary.BigEndian.Uint32(sum[:]); want != fr.crc {
		fr.err = fmt.Errorf("%w: the snapshot's CRC-32C is %08x, its bytes hash to %08x", ErrSnapshotChecksum, want, fr.crc)
		return fr.err
	}
	fr.err = io.EOF
	return fr.err
}

func (fr *frameReader) fail(err error) error {
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("snapshot cut short before its checksum: %w", io.ErrUnexpectedEOF)
	}
	fr.err = err
	return err
}

// finish reads what the state decoder left, through the checksum, and
// returns nil when the snapshot is sound.
func (fr *frameReader) finish() error {
	if _, err := io.Copy(io.Discard, fr); err != nil {
		return err
	}
	return nil
}

// WriteSnapshot writes snap in the FSM's snapshot format (framed, with its
// CRC-32C), as Persist does for Raft; backups (core/server) embed it.
func WriteSnapshot(w io.Writer, snap *state.StateSnapshot, id string) error {
	fw, err := newFrameWriter(w, id)
	if err != nil {
		return err
	}
	if err := snap.Persist(fw); err != nil {
		return err
	}
	return fw.close()
}

// ReadSnapshot decodes a snapshot in the FSM's format (or the bare state
// stream of an older drover) and hands each row to insert with its table,
// then checks the checksum. It changes no state: backups use it to count
// and verify a snapshot before anything is restored.
func ReadSnapshot(rc io.Reader, insert func(table string, obj any) error) error {
	br := bufio.NewReaderSize(rc, snapChunkSize)
	var src io.Reader = br
	var fr *frameReader
	if head, _ := br.Peek(len(snapMagic)); string(head) == snapMagic {
		var err error
		if fr, err = newFrameReader(br); err != nil {
			return err
		}
		src = fr
	}
	err := persist.Read(src, insert)
	if fr != nil {
		if cerr := fr.finish(); cerr != nil {
			return cerr
		}
	}
	return err
}

// VerifySnapshot loads a snapshot into a fresh, unshared store, exactly as
// Restore would, and discards it: nil means Restore will accept it.
func VerifySnapshot(r io.Reader) (uint64, error) {
	br := bufio.NewReaderSize(r, snapChunkSize)
	var src io.Reader = br
	var fr *frameReader
	if head, _ := br.Peek(len(snapMagic)); string(head) == snapMagic {
		var err error
		if fr, err = newFrameReader(br); err != nil {
			return 0, err
		}
		src = fr
	}
	fresh, err := state.NewStateStore()
	if err != nil {
		return 0, err
	}
	err = fresh.Restore(src)
	if fr != nil {
		if cerr := fr.finish(); cerr != nil {
			return 0, cerr
		}
	}
	if err != nil {
		return 0, err
	}
	return fresh.LatestIndex(), nil
}
