GO ?= go
export PATH := $(PATH):$(shell $(GO) env GOPATH)/bin

.PHONY: build check test check-tracked fuzz demo bench proto proto-python lint nomad-api-test

build:
	$(GO) build -o bin/drover ./cmd/drover

# The fast tier, for every change: vet, and the tests that need no agent
# process, no Docker engine and no browser (`go test -short`: a test that
# needs one skips itself through internal/testtier, saying why), without
# -race; its longest packages first (see test below). See docs/testing.md.
check: check-tracked
	$(GO) vet ./...
	$(GO) test -short -count=1 ./core/server ./core/client ./core/pluginhost ./core/httpapi ./...

# The test suite, every test: no tracked binaries; vet; unit, integration
# and end-to-end tests with the race detector; the example plugin module
# (its own go.mod, so ./... above leaves it out). Each fuzz target's seed
# corpus and saved inputs run as ordinary tests here; `make fuzz` fuzzes.
#
# go test starts packages in the order given, -p at a time, and a running
# package holds its slot until it ends: the longest packages (in time; see
# docs/testing.md) go first so that none of them starts last and runs
# alone, and ./... adds the rest (go test runs a package once). scripts is
# slow on a fresh machine only: its fuzz.sh test compiles for fuzzing.
# TESTFLAGS adds go test flags (e.g. TESTFLAGS=-json to time each package);
# TEST_FUZZTIME=5s also fuzzes every target that long after the tests.
#
# TEST_P packages run at once (go test's -p; its default is the number of
# CPUs): the slow packages mostly wait on agent processes, Raft elections
# and heartbeat timers, so on 2 cores a run at -p 2 kept the CPUs only 44%
# busy (505 CPU-seconds in 577 s). Three at a time fill that idle time.
TEST_P ?= 3
SLOW_PKGS = ./test/cluster ./test/docker ./test/e2e ./core/agent ./plugins/driver-docker ./core/server \
	./core/httpapi ./core/client ./core/client/taskfiles ./core/jobspec ./core/nodesim ./core/pluginhost ./scripts
TESTFLAGS ?=
TEST_FUZZTIME ?=
test: check-tracked
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m -p $(TEST_P) $(TESTFLAGS) $(SLOW_PKGS) ./...
	cd examples/plugins/oneshot && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 5m $(TESTFLAGS) ./...
	$(if $(TEST_FUZZTIME),FUZZTIME=$(TEST_FUZZTIME) GO=$(GO) ./scripts/fuzz.sh)

# Nomad's own api package test suite (a pinned module version) against drover
# on PATH as `nomad`; 6 to 20 minutes on 2 cores, so not part of `test`.
# Fails on a failure not listed in test/nomadapi/known_failures.txt.
# NOMAD_API_REPORT=file writes the failures grouped by cause (markdown);
# NOMAD_API_RUN=regexp runs only the matching tests.
nomad-api-test:
	DROVER_NOMAD_API=1 DROVER_NOMAD_API_REPORT=$(abspath $(NOMAD_API_REPORT)) DROVER_NOMAD_API_RUN='$(NOMAD_API_RUN)' \
		$(GO) test -count=1 -timeout 90m -v -run TestNomadAPISuite ./test/nomadapi/

# Every fuzz target of the module, found by scripts/fuzz.sh, for FUZZTIME
# each.
FUZZTIME ?= 60s
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) ./scripts/fuzz.sh

# Fails when git tracks a binary or a file over 1 MB (build outputs).
check-tracked:
	./scripts/check-tracked.sh

# Build drover, start the dev agent, run the example jobs, show their status, stop.
demo: build
	./scripts/demo.sh

bench: build
	$(GO) test -run '^$$' -bench 'Sysbatch|DevAgent|JobRun|ClusterFailover|ClusterPlan' -benchtime 5x -timeout 30m ./bench/...
	$(GO) test -run '^$$' -bench 'ClusterCatchUp' -benchtime 1x -timeout 30m ./bench/...
	DROVER_SCALE_NODES=$${DROVER_SCALE_NODES:-2000} $(GO) test -run '^$$' -bench 'Scale10k' -benchtime 1x -timeout 60m ./bench/
	$(GO) test -run '^$$' -bench 'TaskStart' -benchtime 10x -timeout 10m ./bench/
	$(GO) test -run '^$$' -bench 'Dispatch100' -benchtime 1x -timeout 20m ./bench/
	$(GO) test -run '^$$' -bench 'StartTask' -benchtime 10x -timeout 10m ./plugins/driver-docker/
	$(GO) test -run '^$$' -bench 'BlockingQueryACL' -benchtime 3s -timeout 10m ./core/httpapi/
	$(GO) test -run '^$$' -bench 'CSIVolumeClaim' -benchtime 20x -timeout 10m ./bench/...
	$(GO) test -run '^$$' -bench 'CSIClaimRelease' -benchtime 3x -timeout 10m ./core/server/
	$(GO) test -run '^$$' -bench 'VolumeWatcherReap' -benchtime 20x -timeout 10m ./core/server/volumewatcher/
	$(GO) test -run '^$$' -bench 'VolumeWatcherIdle' -benchtime 2s -timeout 10m ./core/server/volumewatcher/
	$(GO) test -run '^$$' -bench 'GCBacklog|GCSchedulingLatency' -benchtime 1x -timeout 30m ./core/server/
	$(GO) test -run '^$$' -bench 'ServicePlace|ServiceRollingUpdate' -benchtime 3x -timeout 10m ./plugins/scheduler-service/
	$(GO) test -run '^$$' -bench 'Reschedule' -benchtime 3x -timeout 10m ./plugins/scheduler-batch/
	$(GO) test -run '^$$' -bench 'ApplyEvents' -benchtime 5000x -count 3 -timeout 10m ./core/fsm/
	$(GO) test -run '^$$' -bench 'DispatchBurstEvents' -benchtime 3x -timeout 10m ./core/fsm/
	$(GO) test -run '^$$' -bench 'UIRender' -benchtime 20x -timeout 10m ./core/ui/

# Regenerate protobuf code (needs protoc, protoc-gen-go, protoc-gen-go-grpc).
proto:
	cd sdk/proto && for f in *.proto; do \
		pkg=$$(basename $$f .proto)pb; mkdir -p $$pkg; \
		protoc -I . --go_out=$$pkg --go_opt=paths=source_relative \
			--go-grpc_out=$$pkg --go-grpc_opt=paths=source_relative $$f; \
	done

# Regenerate the Python example plugin's stubs (needs protoc and
# grpc_python_plugin: Debian's protobuf-compiler, protobuf-compiler-grpc).
proto-python:
	./examples/plugins/python-oneshot/gen.sh

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "not gofmt-clean:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@command -v staticcheck >/dev/null || $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2
	staticcheck ./...
