#!/usr/bin/env bash
# Builds the control-plane binaries that envtest, the e2e tests and netfleet-dev run —
# kube-apiserver, etcd and kubectl — from Go modules (no release tarball can be downloaded in
# every environment netfleet is built in). Output: bin/k8s/<version>/{kube-apiserver,etcd,kubectl}.
# Skips every binary that is already there. With an argument, only part of them: kube
# (kube-apiserver and kubectl, one build) or etcd; the Makefile builds the two side by side.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
TIMING_GROUP=control-plane

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
STAGING_VERSION=${STAGING_VERSION:-v0.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
# The build tags Kubernetes' own release builds use (hack/lib/golang.sh): notest drops the fuzzing
# helpers from k8s.io/apimachinery, grpcnotrace drops golang.org/x/net/trace from gRPC, which lets
# the linker drop unused methods. (providerless, the tag that once dropped the in-tree cloud
# providers, selects no file in v1.37: they are gone; selinux selects none in the selinux module
# it pins.) hack/install-node.sh builds with the same tags, so the packages the kubelet shares with
# kube-apiserver compile once.
KUBE_BUILD_TAGS=${KUBE_BUILD_TAGS:-notest,grpcnotrace}
OUT=${ASSETS_DIR:-$BIN/k8s/$KUBE_VERSION}
WORK=$BIN/.build-test-assets

log() { printf '[test-assets] %s\n' "$*"; }
die() { printf '[test-assets] ERROR: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH"
part=${1:-all}
case $part in all | kube | etcd) ;; *) die "unknown part $part: want kube or etcd" ;; esac
mkdir -p "$OUT" "$WORK"

# build_module <dir> <go.mod body> <main.go body or ""> <ldflags> <tags> <name=package>...: builds the
# named binaries that are not in $OUT yet in one go build, so the packages they share compile once.
# A package "." is the module's own main.go.
build_module() {
	local dir=$1 gomod=$2 main=$3 ldflags=$4 tags=$5
	shift 5
	local names=() pkgs=() pair
	for pair in "$@"; do
		if [ -x "$OUT/${pair%%=*}" ]; then
			log "${pair%%=*} already built at $OUT/${pair%%=*}; skipping"
			timing_cached "${pair%%=*}"
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
	(cd "$dir" && timed "$(IFS=,; echo "${names[*]}")" env CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o out/ "${pkgs[@]}") ||
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
if [ "$part" = etcd ]; then
	:
elif [ ! -x "$OUT/kube-apiserver" ] || [ ! -x "$OUT/kubectl" ]; then
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

$replaces" "" "-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION" "$KUBE_BUILD_TAGS" \
		kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver kubectl=k8s.io/kubernetes/cmd/kubectl
else
	log "kube-apiserver and kubectl already built in $OUT; skipping"
	timing_cached kube-apiserver,kubectl
fi

[ "$part" = kube ] || build_module "$WORK/etcd" "module netfleet.local/etcd

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION" 'package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }' "" "" etcd=.

log "test assets ready in $OUT${1:+ ($1)}"
