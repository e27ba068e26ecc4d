//go:build linux

package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/internal/node"
)

// Hang guards for a loaded 2-core machine, not speed assertions.
const (
	startLimit = 5 * time.Minute
	waitLimit  = 3 * time.Minute
	stopLimit  = 4 * time.Minute
)

// devNode is a running `netfleet-dev --node`.
type devNode struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	done   chan struct{}
	err    error
	dir    string
	ready  map[string]string
	k8s    client.Client
	nodeIP netip.Addr
	holder int
	ctr    []string
	marks  node.Marks
	// hostBefore is hostState before the node started.
	hostBefore string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startNode starts netfleet-dev --node with the tier's images and waits for its ready file.
func startNode(t *testing.T) *devNode {
	t.Helper()
	dir, err := os.MkdirTemp("", "netfleet-node-")
	if err != nil {
		t.Fatal(err)
	}
	readyFile := filepath.Join(build.dir, "ready")
	n := &devNode{out: &syncBuffer{}, done: make(chan struct{}), dir: dir}
	n.cmd = exec.Command(build.netfleetDev, "--node", "--dir", dir, "--crds", "",
		"--load", build.operatorArchive, "--load", build.gameServerArchive, "--ready-file", readyFile)
	n.cmd.Dir = build.root
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		n.err = n.cmd.Wait()
		close(n.done)
	}()
	deadline := time.After(startLimit)
	for {
		if _, err := os.Stat(readyFile); err == nil {
			break
		}
		select {
		case <-n.done:
			t.Fatalf("netfleet-dev --node exited (%v) before it was ready:\n%s", n.err, n.out)
		case <-deadline:
			n.stop(t)
			t.Fatalf("netfleet-dev --node not ready within %s:\n%s", startLimit, n.out)
		case <-time.After(250 * time.Millisecond):
		}
	}
	if n.ready, err = readReady(readyFile); err != nil {
		t.Fatal(err)
	}
	if n.nodeIP, err = netip.ParseAddr(n.ready["NETFLEET_DEV_NODE_IP"]); err != nil {
		t.Fatal(err)
	}
	if n.holder, err = strconv.Atoi(n.ready["NETFLEET_DEV_NODE_PID"]); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(n.ready["NETFLEET_DEV_NODE_MARKS"]), &n.marks); err != nil {
		t.Fatal(err)
	}
	n.ctr = []string{n.ready["NETFLEET_DEV_CTR"], "--address", n.ready["NETFLEET_DEV_CONTAINERD"], "--namespace", "k8s.io"}
	cfg, err := clientcmd.BuildConfigFromFlags("", n.ready["KUBECONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	ctrllog.SetLogger(logr.Discard())
	if n.k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	return n
}

// stop sends SIGTERM and waits for netfleet-dev to exit; it reports whether it exited in time.
func (n *devNode) stop(t *testing.T) bool {
	t.Helper()
	select {
	case <-n.done:
		return true
	default:
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
		return true
	case <-time.After(stopLimit):
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.done
		return false
	}
}

func readReady(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok || len(v) < 2 || v[0] != '\'' || v[len(v)-1] != '\'' {
			return nil, fmt.Errorf("ready file line %q is not KEY='value'", sc.Text())
		}
		vars[k] = strings.ReplaceAll(v[1:len(v)-1], `'\''`, "'")
	}
	return vars, sc.Err()
}

// run runs a command, bounded; an error carries its output.
func run(ctx context.Context, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, out)
	}
	return string(out), nil
}

// inNode runs a command in the node's namespaces.
func (n *devNode) inNode(argv ...string) (string, error) {
	return run(context.Background(), append([]string{"nsenter", "--target", strconv.Itoa(n.holder), "--mount", "--net", "--"}, argv...)...)
}

// taskPID returns the host pid of a running container, as containerd reports it.
func (n *devNode) taskPID(containerID string) (int, error) {
	out, err := run(context.Background(), append(n.ctr, "tasks", "ls")...)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == containerID {
			if f[2] != "RUNNING" {
				return 0, fmt.Errorf("container %s is %s", containerID, f[2])
			}
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("containerd has no task %s", containerID)
}

// containerID is a container status's ID without its runtime prefix.
func containerID(cs corev1.ContainerStatus) string {
	_, id, _ := strings.Cut(cs.ContainerID, "://")
	return id
}

// waitFor polls cond until it holds, failing the test after limit with cond's last error.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last error
	for {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, limit, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// hostState is what the machine's own network looks like, to compare before and after a node.
func hostState() (string, error) {
	var b strings.Builder
	for _, argv := range [][]string{
		{"iptables-save"}, {"iptables-legacy-save"}, {"ip", "-o", "link", "show"}, {"ip", "-4", "route", "show"}, {"ip", "netns", "list"},
	} {
		if _, err := exec.LookPath(argv[0]); err != nil {
			continue
		}
		out, err := run(context.Background(), argv...)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "$ %s\n", strings.Join(argv, " "))
		for _, line := range strings.Split(out, "\n") {
			// iptables-save's comments carry the time. Of the links, those a node could leave: its
			// end of the veth pair, a Pod's veth or a bridge; other links come and go with the
			// machine.
			if strings.HasPrefix(line, "#") || argv[0] == "ip" && argv[2] == "link" && !nodeLink.MatchString(line) {
				continue
			}
			b.WriteString(counters.ReplaceAllString(line, "") + "\n")
		}
	}
	return b.String(), nil
}

// nodeLink matches the links a node makes: nfnode<i>, veth*, the nf0 bridge, cni*.
var nodeLink = regexp.MustCompile(`^\d+: (nfnode|veth|nf0|cni)`)

// counters are iptables-save's packet and byte counts of a chain, which traffic changes.
var counters = regexp.MustCompile(`\[\d+:\d+\]`)
