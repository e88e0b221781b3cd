#!/usr/bin/env bash
# The newcomer's demo: start `drover agent -dev`, run the example jobs,
# show their status and output, then stop the agent.
set -euo pipefail
cd "$(dirname "$0")/.."
DROVER=${DROVER:-./bin/drover}
export DROVER_ADDR=${DROVER_ADDR:-http://127.0.0.1:4646}
log=$(mktemp -t drover-dev.XXXXXX.log)
# The agent serves the port DROVER_ADDR names (4646 unless set).
port=${DROVER_ADDR%/}
port=${port##*:}
case $port in '' | *[!0-9]*) port=4646 ;; esac

"$DROVER" agent -dev -http-port "$port" >"$log" 2>&1 &
agent=$!
cleanup() { kill -INT "$agent" 2>/dev/null || true; wait "$agent" 2>/dev/null || true; }
trap cleanup EXIT

# agent_failed stops the demo with the agent's own output (its error).
agent_failed() {
  echo "==> The dev agent $1; its output:" >&2
  cat "$log" >&2
  exit 1
}

# Only our agent counts: another process on the port (say an agent
# already running) would answer `node status` too. Our agent prints its
# banner once its HTTP listener is bound, and while it runs it holds the
# port, so from then on every answer is its own.
echo "==> Waiting for the dev agent (log: $log)"
deadline=$((SECONDS + ${DEMO_TIMEOUT:-120}))
until grep -q '^==> drover agent started!' "$log"; do
  kill -0 "$agent" 2>/dev/null || agent_failed "exited before it served its API"
  [ "$SECONDS" -lt "$deadline" ] || agent_failed "did not start within ${DEMO_TIMEOUT:-120}s"
  sleep 0.1
done
until "$DROVER" node status 2>/dev/null | grep -q ready; do
  kill -0 "$agent" 2>/dev/null || agent_failed "exited before its node was ready"
  [ "$SECONDS" -lt "$deadline" ] || agent_failed "has no ready node after ${DEMO_TIMEOUT:-120}s"
  sleep 0.1
done
"$DROVER" node status

step() { echo; echo "==> $*"; }
# wait_dead waits until a batch-like job has finished everywhere.
wait_dead() {
  local until=$((SECONDS + ${DEMO_TIMEOUT:-120}))
  while [ "$SECONDS" -lt "$until" ]; do
    if "$DROVER" job status "$1" | grep -q '^Status *= dead'; then return 0; fi
    kill -0 "$agent" 2>/dev/null || agent_failed "exited during the demo"
    sleep 0.1
  done
  echo "job $1 did not finish within ${DEMO_TIMEOUT:-120}s" >&2; return 1
}
# first_alloc prints the ID of a job's first allocation, from the
# Allocations table of `job status -verbose` (full IDs).
first_alloc() {
  "$DROVER" job status -verbose "$1" | awk '/^Allocations/ { getline; getline; print $1; exit }'
}

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

step "drover job validate examples/jobs/variables.hcl; drover job run -var 'names=[\"ann\",\"bob\"]' examples/jobs/variables.hcl"
"$DROVER" job validate examples/jobs/variables.hcl
"$DROVER" job run -var 'names=["ann","bob"]' examples/jobs/variables.hcl
wait_dead greetings
step "drover alloc logs (greet-bob, from a dynamic task block)"
"$DROVER" alloc logs "$(first_alloc greetings)" greet-bob

step "drover job stop -purge sleeper"
"$DROVER" job stop -purge sleeper
echo
echo "==> Demo finished; stopping the dev agent."
