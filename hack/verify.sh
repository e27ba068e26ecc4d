#!/usr/bin/env bash
# Fails when generated code is stale (run after `make generate manifests`), when hack/toolchain.mod
# is stale (hack/toolchain.sh sync), when a Go file is not gofmt-formatted, or when go vet or
# golangci-lint report anything. In two parts, which make test runs as jobs of their own (with no
# argument, both):
#   check  the generated files, hack/toolchain.mod, gofmt and go vet
#   lint   golangci-lint, after check (it reads the packages go vet compiles)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
TIMING_GROUP=verify
log() { printf '[verify] %s\n' "$*"; }

generated() {
	local gen_paths=(api config charts/netfleet/crds charts/netfleet/rbac charts/netfleet/dashboards) untracked
	if ! git diff --exit-code --stat -- "${gen_paths[@]}"; then
		log "generated code differs from what is committed: run 'make generate manifests' and commit"
		return 1
	fi
	untracked=$(git ls-files --others --exclude-standard -- "${gen_paths[@]}")
	if [ -n "$untracked" ]; then
		log "generated files not committed: $untracked"
		return 1
	fi
}

formatted() {
	local unformatted
	unformatted=$(gofmt -l $(git ls-files '*.go'))
	if [ -n "$unformatted" ]; then
		log "not gofmt-formatted: $unformatted"
		return 1
	fi
}

check() {
	log "checking generated files match what is committed"
	timed "generated files committed" generated
	log "hack/toolchain.mod in step with go.mod"
	timed "toolchain.mod in step" "$ROOT/hack/toolchain.sh" check
	log "gofmt"
	timed gofmt formatted
	log "go vet"
	# With the race detector's build, which is what the tests compile (hack/lib.sh RACE_FLAGS): the
	# packages vet compiles for its type information are then the ones go test -race reuses,
	# rather than a second, plain build of every package (no netfleet file depends on the race
	# build tag, so vet sees the same files).
	timed "go vet -race" go vet "${RACE_FLAGS[@]}" ./...
}

lint() {
	log "golangci-lint"
	# golangci-lint type-checks netfleet's packages against their dependencies' export data, which
	# it has go list compile: with RACE_FLAGS in GOFLAGS those are the packages go vet compiled
	# (without, a third build of every dependency: about 5 minutes of CPU on a fresh machine).
	timed golangci-lint env GOFLAGS="${RACE_FLAGS[*]}" "$BIN/golangci-lint" run ./...
}

case ${1:-all} in
check) check ;;
lint) lint ;;
all)
	check
	lint
	;;
*)
	log "unknown part $1: want check or lint"
	exit 2
	;;
esac
log "ok${1:+ ($1)}"
