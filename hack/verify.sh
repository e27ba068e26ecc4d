#!/usr/bin/env bash
# Fails when generated code is stale (run after `make generate manifests`), when a Go file is not
# gofmt-formatted, or when go vet or golangci-lint report anything.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
log() { printf '[verify] %s\n' "$*"; }

log "checking generated files match what is committed"
gen_paths=(api config charts/netfleet/crds charts/netfleet/rbac charts/netfleet/dashboards)
if ! git diff --exit-code --stat -- "${gen_paths[@]}"; then
	log "generated code differs from what is committed: run 'make generate manifests' and commit"
	exit 1
fi
untracked=$(git ls-files --others --exclude-standard -- "${gen_paths[@]}")
if [ -n "$untracked" ]; then
	log "generated files not committed: $untracked"
	exit 1
fi

log "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
	log "not gofmt-formatted: $unformatted"
	exit 1
fi

log "go vet"
go vet ./...

log "golangci-lint"
"$ROOT/bin/golangci-lint" run ./...
log "ok"
