#!/usr/bin/env bash
# make dev: builds the commands and runs the local control plane (bin/netfleet-dev: etcd,
# kube-apiserver, the operator, and the pod runner that starts game-server Pods as local processes)
# in the foreground until Ctrl-C, for interactive kubectl. The kubeconfig is always
# _out/dev/kubeconfig, and _out/dev/ready (shell-sourceable) appears once everything is up.
# Arguments are passed to netfleet-dev (e.g. --keep to keep the pod logs).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
OUT=$ROOT/_out/dev

# netfleet-dev's default operator listens on fixed loopback ports; a second control plane would
# have its operator exit at once, so say why up front (a custom --operator-cmd picks its own).
if [[ " $* " != *" --operator-cmd"* ]]; then
	busy=$(ss -Hlnt '( sport = :18080 or sport = :18081 or sport = :18090 )' 2>/dev/null || true)
	if [ -n "$busy" ]; then
		printf '%s\n' "$busy" >&2
		echo "[dev] the operator's ports 18080, 18081 and 18090 must be free: is another \`make dev\` or \`make demo\` running?" >&2
		exit 1
	fi
fi

"$ROOT/hack/build.sh"
mkdir -p "$OUT"
rm -f "$OUT/ready"
cat <<MSG
[dev] starting the local control plane; once it prints "ready", in another shell:

  export KUBECONFIG=$OUT/kubeconfig PATH=$ROOT/bin:$ROOT/bin/k8s/$KUBE_VERSION:\$PATH
  kubectl apply -f config/samples/netfleet_v1alpha1_fleet.yaml
  kubectl get gs,flt
  kubectl netfleet peers <gameserver> --direct

[dev] the allocator endpoint is http://127.0.0.1:18090 (token: kubectl get secret netfleet-allocator-token -o jsonpath='{.data.token}' | base64 -d)
MSG
exec "$ROOT/bin/netfleet-dev" --kubeconfig-out "$OUT/kubeconfig" --ready-file "$OUT/ready" "$@"
