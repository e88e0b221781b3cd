#!/bin/sh
# Regenerates the Python stubs in droverpb/ from drover's protocol
# (sdk/proto/scheduler.proto, base.proto) and the two protocols every
# go-plugin plugin serves (proto/health.proto, proto/goplugin.proto).
# `make proto-python` runs it.
#
# It prefers Debian's protoc (protobuf-compiler, 3.21) with gRPC's Python
# generator (protobuf-compiler-grpc, 1.51): the same releases as the
# python3-protobuf and python3-grpcio runtimes the plugin runs on, so the
# generated code is in the runtime's current form. Without the generator
# it falls back to Debian's python3-grpc-tools, whose bundled protoc (3.5)
# writes an older form that the 3.21 runtime still loads.
#
# Each file is compiled under the virtual directory droverpb/, so the
# generated code imports its siblings as droverpb.<name>_pb2 and the
# stubs form one package next to plugin.py.
set -eu
cd "$(dirname "$0")"
PYTHON=${PYTHON:-/usr/bin/python3}
PROTOC=${PROTOC:-protoc}
GRPC_PYTHON_PLUGIN=${GRPC_PYTHON_PLUGIN:-$(command -v grpc_python_plugin || true)}
set -- -Idroverpb=../../../sdk/proto -Idroverpb=proto --python_out=. \
	droverpb/scheduler.proto droverpb/base.proto droverpb/health.proto droverpb/goplugin.proto
if [ -n "$GRPC_PYTHON_PLUGIN" ] && command -v "$PROTOC" >/dev/null 2>&1; then
	rm -f droverpb/*_pb2.py droverpb/*_pb2_grpc.py
	"$PROTOC" --plugin=protoc-gen-grpc_python="$GRPC_PYTHON_PLUGIN" --grpc_python_out=. "$@"
elif "$PYTHON" -c 'import grpc_tools.protoc' 2>/dev/null; then
	rm -f droverpb/*_pb2.py droverpb/*_pb2_grpc.py
	# grpc_tools finds google/protobuf/empty.proto in its own package.
	"$PYTHON" -m grpc_tools.protoc --grpc_python_out=. "$@"
else
	echo "gen.sh: needs protoc and grpc_python_plugin (apt-get install protobuf-compiler protobuf-compiler-grpc)" >&2
	echo "        or $PYTHON's grpc_tools (apt-get install python3-grpc-tools)" >&2
	exit 1
fi
