#!/usr/bin/env bash
# Installs the pinned Go tools the build uses into bin/: each as bin/<tool>-<version>, with
# bin/<tool> linking to it. A tool already present at its pinned version is skipped. With
# arguments, only the named tools (the Makefile installs each as its own job, so they build side by
# side with the control plane).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
TIMING_GROUP=tools

log() { printf '[tools] %s\n' "$*"; }
die() { printf '[tools] ERROR: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH"
mkdir -p "$BIN"

# name  package  version
TOOLS=(
	"controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen v0.23.0"
	"helm helm.sh/helm/v3/cmd/helm v3.22.0"
	"golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint v2.15.0"
	"gotestsum gotest.tools/gotestsum v1.13.0"
	"benchstat golang.org/x/perf/cmd/benchstat v0.0.0-20260908200009-22c9c6c9d4da"
)

install() {
	local name=$1 pkg=$2 version=$3 tmp
	tmp=$(mktemp -d)
	GOBIN=$tmp CGO_ENABLED=0 go install "$pkg@$version" || { rm -rf "$tmp"; return 1; }
	mv "$tmp/$name" "$BIN/$name-$version"
	rm -rf "$tmp"
}

want=" $* "
found=0
for row in "${TOOLS[@]}"; do
	read -r name pkg version <<<"$row"
	[ $# -eq 0 ] || [[ $want == *" $name "* ]] || continue
	found=$((found + 1))
	if [ -x "$BIN/$name-$version" ]; then
		log "$name $version present; skipping"
		timing_cached "$name"
	else
		log "installing $name $version ($pkg)"
		timed "$name" install "$name" "$pkg" "$version" || die "go install $pkg@$version failed"
	fi
	ln -sfn "$name-$version" "$BIN/$name"
done
[ $# -eq 0 ] || [ "$found" -eq $# ] || die "unknown tool in: $*"
log "tools ready in $BIN"
