package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/drover-org/drover/core/structs"
)

// msgpackHandle encodes Raft entries. MessagePack is several times faster
// than JSON for the large plan results of system and sysbatch jobs (one
// allocation per node), which sit on the hot path of every eval. Maps decode
// as map[string]any so task configs read back as they were written. The
// depth bound is the one the RPC decoder shares, so that nothing the
// server accepts is deeper than what this decoder reads back.
var msgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.MapType = reflect.TypeOf(map[string]any(nil))
	h.RawToString = true
	h.WriteExt = true
	h.TimeNotBuiltin = false
	h.MaxDepth = structs.MaxDecodeDepth
	return h
}()

func marshal(v any) ([]byte, error) {
	var out []byte
	err := codec.NewEncoderBytes(&out, msgpackHandle).Encode(v)
	return out, err
}

func unmarshal(b []byte, v any) error {
	return codec.NewDecoderBytes(b, msgpackHandle).Decode(v)
}

// The log entry envelope. An entry as drover writes it since format 1:
//
//	byte 0     entryMarker (0x7e)
//	byte 1     entryFormat (1)
//	bytes 2-5  CRC-32C (Castagnoli) of bytes 6.., big-endian
//	byte 6     the message type (structs.MessageType)
//	bytes 7..  the MessagePack of the request
//
// Older drover wrote the type byte and the MessagePack alone (the legacy
// format), and those entries still apply: a log written before an upgrade
// is replayed after it. The marker tells the two apart: no version of
// drover ever wrote 0x7e as a type (the highest type is 80, and the flag
// IgnoreUnknownTypeFlag is the high bit), and an older FSM meeting a
// checksummed entry sees an unknown type without the ignore flag and stops
// rather than skip it. The marker with that flag set (0xff, one flipped
// bit away) is refused too, never ignored as a newer server's optional
// entry: it can only be a damaged checksummed entry.
//
// A single bit flip of the marker lands on a type no drover defines (0x7f,
// 0x7c, 0x7a, 0x76, 0x6e, 0x5e, 0x3e), so a damaged marker stops the FSM
// as an unknown type; damage anywhere else fails the checksum. (Tests use
// 0x7f as the unknown type that stops a server.) A new message type must
// not take 0x7e.
const (
	entryMarker     byte = 0x7e
	entryFormat     byte = 1
	entryHeaderSize      = 6 // marker, format, CRC-32C
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errChecksum marks an entry whose checksum does not match its bytes.
var errChecksum = errors.New("checksum mismatch")

// seal fills in the envelope's header of entry, whose first
// entryHeaderSize bytes are reserved for it and whose rest is the body
// (type byte, then MessagePack). Writing in place spares a copy of what
// can be a large plan result.
func seal(entry []byte) {
	entry[0], entry[1] = entryMarker, entryFormat
	binary.BigEndian.PutUint32(entry[2:6], crc32.Checksum(entry[entryHeaderSize:], castagnoli))
}

// open returns an entry's body (type byte, then MessagePack), checking
// the checksum of an enveloped entry. A legacy entry is returned as is.
// The error says what is wrong with the envelope; the caller names the
// entry (its Raft index).
func open(buf []byte) ([]byte, error) {
	if len(buf) == 0 {
		return buf, nil
	}
	switch buf[0] {
	case entryMarker:
	case entryMarker | byte(structs.IgnoreUnknownTypeFlag):
		return nil, fmt.Errorf("damaged entry marker 0x%02x (0x%02x with a flipped bit)", buf[0], entryMarker)
	default:
		return buf, nil
	}
	if len(buf) < entryHeaderSize+1 {
		return nil, fmt.Errorf("entry of %d bytes is shorter than its %d-byte header and type", len(buf), entryHeaderSize)
	}
	if buf[1] != entryFormat {
		return nil, fmt.Errorf("unknown entry format %d (this drover reads format %d)", buf[1], entryFormat)
	}
	body := buf[entryHeaderSize:]
	want := binary.BigEndian.Uint32(buf[2:6])
	if got := crc32.Checksum(body, castagnoli); got != want {
		return nil, fmt.Errorf("%w: the entry's CRC-32C is %08x, its %d bytes hash to %08x; "+
			"the log entry was altered after it was written", errChecksum, want, len(body), got)
	}
	return body, nil
}

// entryType is the message type of an entry that applied (so its envelope
// is sound), for the event stream.
func entryType(buf []byte) (structs.MessageType, bool) {
	body, err := open(buf)
	if err != nil || len(body) == 0 {
		return 0, false
	}
	return structs.MessageType(body[0]), true
}
