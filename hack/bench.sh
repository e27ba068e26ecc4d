#!/usr/bin/env bash
# Runs the Go benchmarks and the benchmark drivers; results go to _out/bench/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$ROOT/bin/k8s/v1.37.2}
OUT=$ROOT/_out/bench
mkdir -p "$OUT"
log() { printf '[bench] %s\n' "$*"; }

log "Go benchmarks -> $OUT/go-bench.txt"
go test -run '^$' -bench . -benchmem -count "${BENCH_COUNT:-5}" -timeout 60m ./... | tee "$OUT/go-bench.txt"
log "done; results in $OUT"
