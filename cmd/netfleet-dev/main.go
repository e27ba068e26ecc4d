// Command netfleet-dev runs netfleet's local control plane for development and demos: a real
// etcd and kube-apiserver (the binaries built into bin/k8s), the operator as a child process, the
// pod runner (internal/podrunner), which runs each game-server Pod as local processes on a
// loopback address of its own, and a stand-in for the garbage collector that deletes Pods whose
// owners are gone (there is no kube-controller-manager). With no container runtime on the
// machine, every hop — kubectl apply, reconcile, config push, game traffic, metrics — is still
// the real code.
//
// It prints one line per step, writes a kubeconfig (export KUBECONFIG=... is printed) and, once
// everything is up, the --ready-file, a shell-sourceable file for scripts to wait on. SIGINT or
// SIGTERM stops the operator, then the Pods (gracefully), then the API server and etcd, and
// removes the temporary state; a second signal exits at once. The operator and the Pods' processes
// die with netfleet-dev even if it is killed; etcd and kube-apiserver (started by envtest) do not.
//
// With --node it runs a real node instead of the pod runner and the operator process
// (internal/node): kube-controller-manager, kube-scheduler, and containerd with runc, the kubelet
// and kube-proxy in the node's own namespaces, with the image archives given by --load in
// containerd; the operator then runs as a Pod from its image (helm install the chart). A signal
// stops the node's Pods gracefully and then the node, and netfleet-dev fails if anything of the
// node is left on the machine. Killed with SIGKILL, it leaves the containers, their shims, etcd and
// kube-apiserver running, and the node's cgroups in place.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/netfleet/netfleet/internal/podrunner"
	"github.com/netfleet/netfleet/internal/testenv"
)

// operatorStopTimeout bounds the operator's graceful stop before it is killed.
const operatorStopTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		// From now on a second signal has its default effect: exit at once.
		stop()
	}()
	err := run(ctx, os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "netfleet-dev:", err)
		os.Exit(1)
	}
}

// config is the parsed command line.
type config struct {
	dir, kubeconfigOut, readyFile, operatorCmd, crdDir string
	keep                                               bool
	images                                             imageFlag
	firstAddress                                       string
	// node runs a real node (internal/node) instead of the pod runner; archives are the image
	// archives it loads into containerd.
	node     bool
	archives archiveFlag
}

// archiveFlag collects --load paths.
type archiveFlag []string

func (f *archiveFlag) String() string { return strings.Join(*f, ",") }

func (f *archiveFlag) Set(v string) error {
	if v == "" {
		return errors.New("empty image archive path")
	}
	*f = append(*f, v)
	return nil
}

// imageFlag collects --image name=path; the first use replaces the default map.
type imageFlag struct {
	m   map[string]string
	set bool
}

func (f *imageFlag) String() string {
	keys := make([]string, 0, len(f.m))
	for k := range f.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + f.m[k]
	}
	return strings.Join(parts, ",")
}

func (f *imageFlag) Set(v string) error {
	image, bin, ok := strings.Cut(v, "=")
	if !ok || image == "" || bin == "" {
		return fmt.Errorf("want image=binary, got %q", v)
	}
	if !f.set {
		f.m, f.set = map[string]string{}, true
	}
	f.m[image] = bin
	return nil
}

