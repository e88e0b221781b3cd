package rpc

import (
	"fmt"
	"reflect"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"google.golang.org/grpc/encoding"

	"github.com/drover-org/drover/core/structs"
)

// CodecName is the gRPC content subtype of drover's internal RPC
// ("application/grpc+drover-msgpack"). It is unique so that it can never
// shadow gRPC's own "proto" codec, which the plugin connections still use.
const CodecName = "drover-msgpack"

// msgpackHandle is configured exactly like the FSM's (core/fsm/codec.go):
// a struct that crosses RPC and is then written to the Raft log must encode
// the same way on both paths, and task configs must decode as
// map[string]any on either side. The depth bound is the FSM's too: a
// request deeper than the FSM could read back is refused here, at the edge.
var msgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.MapType = reflect.TypeOf(map[string]any(nil))
	h.RawToString = true
	h.WriteExt = true
	h.TimeNotBuiltin = false
	h.MaxDepth = structs.MaxDecodeDepth
	return h
}()

// Codec is a gRPC codec that carries any Go value as MessagePack. Internal
// RPC moves core/structs values as they are, so no .proto mirrors them and
// adding a field to a struct needs no regeneration step.
type Codec struct{}

var _ encoding.Codec = Codec{}

// Registration is global because gRPC looks codecs up by content subtype on
// the server side; the name is unique, so this cannot clash with another
// package's registration.
func init() { encoding.RegisterCodec(Codec{}) }

// Marshal encodes v.
func (Codec) Marshal(v any) ([]byte, error) {
	var out []byte
	if err := codec.NewEncoderBytes(&out, msgpackHandle).Encode(v); err != nil {
		return nil, fmt.Errorf("msgpack encode %T: %w", v, err)
	}
	return out, nil
}

// rawRequest receives a request's bytes undecoded. A server decodes its
// requests itself, after gRPC hands them over: gRPC answers a failure of
// the codec with a bare status of its own, which would lose the error's
// kind (a too-deep request is bad input, a 400 once forwarded from HTTP).
type rawRequest struct{ data []byte }

// Unmarshal decodes data into v, which must be a pointer.
func (Codec) Unmarshal(data []byte, v any) error {
	if raw, ok := v.(*rawRequest); ok {
		// gRPC may reuse data's buffer once Unmarshal returns.
		raw.data = append([]byte(nil), data...)
		return nil
	}
	return unmarshal(data, v)
}

func unmarshal(data []byte, v any) error {
	if err := codec.NewDecoderBytes(data, msgpackHandle).Decode(v); err != nil {
		return fmt.Errorf("msgpack decode %T (nesting limit MaxDecodeDepth: %d levels): %w", v, structs.MaxDecodeDepth, err)
	}
	return nil
}

// Name returns CodecName.
func (Codec) Name() string { return CodecName }
