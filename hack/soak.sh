#!/usr/bin/env bash
# Soaks netfleet for SOAK_DURATION (default 30m): test/e2e's TestSoak with connect/close churn,
# bots through linkem with changing impairments and live netcode edits against a Fleet, sampling
# the RSS and goroutines of the operator and every game-server process every 10 s; each must stay
# flat. The log goes to _out/soak/soak.log, the samples and verdicts to _out/soak/soak.json.
# Needs `make deps tools test-assets` first (`make soak` does it). `make test` skips it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
log() { printf '[soak] %s\n' "$*"; }

DURATION=${SOAK_DURATION:-30m}

# go test's own deadline: the soak plus set-up, convergence waits and tear-down.
seconds=0
rest=$DURATION
while [[ $rest =~ ^([0-9]+)([hms])(.*)$ ]]; do
	case ${BASH_REMATCH[2]} in
	h) seconds=$((seconds + BASH_REMATCH[1] * 3600)) ;;
	m) seconds=$((seconds + BASH_REMATCH[1] * 60)) ;;
	s) seconds=$((seconds + BASH_REMATCH[1])) ;;
	esac
	rest=${BASH_REMATCH[3]}
done
if [[ -n $rest || $seconds -eq 0 ]]; then
	echo "soak: SOAK_DURATION=$DURATION: want a duration like 30m, 1h or 45m30s" >&2
	exit 2
fi

mkdir -p _out/soak
log "TestSoak for $DURATION (log in _out/soak/soak.log)"
NETFLEET_SOAK_DURATION=$DURATION go test ./test/e2e -run '^TestSoak$' -count=1 -v -timeout "$((seconds + 900))s" 2>&1 |
	tee _out/soak/soak.log
log "passed; samples and verdicts in _out/soak/soak.json"
