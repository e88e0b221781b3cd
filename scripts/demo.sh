#!/usr/bin/env bash
# The newcomer's demo: start `drover agent -dev`, run the example jobs,
# show their status and output, then stop the agent.
set -euo pipefail
cd "$(dirname "$0")/.."
DROVER=${DROVER:-./bin/drover}
export DROVER_ADDR=${DROVER_ADDR:-http://127.0.0.1:4646}
log=$(mktemp -t drover-dev.XXXXXX.log)

"$DROVER" agent -dev >"$log" 2>&1 &
agent=$!
cleanup() { kill -INT "$agent" 2>/dev/null || true; wait "$agent" 2>/dev/null || true; }
trap cleanup EXIT

echo "==> Waiting for the dev agent (log: $log)"
for _ in $(seq 1 100); do
  if "$DROVER" node status 2>/dev/null | grep -q ready; then break; fi
  if ! kill -0 "$agent" 2>/dev/null; then cat "$log"; exit 1; fi
  sleep 0.1
done
"$DROVER" node status

step() { echo; echo "==> $*"; }
# wait_dead waits until a batch-like job has finished everywhere.
wait_dead() {
  for _ in $(seq 1 100); do
    if "$DROVER" job status "$1" | grep -q '^Status *= dead'; then return 0; fi
    sleep 0.1
  done
  echo "job $1 did not finish" >&2; return 1
}
first_alloc() { curl -fsS "$DROVER_ADDR/v1/job/$(printf %s "$1" | sed 's|/|%2F|g')/allocations" | sed -n 's/^\[{"ID":"\([^"]*\)".*/\1/p'; }

step "drover job run examples/jobs/sysbatch.hcl"
"$DROVER" job run examples/jobs/sysbatch.hcl
step "drover job status hello-sysbatch"
"$DROVER" job status hello-sysbatch
wait_dead hello-sysbatch
alloc=$(first_alloc hello-sysbatch)
step "drover alloc logs $alloc"
"$DROVER" alloc logs "$alloc"

step "drover job run examples/jobs/system.hcl"
"$DROVER" job run examples/jobs/system.hcl
"$DROVER" job status sleeper

step "drover job run examples/jobs/dispatch.hcl; drover job dispatch -meta name=drover greet"
"$DROVER" job run examples/jobs/dispatch.hcl
out=$(echo "a payload from the demo" | "$DROVER" job dispatch -meta name=drover greet -)
echo "$out"
child=$(echo "$out" | sed -n 's/^Dispatched Job ID = //p')
wait_dead "$child"
"$DROVER" job status "$child"
step "drover alloc logs (the dispatched child)"
"$DROVER" alloc logs "$(first_alloc "$child")"

step "drover job run examples/jobs/periodic.hcl; drover job periodic force tick"
"$DROVER" job run examples/jobs/periodic.hcl
"$DROVER" job periodic force tick
"$DROVER" job status tick

step "drover job stop -purge sleeper"
"$DROVER" job stop -purge sleeper
echo
echo "==> Demo finished; stopping the dev agent."
