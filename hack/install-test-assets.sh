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

# build_module <name> <dir> <go.mod body> <main.go body> [ldflags]
build_module() {
	local name=$1 dir=$2 gomod=$3 main=$4 ldflags=${5:-}
	if [ -x "$OUT/$name" ]; then
		log "$name already built at $OUT/$name; skipping"
		return
	fi
	log "building $name into $OUT (first build takes several minutes)"
	rm -rf "$dir" && mkdir -p "$dir"
	printf '%s\n' "$gomod" >"$dir/go.mod"
	printf '%s\n' "$main" >"$dir/main.go"
	(cd "$dir" && GOFLAGS=-mod=mod go mod tidy) || die "go mod tidy failed for $name"
	(cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$OUT/$name.tmp" .) ||
		die "go build failed for $name"
	mv "$OUT/$name.tmp" "$OUT/$name"
	log "$name built: $("$OUT/$name" --version 2>/dev/null | head -n1 || true)"
}

# kube-apiserver: k8s.io/kubernetes points its staging modules at ./staging/src; replace each with
# the published module of the same minor version, read from kubernetes' own go.mod.
if [ ! -x "$OUT/kube-apiserver" ]; then
	log "resolving k8s.io/kubernetes $KUBE_VERSION staging modules"
	modfile=$(cd "$WORK" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
	[ -f "$modfile" ] || die "could not download the go.mod of k8s.io/kubernetes@$KUBE_VERSION"
	replaces=$(grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/src/' "$modfile" | awk -v v="$STAGING_VERSION" '{print "replace " $1 " => " $1 " " v}')
	n=$(printf '%s\n' "$replaces" | grep -c replace || true)
	[ "$n" -gt 20 ] || die "expected the staging replace list in $modfile, found $n entries"
	log "replacing $n staging modules with $STAGING_VERSION"
	build_module kube-apiserver "$WORK/kube-apiserver" "module netfleet.local/kube-apiserver

go 1.26

require k8s.io/kubernetes $KUBE_VERSION

$replaces" 'package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }' "-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
else
	log "kube-apiserver already built at $OUT/kube-apiserver; skipping"
fi

build_module etcd "$WORK/etcd" "module netfleet.local/etcd

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION" 'package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }'

build_module kubectl "$WORK/kubectl" "module netfleet.local/kubectl

go 1.26

require k8s.io/kubectl $STAGING_VERSION" 'package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() { os.Exit(cli.Run(cmd.NewDefaultKubectlCommand())) }' "-X k8s.io/component-base/version.gitVersion=$STAGING_VERSION"

log "test assets ready in $OUT"
