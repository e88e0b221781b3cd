package nodesched

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// AllocID derives the ID of a new allocation from what makes it unique in
// one scheduling attempt: the eval, the attempt number, the node and the
// allocation name. The same request therefore always yields the same plan,
// which golden tests and replays rely on, while a retried attempt (whose
// earlier plan may have partly committed) never reuses an ID.
//
// The result is formatted as an RFC 9562 version-8 (custom) UUID so that
// tools expecting UUIDs accept it.
func AllocID(evalID string, attempt int32, nodeID, name string) string {
	id, _ := appendAllocID(nil, evalID, attempt, nodeID, name)
	return id
}

// appendAllocID is AllocID with a reusable scratch buffer.
func appendAllocID(buf []byte, evalID string, attempt int32, nodeID, name string) (string, []byte) {
	// Length prefixes keep ("ab","c") and ("a","bc") apart.
	for _, s := range [...]string{evalID, nodeID, name} {
		buf = strconv.AppendInt(buf, int64(len(s)), 10)
		buf = append(buf, ':')
		buf = append(buf, s...)
	}
	buf = strconv.AppendInt(buf, int64(attempt), 10)
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
