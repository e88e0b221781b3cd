// Package snapshotfile is drover's backup file format: what GET
// /v1/operator/snapshot answers, `drover operator snapshot save` writes and
// PUT /v1/operator/snapshot takes back. It knows nothing of the state; the
// payload is the FSM's snapshot (core/fsm), which carries its own CRC-32C.
//
// Format 1 (docs/backups.md):
//
//	"DRVRBKUP"          magic, 8 bytes
//	1                   format version, 1 byte
//	uvarint n, n bytes  metadata, JSON (Meta), n <= MaxMetaSize
//	frames              uvarint n (1..MaxFrame), then n bytes of the payload
//	0                   end of the payload
//	32 bytes            SHA-256 of every byte before it
//
// Nothing may follow the checksum. A file is trusted only once Verify has
// read it to its end.
package snapshotfile

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"
)

const (
	Magic       = "DRVRBKUP"
	Version     = 1
	MaxMetaSize = 64 << 10
	MaxFrame    = 4 << 20
	chunk       = 256 << 10
)

// ErrCorrupt is the kind of every error about a damaged, truncated or
// foreign file.
var ErrCorrupt = errors.New("snapshot file is not a sound drover snapshot")

// Meta describes a snapshot; it is written before the payload.
type Meta struct {
	Format  int       // Version
	ID      string    // unique name of this snapshot
	Index   uint64    // the state's latest Raft index
	Term    uint64    // the Raft term when it was taken
	Region  string    // the cluster's region
	Created time.Time // when the server took it
	Drover  string    // the server's version
}

// Info is what Verify learns of a file.
type Info struct {
	Meta
	Size        int64  // bytes of the whole file
	PayloadSize int64  // bytes of the FSM snapshot inside
	SHA256      string // hex checksum stored in (and matching) the file
}

type countWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.h.Write(p)
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Write streams a snapshot file: meta, then payload read to its end.
func Write(w io.Writer, meta Meta, payload io.Reader) (Info, error) {
	meta.Format = Version
	mb, err := json.Marshal(meta)
	if err != nil {
		return Info{}, err
	}
	if len(mb) > MaxMetaSize {
		return Info{}, fmt.Errorf("snapshot metadata of %d bytes is more than %d", len(mb), MaxMetaSize)
	}
	cw := &countWriter{w: w, h: sha256.New()}
	head := append([]byte(Magic), Version)
	head = binary.AppendUvarint(head, uint64(len(mb)))
	head = append(head, mb...)
	if _, err := cw.Write(head); err != nil {
		return Info{}, err
	}
	buf := make([]byte, chunk)
	var lenb [binary.MaxVarintLen64]byte
	var payloadSize int64
	for {
		n, rerr := io.ReadFull(payload, buf)
		if n > 0 {
			k := binary.PutUvarint(lenb[:], uint64(n))
			if _, err := cw.Write(lenb[:k]); err != nil {
				return Info{}, err
			}
			if _, err := cw.Write(buf[:n]); err != nil {
				return Info{}, err
			}
			payloadSize += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return Info{}, rerr
		}
	}
	if _, err := cw.Write([]byte{0}); err != nil {
		return Info{}, err
	}
	sum := cw.h.Sum(nil)
	if _, err := w.Write(sum); err != nil {
		return Info{}, err
	}
	return Info{Meta: meta, Size: cw.n + int64(len(sum)), PayloadSize: payloadSize, SHA256: hex.EncodeToString(sum)}, nil
}

type hashReader struct {
	r *bufio.Reader
	h hash.Hash
	n int64
}

func (h *hashReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

func (h *hashReader) ReadByte() (byte, error) {
	b, err := h.r.ReadByte()
	if err == nil {
		h.h.Write([]byte{b})
		h.n++
	}
	return b, err
}

func corrupt(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, a...)...)
}

func cut(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt("the file is truncated (it ends in the %s)", what)
	}
	return fmt.Errorf("reading snapshot %s: %w", what, err)
}

// Verify reads a whole snapshot file from r, copies its payload to payload
// (which may be io.Discard) and checks the checksum and the framing.
// maxSize bounds the file (0: no bound). The payload written is to be
// trusted only when Verify returns nil.
func Verify(r io.Reader, payload io.Writer, maxSize int64) (Info, error) {
	if maxSize > 0 {
		r = io.LimitReader(r, maxSize+1)
	}
	hr := &hashReader{r: bufio.NewReaderSize(r, chunk), h: sha256.New()}
	head := make([]byte, len(Magic)+1)
	if _, err := io.ReadFull(hr, head); err != nil {
		return Info{}, cut("header", err)
	}
	if string(head[:len(Magic)]) != Magic {
		return Info{}, corrupt("it does not start with %q (not a drover snapshot file)", Magic)
	}
	if v := head[len(Magic)]; v != Version {
		return Info{}, corrupt("format %d is unknown (this drover reads format %d)", v, Version)
	}
	n, err := binary.ReadUvarint(hr)
	if err != nil {
		return Info{}, cut("metadata", err)
	}
	if n > MaxMetaSize {
		return Info{}, corrupt("metadata of %d bytes is more than %d", n, MaxMetaSize)
	}
	mb := make([]byte, n)
	if _, err := io.ReadFull(hr, mb); err != nil {
		return Info{}, cut("metadata", err)
	}
	var info Info
	dec := json.NewDecoder(bytes.NewReader(mb))
	if err := dec.Decode(&info.Meta); err != nil {
		return Info{}, corrupt("metadata is not valid JSON: %v", err)
	}
	buf := make([]byte, chunk)
	for {
		n, err := binary.ReadUvarint(hr)
		if err != nil {
			return Info{}, cut("payload", err)
		}
		if n == 0 {
			break
		}
		if n > MaxFrame {
			return Info{}, corrupt("a payload frame of %d bytes is more than %d", n, MaxFrame)
		}
		for left := int64(n); left > 0; {
			k := min(left, int64(len(buf)))
			if _, err := io.ReadFull(hr, buf[:k]); err != nil {
				return Info{}, cut("payload", err)
			}
			if _, err := payload.Write(buf[:k]); err != nil {
				return Info{}, err
			}
			left -= k
			info.PayloadSize += k
		}
		if maxSize > 0 && hr.n > maxSize {
			return Info{}, corrupt("the file is larger than %d bytes", maxSize)
		}
	}
	want := hr.h.Sum(nil)
	got := make([]byte, sha256.Size)
	if _, err := io.ReadFull(hr.r, got); err != nil {
		return Info{}, cut("checksum", err)
	}
	if !bytes.Equal(got, want) {
		return Info{}, corrupt("SHA-256 mismatch: the file says %x, its content hashes to %x", got, want)
	}
	if _, err := hr.r.ReadByte(); err == nil {
		return Info{}, corrupt("bytes follow the checksum")
	} else if err != io.EOF {
		return Info{}, err
	}
	info.Size = hr.n + sha256.Size
	info.SHA256 = hex.EncodeToString(got)
	return info, nil
}
