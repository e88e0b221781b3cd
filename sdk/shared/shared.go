// Package shared holds what every drover plugin kind has in common: the
// go-plugin handshake, the plugin kind names and the gRPC options that both
// sides of a plugin connection use.
package shared

import (
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// ProtocolVersion is the plugin protocol version. Bump it on any
// incompatible change to a .proto file in sdk/proto.
const ProtocolVersion = 1

// Handshake is the go-plugin handshake every drover plugin serves. The magic
// cookie only guards against running a plugin binary by hand; it is not a
// security feature.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "DROVER_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "5f0c9a2e-drover-plugin",
}

// Plugin kinds. A kind is also the key of the plugin in go-plugin's plugin
// map, so one binary may serve several kinds.
const (
	KindScheduler = "scheduler"
	KindDriver    = "driver"
	KindCSIBridge = "csi-bridge"
	KindGC        = "gc"
)

// MaxMessageBytes bounds one gRPC message in either direction. A scheduling
// request for 10,000+ nodes is several megabytes, well past gRPC's 4 MiB
// default.
const MaxMessageBytes = 512 << 20

// ServerOptions are the gRPC server options a plugin serves with.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
	}
}

// DialOptions are the gRPC dial options the host connects to a plugin with.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(MaxMessageBytes),
			grpc.MaxCallSendMsgSize(MaxMessageBytes),
		),
	}
}
