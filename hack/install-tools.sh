#!/usr/bin/env bash
# Installs the pinned Go tools the build uses into bin/: each as bin/<tool>-<version>, with
# bin/<tool> linking to it. A tool already present at its pinned version is skipped.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/bin

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

want=${1:-}
for row in "${TOOLS[@]}"; do
	read -r name pkg version <<<"$row"
	[ -z "$want" ] || [ "$want" = "$name" ] || continue
	target=$BIN/$name-$version
	if [ -x "$target" ]; then
		log "$name $version present; skipping"
	else
		log "installing $name $version ($pkg)"
		tmp=$(mktemp -d)
		GOBIN=$tmp CGO_ENABLED=0 go install "$pkg@$version" || { rm -rf "$tmp"; die "go install $pkg@$version failed"; }
		mv "$tmp/$name" "$target"
		rm -rf "$tmp"
	fi
	ln -sfn "$name-$version" "$BIN/$name"
done
log "tools ready in $BIN"
