#!/usr/bin/env bash
# Runs every test, and every fuzz target briefly, in phases that `make test` runs as jobs of its
# graph (with no argument, all but racebuild in turn):
#   racebuild   the race phase's test binaries alone (hack/testbins -build-only), so that make
#               can build them ahead, beside the control plane
#   race        every package but the congestion lab and the real-node tier, with the race
#               detector on (hack/lib.sh RACE_FLAGS, the build go vet made), from test binaries
#               kept in _out/test/race (hack/testbins)
#   congestion  the congestion lab, after the race-detector tests
#   fuzz        every fuzz target for FUZZTIME (hack/fuzz.sh); make test runs it at the lowest CPU
#               priority beside the other phases (see the Makefile)
#   node        the real-node tier (test/node), on the node `make node-assets` builds; make builds
#               the node's parts after the other phases and runs this last, so its builds and
#               tests are a line of their own in the table of timings
# Needs the set-up first (`make test` does all of it): the tools, the control plane, the node
# parts and the commands in bin/ (`make build`), which the tests that run commands take from there
# instead of building their own (internal/testbin).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
TIMING_GROUP=test
log() { printf '[test] %s\n' "$*"; }

mkdir -p _out
export NETFLEET_PREBUILT_BIN=$BIN
# The programs tests build themselves (internal/testbin GoBuild) are built with the commands' flags,
# on the packages the commands' build compiled.
export NETFLEET_GO_BUILD_FLAGS="${GO_BUILD_FLAGS[*]}"
gotestsum=("$BIN/gotestsum" --format "${GOTESTSUM_FORMAT:-pkgname-and-test-fails}")

# The congestion-response scenario judges what real clients observed second by second; it runs
# after the other packages' tests, without the race detector, so that they do not starve its tick
# loop (it skips the seconds in which the server did not keep time, and a run starved throughout
# would say nothing). It raises its own CPU priority (internal/congestionlab boostPriority), above
# the fuzz targets that may still run beside it at the lowest one.
timed=github.com/netfleet/netfleet/internal/congestionlab
# The longest packages go first, so that none of them starts late and ends alone. testbins orders
# a run by the durations of the last one; on the first, these lead: the operator's
# (about 2.5 min with the race detector, its tests one after another on one control plane) and
# the end-to-end package (about 2 min, most of it spent waiting on the scenarios it runs, which
# the other packages' tests fill), then the snapshot replication's (about 1 min).
first=(github.com/netfleet/netfleet/controllers github.com/netfleet/netfleet/test/e2e github.com/netfleet/netfleet/gameserver/snapshot)
nodetier=github.com/netfleet/netfleet/test/node

# racebins runs hack/testbins on every package but the congestion lab and the real-node tier:
# the race-detector test binaries are kept in _out/test/race between runs, where go test would
# link all of them again on every run (about a minute of CPU) and only those of the packages that
# changed need it. The longest packages go first (see first).
racebins() {
	local pkgs
	mapfile -t pkgs < <(printf '%s\n' "${first[@]}"; go list ./... | grep -vx -e "$timed" -e "$nodetier")
	go run "${GO_BUILD_FLAGS[@]}" ./hack/testbins -dir _out/test/race "$@" -- "${RACE_FLAGS[@]}" -ldflags=-w -- "${pkgs[@]}"
}

# The test binaries alone: make test builds them beside the control plane, in the share of the
# cores its build leaves idle, so that the tests start running as soon as it is done.
racebuild() {
	log "race-detector test binaries, every package but $timed and $nodetier"
	timed "race-detector test binaries" racebins -build-only
}

race() {
	# Four packages at a time on two cores: many tests spend much of their time waiting on
	# processes, control planes and real-time tick loops, so one package per core leaves a core
	# idle about a third of the time. With the binaries linked ahead and the longest packages
	# first, four took 2m48s on a warm cache (three, in the fixed order, 3m54s; go test -p 3,
	# linking as it went, 4m41s).
	log "go test (race detector on), every package but $timed and $nodetier, ${TEST_PACKAGES_AT_ONCE:-4} packages at a time"
	timed "go test -race (every package but two)" "${gotestsum[@]}" --junitfile _out/junit.xml --raw-command -- \
		"$ROOT/hack/test.sh" racebins -parallel "${TEST_PACKAGES_AT_ONCE:-4}" -timeout "${TEST_TIMEOUT:-20m}"
}

congestion() {
	log "go test $timed"
	# Built as the cgo commands are (hack/lib.sh GO_BUILD_FLAGS), whose packages it runs.
	timed "go test congestionlab" "${gotestsum[@]}" --junitfile _out/junit-congestion.xml -- \
		"${GO_BUILD_FLAGS[@]}" -count=1 -timeout 5m "$timed"
}

fuzz() {
	log "fuzz targets, ${FUZZTIME:-3s} each${FUZZ_NICE:+, at nice $FUZZ_NICE}"
	TIMING_GROUP=fuzz FUZZTIME=${FUZZTIME:-3s} timed "fuzz targets${FUZZ_NICE:+ (nice $FUZZ_NICE, beside the tests)}" \
		nice -n "${FUZZ_NICE:-0}" "$ROOT/hack/fuzz.sh"
}

node() {
	log "go test $nodetier (race detector on)"
	TIMING_GROUP=node timed "go test -race test/node" "${gotestsum[@]}" --junitfile _out/junit-node.xml -- \
		"${RACE_FLAGS[@]}" -ldflags=-w -count=1 -timeout "${TEST_TIMEOUT:-20m}" "$nodetier"
}

case ${1:-all} in
racebins) shift; racebins "$@" ;;
racebuild) racebuild ;;
race) race ;;
congestion) congestion ;;
fuzz) fuzz ;;
node) node ;;
all)
	# bin/ holds the commands of this tree: build.sh relinks only what changed.
	"$ROOT/hack/build.sh"
	race
	congestion
	node &
	node_pid=$!
	fuzz_rc=0
	fuzz || fuzz_rc=$?
	node_rc=0
	wait "$node_pid" || node_rc=$?
	[ "$node_rc" -eq 0 ] || log "FAILED: go test $nodetier"
	[ "$fuzz_rc" -eq 0 ] || log "FAILED: fuzz targets"
	[ "$node_rc" -eq 0 ] && [ "$fuzz_rc" -eq 0 ] || exit 1
	log "all tests passed"
	;;
*)
	log "unknown phase $1: want race, congestion, fuzz or node"
	exit 2
	;;
esac
