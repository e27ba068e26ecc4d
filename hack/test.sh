#!/usr/bin/env bash
# Runs every test, then every fuzz target briefly. Needs `make deps tools test-assets node-assets`
# first (`make test` does all of it).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
log() { printf '[test] %s\n' "$*"; }

mkdir -p _out

# The congestion-response scenario judges what real clients observed second by second; it runs
# on its own afterwards, without the race detector, so other packages' tests do not starve its
# tick loop (it skips the seconds in which the server did not keep time, and a run starved
# throughout would say nothing).
timed=github.com/netfleet/netfleet/internal/congestionlab
# The end-to-end packages go first: most of their time is spent waiting on the scenarios they
# run (the real-node tier on its node, `make node-assets`), which the other packages' tests fill.
e2e=github.com/netfleet/netfleet/test/e2e
nodetier=github.com/netfleet/netfleet/test/node
mapfile -t pkgs < <(echo "$nodetier"; echo "$e2e"; go list ./... | grep -vx -e "$timed" -e "$e2e" -e "$nodetier")

# Three packages at a time on two cores: many tests spend much of their time waiting on
# processes, control planes and real-time tick loops, so one package per core leaves a core idle
# about a third of the time.
log "go test (race detector on), every package but $timed, ${TEST_PACKAGES_AT_ONCE:-3} packages at a time"
"$ROOT/bin/gotestsum" --format "${GOTESTSUM_FORMAT:-pkgname-and-test-fails}" \
	--junitfile _out/junit.xml -- -race -count=1 -p "${TEST_PACKAGES_AT_ONCE:-3}" -timeout "${TEST_TIMEOUT:-20m}" "${pkgs[@]}"

log "go test $timed (alone)"
"$ROOT/bin/gotestsum" --format "${GOTESTSUM_FORMAT:-pkgname-and-test-fails}" \
	--junitfile _out/junit-congestion.xml -- -count=1 -timeout 5m "$timed"

log "fuzz targets, ${FUZZTIME:-3s} each"
FUZZTIME=${FUZZTIME:-3s} "$ROOT/hack/fuzz.sh"
log "all tests passed"
