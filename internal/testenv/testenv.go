// Package testenv starts the real kube-apiserver and etcd that `make test-assets` builds into
// bin/k8s/<version>, for tests that need a real API server. It finds the binaries itself (from
// KUBEBUILDER_ASSETS when set, else from the repository's bin/), so a plain `go test` works once
// the assets are built.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KubeVersion is the version of the control-plane binaries the tests run against.
const KubeVersion = "v1.37.2"

// RepoRoot returns the directory holding netfleet's go.mod, found by walking up from the working
// directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getwd: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// AssetsDir returns the directory holding kube-apiserver, etcd and kubectl.
func AssetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, checkAssets(dir)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "bin", "k8s", KubeVersion)
	return dir, checkAssets(dir)
}

func checkAssets(dir string) error {
	for _, name := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("control-plane binary %s missing in %s (run `make test-assets`): %w", name, dir, err)
		}
	}
	return nil
}

// CRDDir returns config/crd/bases of the repository.
func CRDDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "config", "crd", "bases"), nil
}

// Environment returns an envtest.Environment on the repository's binaries, installing netfleet's
// CRDs when withCRDs is set. The caller starts and stops it.
func Environment(withCRDs bool) (*envtest.Environment, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, ErrorIfCRDPathMissing: true}
	if withCRDs {
		crds, err := CRDDir()
		if err != nil {
			return nil, err
		}
		env.CRDDirectoryPaths = []string{crds}
	}
	return env, nil
}

// TB is the part of testing.TB that Start uses. The package does not import testing, so the
// development control plane (cmd/netfleet-dev) can share it without linking the test framework.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Cleanup(func())
}

// Start starts a real API server for one test and stops it at cleanup.
func Start(t TB, withCRDs bool) (*envtest.Environment, *rest.Config) {
	t.Helper()
	env, err := Environment(withCRDs)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	return env, cfg
}
