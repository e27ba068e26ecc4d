// Package install tests what users install, on a real API server and etcd (internal/testenv):
// the Helm chart (charts/netfleet) rendered, linted and installed with the repository's helm
// (bin/helm), and the kustomize bases (config/) built and applied with its kubectl
// (bin/k8s/<version>/kubectl). It has tests only, and imports internal/testenv and Kubernetes
// client libraries, nothing of the operator or the game server.
package install