func parseFlags(args []string, out io.Writer) (*config, error) {
	root, rootErr := testenv.RepoRoot()
	inRepo := func(p string) string {
		if rootErr != nil {
			return ""
		}
		return filepath.Join(root, p)
	}
	defaultOperator := ""
	if rootErr == nil {
		// Every endpoint on loopback; the allocator's token Secret in "default", which exists
		// (netfleet-system does not on a fresh API server).
		defaultOperator = inRepo("bin/operator") + " --metrics-bind-address=127.0.0.1:18080 --health-probe-bind-address=127.0.0.1:18081" +
			" --allocator-bind-address=127.0.0.1:18090 --allocator-token-secret=default/netfleet-allocator-token"
	}
	// The game-server image under its published name (the chart's and the samples') and its
	// short name both run bin/gameserver.
	gameserver := inRepo("bin/gameserver")
	c := &config{images: imageFlag{m: map[string]string{"ghcr.io/netfleet/gameserver": gameserver, "netfleet/gameserver": gameserver}}}
	fs := flag.NewFlagSet("netfleet-dev", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.dir, "dir", "", "state directory (kubeconfig, operator log, pod logs); default a new temporary directory, removed on exit unless --keep")
	fs.BoolVar(&c.keep, "keep", false, "keep the temporary state directory on exit")
	fs.StringVar(&c.kubeconfigOut, "kubeconfig-out", "", "where to write the admin kubeconfig; default <dir>/kubeconfig")
	fs.StringVar(&c.readyFile, "ready-file", "", "file written (shell-sourceable KEY='value' lines) once everything is up, removed on exit")
	fs.StringVar(&c.operatorCmd, "operator-cmd", defaultOperator,
		"operator command line, split on spaces; it gets KUBECONFIG in its environment")
	fs.Var(&c.images, "image", "image=binary: run Pods of image (any tag) with binary; repeatable, replaces the default")
	fs.StringVar(&c.crdDir, "crds", inRepo("config/crd/bases"), "directory of CRDs to install, if it exists")
	fs.StringVar(&c.firstAddress, "first-address", podrunner.DefaultFirstAddress.String(), "first loopback address given to a Pod")
	fs.BoolVar(&c.node, "node", false, "run a real node (containerd, runc, the kubelet, kube-proxy, CNI) instead of the pod runner; the operator then runs as a Pod (helm install the chart); needs root and `make node-assets`")
	fs.Var(&c.archives, "load", "with --node: an OCI image archive (`make images`) to load into containerd; repeatable")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.node {
		for _, podRunnerOnly := range []string{"operator-cmd", "image", "first-address"} {
			if set[podRunnerOnly] {
				return nil, fmt.Errorf("--%s is for the pod runner; with --node the operator and the game servers run from their images (helm install the chart, --load the images)", podRunnerOnly)
			}
		}
		return c, nil
	}
	if len(c.archives) > 0 {
		return nil, errors.New("--load needs --node: the pod runner runs binaries, not images")
	}
	if strings.TrimSpace(c.operatorCmd) == "" {
		return nil, fmt.Errorf("no --operator-cmd, and no default: %w", rootErr)
	}
	for image, bin := range c.images.m {
		if bin == "" {
			return nil, fmt.Errorf("no binary for image %s (--image), and no default: %w", image, rootErr)
		}
	}
	return c, nil
}

