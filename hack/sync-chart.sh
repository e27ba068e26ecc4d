#!/usr/bin/env bash
# Copies what `make manifests` generates into the Helm chart, so the chart installs exactly what
# config/ holds: the CRDs (config/crd/bases -> charts/netfleet/crds) and the operator's RBAC rules
# (config/rbac/role.yaml and leader_election_role.yaml -> charts/netfleet/rbac/, whose rules the
# chart's ClusterRole and Role templates read). `make verify` fails when the copies differ from
# what is committed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
chart=$ROOT/charts/netfleet
crds=$ROOT/config/crd/bases
[ -d "$crds" ] || { echo "[manifests] no CRDs in $crds" >&2; exit 1; }
for f in role.yaml leader_election_role.yaml; do
	[ -f "$ROOT/config/rbac/$f" ] || { echo "[manifests] no config/rbac/$f" >&2; exit 1; }
done

mkdir -p "$chart/crds" "$chart/rbac"
rm -f "$chart/crds"/*.yaml
cp "$crds"/*.yaml "$chart/crds/"
copy_rules() {
	{
		echo "# Copied from config/rbac/$1 by hack/sync-chart.sh (make manifests); do not edit."
		cat "$ROOT/config/rbac/$1"
	} >"$chart/rbac/$2"
}
copy_rules role.yaml operator-role.yaml
copy_rules leader_election_role.yaml leader-election-role.yaml
echo "[manifests] CRDs and RBAC rules copied into $chart"
