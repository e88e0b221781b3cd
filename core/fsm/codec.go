package fsm

import (
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
