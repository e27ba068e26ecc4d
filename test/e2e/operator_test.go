//go:build linux

package e2e

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// operatorStopGrace bounds the operator's graceful stop before it is killed.
const operatorStopGrace = 10 * time.Second

// operatorProcess is the operator binary run as a child process with the most verbose logging,
// its output appended to one log file across restarts.
type operatorProcess struct {
	bin, kubeconfig, logPath string
	// portRange holds the host ports of Dynamic game ports, random per run so that two test
	// binaries' servers do not pick the same ones.
	portRange string

	mu      sync.Mutex
	proc    *child
	metrics string // host:port of the running process's /metrics
}

func newOperatorProcess(bin, kubeconfig, logPath string) *operatorProcess {
	base := 30000 + 1000*rand.IntN(9)
	return &operatorProcess{bin: bin, kubeconfig: kubeconfig, logPath: logPath, portRange: fmt.Sprintf("%d-%d", base, base+999)}
}

// start runs a new operator process and waits until it answers its readiness probe and serves
// its metrics.
func (o *operatorProcess) start() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.proc != nil && !o.proc.exited() {
		return errors.New("operator already running")
	}
	addrs, err := freeAddrs(2)
	if err != nil {
		return err
	}
	metrics, health := addrs[0], addrs[1]
	logFile, err := os.OpenFile(o.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("operator log: %w", err)
	}
	defer func() { _ = logFile.Close() }() // the child has its own descriptor
	cmd := exec.Command(o.bin,
		"--metrics-bind-address="+metrics, "--health-probe-bind-address="+health,
		"--allocator-bind-address=0", "--port-range="+o.portRange,
		// Every V level: the token must not show in the most verbose log either.
		"--zap-log-level=10")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+o.kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	proc, err := spawn(cmd)
	if err != nil {
		return err
	}
	o.proc, o.metrics = proc, metrics
	// Ready means both servers answer: the health probe starts first, and answers for a moment
	// even when the manager fails to start the metrics server next and exits.
	answers := func(url string) bool {
		resp, err := httpClient.Get(url)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	for deadline := time.Now().Add(waitLimit); ; {
		if answers("http://"+health+"/readyz") && answers("http://"+metrics+"/metrics") && !proc.exited() {
			return nil
		}
		if proc.exited() {
			return fmt.Errorf("operator exited at start (%w); see %s", proc.err, o.logPath)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("operator not ready after %s; see %s", waitLimit, o.logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL to the operator's process group and waits until it is gone.
func (o *operatorProcess) kill() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.proc == nil {
		return errors.New("no operator process")
	}
	gone, err := o.proc.signalGroup(syscall.SIGKILL, waitLimit)
	if err == nil && !gone {
		err = fmt.Errorf("operator %d still running after SIGKILL", o.proc.pid())
	}
	return err
}

func (o *operatorProcess) stop() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.proc == nil {
		return nil
	}
	return o.proc.stop(operatorStopGrace)
}

// current returns the running process and its /metrics address.
func (o *operatorProcess) current() (*child, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.proc, o.metrics
}

// ensureOperator gives the test a running operator: a test before it may have left it killed.
func ensureOperator(t *testing.T) *child {
	t.Helper()
	if proc, _ := env.operator.current(); proc != nil && !proc.exited() {
		return proc
	}
	if err := env.operator.start(); err != nil {
		t.Fatal(err)
	}
	proc, _ := env.operator.current()
	return proc
}
