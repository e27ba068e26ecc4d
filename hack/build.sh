#!/usr/bin/env bash
# Builds every command under cmd/, and every example game's command under examples/*/cmd/, into
# bin/. Built once, without the race detector: `make demo` runs them and the tests that run
# commands take them from here (internal/testbin). A binary that is up to date is not linked again.
#
# Two kinds, each one go build (with the flags of hack/lib.sh GO_BUILD_FLAGS, which the tools in
# hack/toolchain.sh share):
#   static  the commands that do not link libenet (the operator, netfleet-dev, kubectl-netfleet,
#           linkem), with CGO_ENABLED=0, as the operator's image needs it (it must never link
#           libenet). These are the ones that link the Kubernetes libraries, which they then share
#           with kube-apiserver, kubectl and the other tools.
#   cgo     the game servers and the bots, which link the system libenet through cgo.
# With no argument, both.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
TIMING_GROUP=build
log() { printf '[build] %s\n' "$*"; }
die() { printf '[build] ERROR: %s\n' "$*" >&2; exit 1; }

kinds=" ${*:-static cgo} "
static=() cgo=()
while read -r pkg kind; do
	if [ "$kind" = cgo ]; then cgo+=("$pkg"); else static+=("$pkg"); fi
done < <(netfleet_commands)
[[ " ${static[*]##*/} " == *" operator "* ]] || die "cmd/operator would link libenet: it must build with CGO_ENABLED=0"

mkdir -p "$BIN"
# build <step> <CGO_ENABLED> <package>...
build() {
	local step=$1 cgo=$2
	shift 2
	log "$BIN/{$(printf '%s,' "${@##*/}" | sed 's/,$//')} (CGO_ENABLED=$cgo)"
	timed "$step" env CGO_ENABLED="$cgo" go build "${GO_BUILD_FLAGS[@]}" -ldflags "-s -w" -o "$BIN/" "$@"
}
for kind in $kinds; do
	case $kind in
	static) build "commands (CGO_ENABLED=0)" 0 "${static[@]}" ;;
	cgo) build "commands (cgo)" 1 "${cgo[@]}" ;;
	*) die "unknown kind $kind: want static or cgo" ;;
	esac
done
