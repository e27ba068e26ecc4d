#!/usr/bin/env bash
# Installs the Debian packages netfleet builds and tests with, only those that are missing:
#   libenet-dev, pkg-config  the ENet library the game server and bots link (cgo)
#   prometheus               a real Prometheus server and promtool for the observability tests
#   python3-enet             an independent ENet implementation for interop tests
#   iproute2                 network namespaces for multi-host tests
set -euo pipefail
source "$(dirname "$0")/lib.sh"
TIMING_GROUP=deps

PACKAGES=(libenet-dev pkg-config gcc prometheus python3-enet iproute2)

log() { printf '[deps] %s\n' "$*"; }
die() { printf '[deps] ERROR: %s\n' "$*" >&2; exit 1; }

missing=()
for p in "${PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	log "all Debian packages present: ${PACKAGES[*]}"
	timing_cached debian-packages
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	die "missing Debian packages: ${missing[*]}; run 'make deps' as root or: sudo apt-get install -y ${missing[*]}"
fi
log "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
timed "apt-get update" apt-get update -qq || die "apt-get update failed"
timed "apt-get install ${missing[*]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" || die "apt-get install failed"
# Debian starts the packaged Prometheus as a service where it can; the tests run their own.
if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
	systemctl stop prometheus || true
fi
log "installed: ${missing[*]}"