func run(ctx context.Context, args []string, out io.Writer) (err error) {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	say := func(format string, a ...any) { _, _ = fmt.Fprintf(out, "netfleet-dev: "+format+"\n", a...) }
	logger := funcr.New(func(prefix, args string) { _, _ = fmt.Fprintln(out, prefix, args) }, funcr.Options{})
	ctrllog.SetLogger(logger)
	if c.node {
		return runNode(ctx, c, say)
	}

	operatorArgs := strings.Fields(c.operatorCmd)
	operatorBin, lookErr := exec.LookPath(operatorArgs[0])
	if lookErr != nil {
		return fmt.Errorf("operator binary %s not found (build it with `make build`, or point --operator-cmd at one): %w", operatorArgs[0], lookErr)
	}
	first, err := netip.ParseAddr(c.firstAddress)
	if err != nil {
		return fmt.Errorf("--first-address: %w", err)
	}

	// Everything started is undone in reverse order, whatever fails.
	var undo []func() error
	defer func() {
		for i := len(undo) - 1; i >= 0; i-- {
			err = errors.Join(err, undo[i]())
		}
	}()

	dir := c.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "netfleet-dev-"); err != nil {
			return fmt.Errorf("state directory: %w", err)
		}
		undo = append(undo, func() error {
			if c.keep {
				say("kept state directory %s", dir)
				return nil
			}
			say("removing %s", dir)
			return os.RemoveAll(dir)
		})
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	opts := podrunner.Options{Images: c.images.m, Dir: filepath.Join(dir, "pods"), FirstAddress: first}
	if err := opts.Validate(); err != nil {
		return err
	}
	say("state directory %s", dir)

	// The control plane.
	_, crdErr := os.Stat(c.crdDir)
	withCRDs := c.crdDir != "" && crdErr == nil
	env, err := testenv.Environment(false)
	if err != nil {
		return err
	}
	if withCRDs {
		env.CRDDirectoryPaths = []string{c.crdDir}
	}
	say("starting etcd and kube-apiserver from %s", env.BinaryAssetsDirectory)
	began := time.Now()
	cfg, err := env.Start()
	if err != nil {
		// A partial start (etcd up, API server not) still needs stopping.
		return errors.Join(fmt.Errorf("start control plane: %w", err), env.Stop())
	}
	undo = append(undo, func() error {
		say("stopping kube-apiserver and etcd")
		return env.Stop()
	})
	say("API server %s up in %s", cfg.Host, time.Since(began).Round(100*time.Millisecond))
	if withCRDs {
		say("installed %d CRDs from %s", len(env.CRDs), c.crdDir)
	} else {
		say("no CRDs installed (%s not found)", c.crdDir)
	}

	kubeconfig := c.kubeconfigOut
	if kubeconfig == "" {
		kubeconfig = filepath.Join(dir, "kubeconfig")
	}
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if c.kubeconfigOut != "" {
		undo = append(undo, func() error { return removeIfExists(kubeconfig) })
	}
	say("kubeconfig for an admin user written; use it with:\n  export KUBECONFIG=%s", kubeconfig)

	// The pod runner, in-process.
	runner, err := podrunner.New(cfg, opts)
	if err != nil {
		return err
	}
	runCtx, stopRunner := context.WithCancel(ctrllog.IntoContext(context.Background(), logger))
	runnerDone := make(chan error, 1)
	go func() { runnerDone <- runner.Start(runCtx) }()
	undo = append(undo, func() error {
		say("stopping pods")
		stopRunner()
		return <-runnerDone
	})
	select {
	case <-runner.Started():
	case err := <-runnerDone:
		runnerDone <- err
		return fmt.Errorf("pod runner: %w", err)
	case <-ctx.Done():
		return nil
	}
	say("pod runner started: images %s; pod logs under %s", c.images.String(), opts.Dir)

	// The garbage collector's part for Pods.
	gcClient, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("garbage collector client: %w", err)
	}
	gc := &podCollector{c: gcClient, log: logger.WithName("podgc")}
	gcCtx, stopGC := context.WithCancel(context.Background())
	gcDone := make(chan struct{})
	go func() {
		defer close(gcDone)
		gc.run(gcCtx)
	}()
	undo = append(undo, func() error {
		stopGC()
		<-gcDone
		return nil
	})
	say("garbage collector for pods started (deletes pods whose owners are gone)")

	if ctx.Err() != nil {
		return nil
	}

	// The operator, as a child process.
	operator, err := startOperator(operatorBin, operatorArgs[1:], kubeconfig, filepath.Join(dir, "operator.log"))
	if err != nil {
		return err
	}
	undo = append(undo, func() error {
		say("stopping operator")
		return operator.stop(operatorStopTimeout)
	})
	say("operator started (pid %d): %s; log %s", operator.cmd.Process.Pid, c.operatorCmd, operator.logPath)

	if c.readyFile != "" {
		if err := writeReadyFile(c.readyFile, []readyVar{
			{"KUBECONFIG", kubeconfig},
			{"NETFLEET_DEV_DIR", dir},
			{"NETFLEET_DEV_API_SERVER", cfg.Host},
			{"NETFLEET_DEV_OPERATOR_PID", strconv.Itoa(operator.cmd.Process.Pid)},
			{"NETFLEET_DEV_OPERATOR_LOG", operator.logPath},
			{"NETFLEET_DEV_POD_LOGS", opts.Dir},
		}); err != nil {
			return err
		}
		undo = append(undo, func() error { return removeIfExists(c.readyFile) })
		say("ready file %s written", c.readyFile)
	}
	say("ready; stop with Ctrl-C")

	select {
	case <-ctx.Done():
		say("shutting down")
		return nil
	case <-operator.done:
		if operator.err == nil {
			return fmt.Errorf("operator exited unexpectedly with status 0; see %s", operator.logPath)
		}
		return fmt.Errorf("operator exited unexpectedly; see %s: %w", operator.logPath, operator.err)
	case err := <-runnerDone:
		runnerDone <- err
		return fmt.Errorf("pod runner stopped unexpectedly: %w", err)
	}
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

type readyVar struct{ name, value string }

// writeReadyFile writes KEY='value' lines whole (through a rename), so a script waiting for the
// file never reads half of it.
func writeReadyFile(path string, vars []readyVar) error {
	var b strings.Builder
	for _, v := range vars {
		fmt.Fprintf(&b, "%s='%s'\n", v.name, strings.ReplaceAll(v.value, "'", `'\''`))
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write ready file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write ready file: %w", err)
	}
	return nil
}

// childProcess is the operator: a process group of its own that dies with netfleet-dev.
type childProcess struct {
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{} // closed once it has exited; err is then set
	err     error
}

func startOperator(bin string, args []string, kubeconfig, logPath string) (*childProcess, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("operator log: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start operator: %w", err)
	}
	p := &childProcess{cmd: cmd, logPath: logPath, logFile: logFile, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM, and SIGKILL to the whole group if the process has not exited by timeout.
func (p *childProcess) stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop operator: %w", err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("kill operator: %w", err)
		}
		<-p.done
	}
	// Whatever the operator left in its group goes with it.
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill operator group: %w", err)
	}
	return nil
}
