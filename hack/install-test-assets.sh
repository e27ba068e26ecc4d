#!/usr/bin/env bash
# Builds the control-plane binaries that envtest, the e2e tests and netfleet-dev run —
# kube-apiserver, etcd and kubectl — from Go modules (no release tarball can be downloaded in
# every environment netfleet is built in). Output: bin/k8s/<version>/{kube-apiserver,etcd,kubectl}.
# Skips every binary that is already there.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
STAGING_VERSION=${STAGING_VERSION:-v0.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${ASSETS_DIR:-$ROOT/bin/k8s/$KUBE_VERSION}
WORK=$ROOT/bin/.build-test-assets

log() { printf '[test-assets] %s\n' "$*"; }
die() { printf '[test-assets] ERROR: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH"
mkdir -p "$OUT" "$WORK"

# build_module <dir> <go.mod body> <main.go body or ""> <ldflags> <name=package>...: builds the
# named binaries that are not in $OUT yet in one go build, so the packages they share compile once.
# A package "." is the module's own main.go.
build_module() {
	local dir=$1 gomod=$2 main=$3 ldflags=$4
	shift 4
	local names=() pkgs=() pair
	for pair in "$@"; do
		if [ -x "$OUT/${pair%%=*}" ]; then
			log "${pair%%=*} already built at $OUT/${pair%%=*}; skipping"
			continue
		fi
		names+=("${pair%%=*}")
		pkgs+=("${pair#*=}")
	done
	[ ${#names[@]} -gt 0 ] || return 0
	log "building ${names[*]} into $OUT (the first build takes several minutes)"
	rm -rf "$dir" && mkdir -p "$dir/out"
	printf '%s\n' "$gomod" >"$dir/go.mod"
	if [ -n "$main" ]; then
		printf '%s\n' "$main" >"$dir/main.go"
		(cd "$dir" && GOFLAGS=-mod=mod go mod tidy) || die "go mod tidy failed for ${names[*]}"
	fi
	# -mod=mod lets go build complete go.mod and go.sum for packages of a required module that
	# the module itself does not import (go mod tidy would drop that requirement).
	(cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w $ldflags" -o out/ "${pkgs[@]}") ||
		die "go build failed for ${names[*]}"
	local i
	for i in "${!names[@]}"; do
		local built=$dir/out/${pkgs[$i]##*/}
		[ "${pkgs[$i]}" != . ] || built=$dir/out/$(basename "$dir")
		mv "$built" "$OUT/${names[$i]}"
		log "${names[$i]} built: $("$OUT/${names[$i]}" version --client 2>/dev/null | head -n1 || "$OUT/${names[$i]}" --version 2>/dev/null | head -n1 || true)"
	done
}

# kube-apiserver and kubectl, built as Kubernetes builds them: its own main packages from
# k8s.io/kubernetes, whose go.mod points the staging modules at ./staging/src; each is replaced with
# the published module of the same minor version, read from that go.mod.
if [ ! -x "$OUT/kube-apiserver" ] || [ ! -x "$OUT/kubectl" ]; then
	log "resolving k8s.io/kubernetes $KUBE_VERSION staging modules"
	modfile=$(cd "$WORK" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
	[ -f "$modfile" ] || die "could not download the go.mod of k8s.io/kubernetes@$KUBE_VERSION"
	replaces=$(grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/src/' "$modfile" | awk -v v="$STAGING_VERSION" '{print "replace " $1 " => " $1 " " v}')
	n=$(printf '%s\n' "$replaces" | grep -c replace || true)
	[ "$n" -gt 20 ] || die "expected the staging replace list in $modfile, found $n entries"
	log "replacing $n staging modules with $STAGING_VERSION"
	build_module "$WORK/kubernetes" "module netfleet.local/kubernetes

go 1.26

require k8s.io/kubernetes $KUBE_VERSION

$replaces" "" "-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION" \
		kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver kubectl=k8s.io/kubernetes/cmd/kubectl
else
	log "kube-apiserver and kubectl already built in $OUT; skipping"
fi

build_module "$WORK/etcd" "module netfleet.local/etcd

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION" 'package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }' "" etcd=.

log "test assets ready in $OUT"
