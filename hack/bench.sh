#!/usr/bin/env bash
# Runs the Go benchmarks and the benchmark drivers; results go to _out/bench/.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
OUT=$ROOT/_out/bench
mkdir -p "$OUT"
log() { printf '[bench] %s\n' "$*"; }

log "Go benchmarks -> $OUT/go-bench.txt"
go test -run '^$' -bench . -benchmem -count "${BENCH_COUNT:-5}" -timeout 60m ./... | tee "$OUT/go-bench.txt"
log "congestion-sim: random loss told from congestion over 2000 simulated links -> $OUT/congestion-sim.json"
go run ./hack/congestion-sim --runs 2000 --out "$OUT"
log "bench-cclient: the C client library against the Go client, decode throughput and memory per connection -> $OUT/bench-cclient.json"
go run ./hack/bench-cclient --out "$OUT"
# Benchmarks that write a table's JSON under $OUT include the operator's: config propagation
# (operator-config-propagation.json), allocation from a 500-server fleet (fleet-allocation.json),
# a fleet netcode edit reaching 200 servers (fleet-netcode.json) and the autoscaler's reaction
# to bursts of allocations at 200 servers, against a 30 s periodic policy (fleet-autoscaler.json),
# and a game's lifecycle call reaching its GameServer's state at 1 and 200 servers, beside the API
# server's own watch latency (operator-lifecycle.json).
log "done; results in $OUT: $(cd "$OUT" && ls -m -- *.json 2>/dev/null)"
