#!/bin/sh
# Regenerates the Python stubs in droverpb/ from drover's protocol
# (sdk/proto/scheduler.proto, base.proto) and the two protocols every
# go-plugin plugin serves (proto/health.proto, proto/goplugin.proto).
#
# It uses Debian's protoc (protobuf-compiler) and gRPC's Python generator
# (protobuf-compiler-grpc), the same releases as the python3-protobuf and
# python3-grpcio runtimes the plugin runs on, so the generated code matches
# its runtime. (Debian's python3-grpc-tools bundles protoc 3.5, too old for
# protobuf 3.21's Python runtime.) `make proto-python` runs it.
#
# Each file is compiled under the virtual directory droverpb/, so the
# generated code imports its siblings as droverpb.<name>_pb2 and the
# stubs form one package next to plugin.py.
set -eu
cd "$(dirname "$0")"
PROTOC=${PROTOC:-protoc}
GRPC_PYTHON_PLUGIN=${GRPC_PYTHON_PLUGIN:-$(command -v grpc_python_plugin || true)}
if [ -z "$GRPC_PYTHON_PLUGIN" ]; then
	echo "gen.sh: grpc_python_plugin not found: apt-get install protobuf-compiler-grpc" >&2
	exit 1
fi
rm -f droverpb/*_pb2.py droverpb/*_pb2_grpc.py
"$PROTOC" -Idroverpb=../../../sdk/proto -Idroverpb=proto \
	--python_out=. \
	--plugin=protoc-gen-grpc_python="$GRPC_PYTHON_PLUGIN" --grpc_python_out=. \
	droverpb/scheduler.proto droverpb/base.proto droverpb/health.proto droverpb/goplugin.proto
