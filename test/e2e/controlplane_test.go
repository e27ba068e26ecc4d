//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/netfleet/netfleet/internal/testenv"
)

// controlPlane is etcd and kube-apiserver from the repository's binaries, with netfleet's CRDs.
// Its data directory, certificates and ports stay the same for its whole life, so it can be
// stopped and started again in place and every client (the operator, the pod runner, the tests)
// reconnects with the credentials it has.
type controlPlane struct {
	env        *envtest.Environment
	cfg        *rest.Config
	kubeconfig string
}

func startControlPlane(dir string) (*controlPlane, error) {
	env, err := testenv.Environment(true)
	if err != nil {
		return nil, err
	}
	etcdDir, certDir := filepath.Join(dir, "etcd"), filepath.Join(dir, "apiserver")
	for _, d := range []string{etcdDir, certDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("control plane: %w", err)
		}
	}
	// Given directories survive Stop (envtest removes only the ones it made up), and the ports
	// envtest picks on the first start are kept in these structs for the next.
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcdDir}
	env.ControlPlane.GetAPIServer().CertDir = certDir
	p := &controlPlane{env: env, kubeconfig: filepath.Join(dir, "kubeconfig")}
	if p.cfg, err = env.Start(); err != nil {
		// A start that failed late (e.g. on a CRD) leaves etcd and the API server running.
		return nil, errors.Join(fmt.Errorf("start control plane: %w", err), env.Stop())
	}
	if err := os.WriteFile(p.kubeconfig, env.KubeConfig, 0o600); err != nil {
		return nil, errors.Join(fmt.Errorf("write kubeconfig: %w", err), env.Stop())
	}
	return p, nil
}

// restart stops the API server and etcd (each gracefully, as in maintenance), keeps both down for
// down, starts them again on the same data and ports, and waits until the API server answers.
func (p *controlPlane) restart(ctx context.Context, down time.Duration) error {
	api, etcd := p.env.ControlPlane.GetAPIServer(), p.env.ControlPlane.Etcd
	if err := api.Stop(); err != nil {
		return fmt.Errorf("stop kube-apiserver: %w", err)
	}
	if err := etcd.Stop(); err != nil {
		return fmt.Errorf("stop etcd: %w", err)
	}
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := etcd.Start(); err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	if err := api.Start(); err != nil {
		return fmt.Errorf("start kube-apiserver: %w", err)
	}
	cs, err := kubernetes.NewForConfig(p.cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	for {
		if _, err := cs.Discovery().ServerVersion(); err == nil {
			return nil
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("API server does not answer after its restart: %w", ctx.Err())
		}
	}
}

func (p *controlPlane) stop() error {
	if err := p.env.Stop(); err != nil {
		return fmt.Errorf("stop control plane: %w", err)
	}
	return nil
}
