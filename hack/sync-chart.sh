#!/usr/bin/env bash
# Copies the generated CRDs into the Helm chart, so the chart installs exactly what
# config/crd/bases holds.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
src=$ROOT/config/crd/bases
dst=$ROOT/charts/netfleet/crds
[ -d "$src" ] || { echo "[manifests] no CRDs in $src" >&2; exit 1; }
if [ ! -d "$ROOT/charts/netfleet" ]; then
	echo "[manifests] no chart yet; CRDs stay in $src"
	exit 0
fi
mkdir -p "$dst"
rm -f "$dst"/*.yaml
cp "$src"/*.yaml "$dst"/
echo "[manifests] CRDs copied to $dst"
