//go:build linux

package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/internal/podrunner"
	"github.com/netfleet/netfleet/internal/testbin"
	"github.com/netfleet/netfleet/internal/testenv"
)

// gameServerImage is the image of the test Pods; the pod runner runs the cmd/gameserver built for
// the run in its place. arenaImage is the example game's (examples/arena), which runs its
// command.
const (
	gameServerImage = "netfleet/gameserver"
	arenaImage      = "netfleet/arena"
)

// waitLimit bounds every wait for the system to converge: a hang guard generous enough for a
// loaded 2-core machine, not a speed assertion.
const waitLimit = 90 * time.Second

var scheme = runtime.NewScheme()

// env is the package's shared environment: one control plane, one pod runner, one operator
// process. Tests run one at a time, each in its own namespace.
var env *harness

// harness is everything TestMain starts.
type harness struct {
	dir           string
	root          string
	plane         *controlPlane
	k8s           client.Client // reads straight from the API server
	gameServerBin string
	arenaBin      string
	operator      *operatorProcess
	runnerDir     string
	log           *lockedFile // the pod runner's and the garbage collector's log

	stop context.CancelFunc
	bg   sync.WaitGroup
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	flag.Parse()
	h, err := setUp()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: set-up:", err)
		if h != nil {
			if err := h.tearDown(false); err != nil {
				fmt.Fprintln(os.Stderr, "e2e: tear-down:", err)
			}
		}
		return 1
	}
	env = h
	code := m.Run()
	if err := h.tearDown(code == 0); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: tear-down:", err)
		code = 1
	}
	return code
}

// setUp builds the binaries and starts the control plane, the pod runner, the garbage collector
// and the operator. On error it returns what it started, for tearDown.
func setUp() (*harness, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "netfleet-e2e-")
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	h := &harness{dir: dir, root: root, runnerDir: filepath.Join(dir, "pods")}
	began := time.Now()
	step := func(what string) {
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "e2e: %s (%s)\n", what, time.Since(began).Round(100*time.Millisecond))
		}
	}
	bins, err := testbin.Build(root, filepath.Join(dir, "bin"), nil, "./cmd/operator", "./cmd/gameserver", "./examples/arena/cmd/arena")
	if err != nil {
		return h, fmt.Errorf("build the operator and the game servers: %w", err)
	}
	h.gameServerBin, h.arenaBin = bins["./cmd/gameserver"], bins["./examples/arena/cmd/arena"]
	step("built the operator and the game servers")

	if h.log, err = openLog(filepath.Join(dir, "harness.log")); err != nil {
		return h, err
	}
	logger := funcr.New(func(prefix, args string) { h.log.line(prefix + " " + args) }, funcr.Options{})
	ctrllog.SetLogger(logger)

	if h.plane, err = startControlPlane(filepath.Join(dir, "control-plane")); err != nil {
		return h, err
	}
	step("control plane up")
	if h.k8s, err = client.New(h.plane.cfg, client.Options{Scheme: scheme}); err != nil {
		return h, fmt.Errorf("client: %w", err)
	}

	ctx, stop := context.WithCancel(ctrllog.IntoContext(context.Background(), logger))
	h.stop = stop
	// A random loopback /24 keeps the Pods' addresses clear of other test binaries' servers.
	first := netip.AddrFrom4([4]byte{127, byte(100 + rand.IntN(100)), byte(rand.IntN(250)), 2})
	runner, err := podrunner.New(h.plane.cfg, podrunner.Options{
		Images:       map[string]string{gameServerImage: h.gameServerBin, arenaImage: h.arenaBin},
		Dir:          h.runnerDir,
		FirstAddress: first,
		NodePrefix:   "e2e",
	})
	if err != nil {
		return h, err
	}
	runnerErr := make(chan error, 1)
	h.bg.Go(func() { runnerErr <- runner.Start(ctx) })
	select {
	case <-runner.Started():
	case err := <-runnerErr:
		return h, fmt.Errorf("pod runner: %w", err)
	case <-time.After(waitLimit):
		return h, errors.New("pod runner did not start")
	}
	gc := &collector{c: h.k8s, log: logger.WithName("gc")}
	h.bg.Go(func() { gc.run(ctx) })

	h.operator = newOperatorProcess(bins["./cmd/operator"], h.plane.kubeconfig, filepath.Join(dir, "operator.log"))
	if err := h.operator.start(); err != nil {
		return h, err
	}
	step("pod runner and operator up")
	return h, nil
}

// tearDown stops everything in reverse order. The state directory (logs of the operator, the
// Pods and the harness) is kept when a test failed.
func (h *harness) tearDown(passed bool) error {
	var errs []error
	if h.operator != nil {
		errs = append(errs, h.operator.stop())
	}
	if h.stop != nil {
		h.stop()
		h.bg.Wait()
	}
	if h.plane != nil {
		errs = append(errs, h.plane.stop())
	}
	if h.log != nil {
		errs = append(errs, h.log.close())
	}
	if passed {
		errs = append(errs, os.RemoveAll(h.dir))
	} else {
		fmt.Fprintln(os.Stderr, "e2e: logs kept in", h.dir)
	}
	return errors.Join(errs...)
}
