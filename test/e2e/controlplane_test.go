//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/netfleet/netfleet/internal/testenv"
)

// stopGrace is how long etcd and kube-apiserver get to stop after SIGTERM before SIGKILL, as in a
// crash. The API server drains its watches for tens of seconds and keeps no state of its own;
// etcd recovers its write-ahead log as after any crash, and the data it wrote is in the page
// cache, so nothing is lost.
const stopGrace = 500 * time.Millisecond

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
	env.ControlPlaneStopTimeout = stopGrace
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

// restart stops the API server and etcd (SIGTERM, then SIGKILL after stopGrace), keeps both down
// for down, starts them again on the same data and ports, and waits until the API server answers.
func (p *controlPlane) restart(ctx context.Context, down time.Duration, logf func(string, ...any)) error {
	began := time.Now()
	phase := func(what string) {
		logf("control plane restart: %s at %s", what, time.Since(began).Round(time.Millisecond))
	}
	api, etcd := p.env.ControlPlane.GetAPIServer(), p.env.ControlPlane.Etcd
	if err := killedAfterGrace(api.Stop()); err != nil {
		return fmt.Errorf("stop kube-apiserver: %w", err)
	}
	phase("kube-apiserver stopped")
	if err := killedAfterGrace(etcd.Stop()); err != nil {
		return fmt.Errorf("stop etcd: %w", err)
	}
	phase("etcd stopped")
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	// Both at once: the API server waits for etcd by itself.
	etcdErr := make(chan error, 1)
	go func() { etcdErr <- etcd.Start() }()
	apiErr := api.Start()
	if err := <-etcdErr; err != nil {
		return errors.Join(fmt.Errorf("start etcd: %w", err), apiErr)
	}
	if apiErr != nil {
		return fmt.Errorf("start kube-apiserver: %w", apiErr)
	}
	phase("etcd and kube-apiserver started")
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
	cp := p.env.ControlPlane
	return errors.Join(killedAfterGrace(cp.GetAPIServer().Stop()), killedAfterGrace(cp.Etcd.Stop()))
}

// killedAfterGrace passes on the error of an envtest process's Stop, except the one saying it was
// killed at the end of its grace period, which stopGrace makes part of the plan.
func killedAfterGrace(err error) error {
	if err != nil && strings.HasPrefix(err.Error(), "timeout waiting for process") {
		// envtest sent SIGKILL; give the kernel a moment to take the process and its ports.
		time.Sleep(100 * time.Millisecond)
		return nil
	}
	return err
}
