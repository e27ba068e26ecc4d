#!/usr/bin/env bash
# Runs every test, then every fuzz target briefly. Needs `make deps tools test-assets` first
# (`make test` does all of it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
log() { printf '[test] %s\n' "$*"; }

export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$ROOT/bin/k8s/v1.37.2}
export PATH=$ROOT/bin:$KUBEBUILDER_ASSETS:$PATH
mkdir -p _out

log "go test ./... (race detector on)"
"$ROOT/bin/gotestsum" --format "${GOTESTSUM_FORMAT:-pkgname-and-test-fails}" \
	--junitfile _out/junit.xml -- -race -count=1 -timeout "${TEST_TIMEOUT:-20m}" ./...

log "fuzz targets, ${FUZZTIME:-3s} each"
FUZZTIME=${FUZZTIME:-3s} "$ROOT/hack/fuzz.sh"
log "all tests passed"
