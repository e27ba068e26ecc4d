# Sourced by the hack/ scripts that run netfleet: it makes the repository root the working
# directory and puts bin/ and the control-plane binaries (`make test-assets`) on PATH.
# KUBE_VERSION is the control-plane version, as in the Makefile.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$ROOT/bin/k8s/$KUBE_VERSION}
export PATH=$ROOT/bin:$KUBEBUILDER_ASSETS:$PATH
