// Package e2e holds netfleet's end-to-end tests: one real control plane (etcd and
// kube-apiserver), the pod runner that starts game-server Pods as local processes, a garbage
// collector for Pods, and the operator as a process of its own, shared by every test, each test
// in a namespace of its own.
package e2e
