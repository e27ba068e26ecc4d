#!/usr/bin/env bash
# Installs what a real node of the local control plane runs (`netfleet-dev --node`, the test/node
# tier): Debian's runc and iptables, and, built from Go modules because no release binary can be
# downloaded in every environment netfleet is built in,
#   bin/node/containerd-<v>/  containerd, containerd-shim-runc-v2, ctr
#   bin/node/cni-<v>/         the CNI plugins bridge, host-local, portmap, loopback
#   bin/node/pause-<v>/       the Pod sandbox's pause, compiled from the C source that the
#                             k8s.io/kubernetes module ships (build/pause/linux/pause.c)
# (The kubelet, kube-proxy, kube-scheduler and kube-controller-manager, in bin/node/kubernetes-<v>/,
# come from hack/toolchain.sh, with kube-apiserver's packages.) Every directory is keyed by version
# and skipped when complete; a build writes into a temporary
# directory and renames it into place, so an interrupted build leaves nothing half-made. With
# arguments, only the named parts (packages, containerd, cni, pause); the Makefile
# builds them as jobs of their own, side by side with the rest of the set-up.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
TIMING_GROUP=node

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
CNI_PLUGINS_VERSION=${CNI_PLUGINS_VERSION:-v1.10.0}
PAUSE_VERSION=${PAUSE_VERSION:-3.10.2}
OUT=${NODE_ASSETS_DIR:-$BIN/node}
WORK=$BIN/.build-node

PACKAGES=(runc iptables gcc libc6-dev)

log() { printf '[node] %s\n' "$*"; }
die() { printf '[node] ERROR: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH"
mkdir -p "$OUT" "$WORK"
parts=" ${*:-packages containerd cni pause} "
for part in $parts; do
	case $part in packages | containerd | cni | pause) ;; *) die "unknown part $part" ;; esac
done
want() { [[ $parts == *" $1 "* ]]; }

# Debian packages, only the missing ones.
missing=()
want packages || PACKAGES=()
for p in "${PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || die "missing Debian packages: ${missing[*]}; run 'make node-assets' as root or: sudo apt-get install -y ${missing[*]}"
	log "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	timed "apt-get update" apt-get update -qq || die "apt-get update failed"
	timed "apt-get install ${missing[*]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" || die "apt-get install failed"
elif want packages; then
	log "Debian packages present: ${PACKAGES[*]}"
	timing_cached debian-packages
fi

# complete <dir> <name>...: whether dir holds every named executable.
complete() {
	local dir=$1 name
	shift
	for name in "$@"; do
		[ -x "$dir/$name" ] || return 1
	done
}

# build_module <step> <target dir> <work dir> <go.mod body> <ldflags> <tags> <package>...: builds
# the packages of a throwaway module (one go build, so the packages they share compile once) into
# <target dir>, each binary named after its package's last element; <step> names it in the timings.
build_module() {
	local step=$1 target=$2 dir=$3 gomod=$4 ldflags=$5 tags=$6
	shift 6
	rm -rf "$dir" && mkdir -p "$dir/out"
	printf '%s\n' "$gomod" >"$dir/go.mod"
	# -mod=mod lets go build complete go.mod and go.sum for the packages it is asked for.
	(cd "$dir" && timed "$step" env CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags "$tags" -gcflags=all=-dwarf=false -ldflags "-s -w $ldflags" -o out/ "$@") ||
		die "go build failed for $*"
	rm -rf "$target.tmp" && mv "$dir/out" "$target.tmp" && rm -rf "$target" && mv "$target.tmp" "$target"
	rm -rf "$dir"
}

# containerd with its runc shim and its client, ctr (which loads image archives). Without cgo:
# the btrfs snapshotter, the one part that needs it, is left out (overlayfs is used).
CTRD=$OUT/containerd-$CONTAINERD_VERSION
if ! want containerd; then
	:
elif complete "$CTRD" containerd containerd-shim-runc-v2 ctr; then
	log "containerd, containerd-shim-runc-v2 and ctr present in $CTRD; skipping"
	timing_cached containerd,containerd-shim-runc-v2,ctr
else
	log "building containerd $CONTAINERD_VERSION into $CTRD"
	build_module containerd,containerd-shim-runc-v2,ctr "$CTRD" "$WORK/containerd" "module netfleet.local/containerd

go 1.26

require github.com/containerd/containerd/v2 $CONTAINERD_VERSION" \
		"-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" "no_btrfs" \
		github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
		github.com/containerd/containerd/v2/cmd/ctr
	log "built: $("$CTRD/containerd" --version)"
fi

CNI=$OUT/cni-$CNI_PLUGINS_VERSION
if ! want cni; then
	:
elif complete "$CNI" bridge host-local portmap loopback; then
	log "CNI plugins present in $CNI; skipping"
	timing_cached cni-plugins
else
	log "building the CNI plugins $CNI_PLUGINS_VERSION into $CNI"
	build_module cni-plugins "$CNI" "$WORK/cni" "module netfleet.local/cni

go 1.26

require github.com/containernetworking/plugins $CNI_PLUGINS_VERSION" \
		"-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" "" \
		github.com/containernetworking/plugins/plugins/main/bridge github.com/containernetworking/plugins/plugins/ipam/host-local \
		github.com/containernetworking/plugins/plugins/meta/portmap github.com/containernetworking/plugins/plugins/main/loopback
fi

# pause, built as Kubernetes builds it (build/pause/Makefile): a static C program.
PAUSE=$OUT/pause-$PAUSE_VERSION
if ! want pause; then
	:
elif complete "$PAUSE" pause; then
	log "pause present in $PAUSE; skipping"
	timing_cached pause
else
	src=$(cd "$WORK" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')/build/pause/linux/pause.c
	[ -f "$src" ] || die "no pause.c at $src"
	tag=$(sed -n 's/^TAG ?= //p' "$(dirname "$(dirname "$src")")/Makefile")
	[ "$tag" = "$PAUSE_VERSION" ] || die "k8s.io/kubernetes@$KUBE_VERSION ships pause $tag, not $PAUSE_VERSION: set PAUSE_VERSION=$tag"
	log "compiling pause $PAUSE_VERSION into $PAUSE"
	rm -rf "$PAUSE.tmp" && mkdir -p "$PAUSE.tmp"
	timed pause gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_VERSION-netfleet" -o "$PAUSE.tmp/pause" "$src" || die "compiling $src failed"
	rm -rf "$PAUSE" && mv "$PAUSE.tmp" "$PAUSE"
fi

log "node assets ready in $OUT ($(echo $parts))"
