// Package e2e holds netfleet's end-to-end tests. They run what users run against a real API
// server and etcd (internal/testenv): the Helm chart (charts/netfleet) installed with the
// repository's helm (bin/helm), and the kustomize bases (config/) built and applied with its
// kubectl (bin/k8s/<version>/kubectl). The package has tests only; it imports internal/testenv
// and Kubernetes client libraries, nothing of the operator or the game server.
package e2e
