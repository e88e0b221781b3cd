// Package derivedid derives the IDs a scheduler plugin gives the objects of
// its plan (allocations, follow-up evals) from what makes each unique, so
// that the same request always yields the same plan (golden tests and
// replays rely on it) and a retried attempt names what it names again.
package derivedid

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// Append derives an ID from parts and n, using buf as scratch space (its
// contents are overwritten), and returns the ID and the buffer for reuse.
// Each part is length-prefixed, so ("ab", "c") and ("a", "bc") differ.
//
// The result is formatted as an RFC 9562 version-8 (custom) UUID so that
// tools expecting UUIDs accept it.
func Append(buf []byte, n int64, parts ...string) (string, []byte) {
	buf = buf[:0]
	for _, s := range parts {
		buf = strconv.AppendInt(buf, int64(len(s)), 10)
		buf = append(buf, ':')
		buf = append(buf, s...)
	}
	buf = strconv.AppendInt(buf, n, 10)
	sum := sha256.Sum256(buf)
	sum[6] = sum[6]&0x0f | 0x80 // version 8
	sum[8] = sum[8]&0x3f | 0x80 // RFC 9562 variant

	var out [36]byte
	hex.Encode(out[0:8], sum[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], sum[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], sum[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], sum[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], sum[10:16])
	return string(out[:]), buf
}

// Of is Append without a buffer to reuse.
func Of(n int64, parts ...string) string {
	id, _ := Append(nil, n, parts...)
	return id
}
