package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// waitLimit bounds every wait; generous for a loaded 2-core machine.
const waitLimit = 60 * time.Second

// syncBuffer collects run's output, written from several goroutines.
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

// readReady parses the ready file's KEY='value' lines.
func readReady(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok || len(v) < 2 || v[0] != '\'' || v[len(v)-1] != '\'' {
			t.Fatalf("ready file line %q is not KEY='value'", sc.Text())
		}
		vars[k] = v[1 : len(v)-1]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return vars
}

// alive reports whether pid is a live process; a zombie counts as gone.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// sleeperPod is a Pod of the test's game-server image, which is sleep.
func sleeperPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "server", Image: "netfleet/gameserver:dev", Args: []string{"600"},
		}}},
	}
}

// runningPID creates pod, waits until it runs and returns its process id.
func runningPID(t *testing.T, c client.Client, pod *corev1.Pod) int {
	t.Helper()
	if err := c.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(waitLimit); ; {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), pod); err != nil {
			t.Fatal(err)
		}
		if cs := pod.Status.ContainerStatuses; pod.Status.Phase == corev1.PodRunning && len(cs) == 1 && cs[0].Ready {
			pid, err := strconv.Atoi(strings.TrimPrefix(cs[0].ContainerID, "local://"))
			if err != nil {
				t.Fatalf("container id %q: %v", cs[0].ContainerID, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s not running after %s: %+v", pod.Name, waitLimit, pod.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStartRunStop brings the whole local control plane up with stand-ins for the operator and
// the game server (sleep), runs a Pod on it and shuts it down.
func TestStartRunStop(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	args := []string{
		"--image", "netfleet/gameserver=" + sleep,
		"--operator-cmd", sleep + " 600",
		"--ready-file", ready,
		"--first-address", "127.0.91.2",
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, out) }()

	deadline := time.Now().Add(waitLimit)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("run ended before ready: %v\n%s", err, out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready file after %s:\n%s", waitLimit, out)
		}
	}
	vars := readReady(t, ready)
	dir, kubeconfig := vars["NETFLEET_DEV_DIR"], vars["KUBECONFIG"]
	operatorPID, err := strconv.Atoi(vars["NETFLEET_DEV_OPERATOR_PID"])
	if err != nil || dir == "" || kubeconfig == "" {
		t.Fatalf("ready file: %v (%v)", vars, err)
	}
	if !strings.Contains(out.String(), "export KUBECONFIG="+kubeconfig) {
		t.Errorf("output does not say how to use the kubeconfig:\n%s", out)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pod := sleeperPod("sleeper")
	podPID := runningPID(t, c, pod)
	if pod.Status.PodIP != "127.0.91.2" || pod.Spec.NodeName != "netfleet-dev-127-0-91-2" {
		t.Errorf("pod on %s with IP %s", pod.Spec.NodeName, pod.Status.PodIP)
	}
	if !alive(operatorPID) || !alive(podPID) {
		t.Fatalf("operator (%d) or pod process (%d) not running", operatorPID, podPID)
	}

	// Deleting a Pod's owner deletes the Pod and so stops its process.
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "default"}}
	if err := c.Create(context.Background(), owner); err != nil {
		t.Fatal(err)
	}
	owned := sleeperPod("owned")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
	ownedPID := runningPID(t, c, owned)
	if err := c.Delete(context.Background(), owner); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(waitLimit); ; {
		err := c.Get(context.Background(), client.ObjectKeyFromObject(owned), owned)
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("owned pod still there after its owner was deleted (%v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if alive(ownedPID) {
		t.Errorf("process %d of the collected pod still alive", ownedPID)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v\n%s", err, out)
		}
	case <-time.After(waitLimit):
		t.Fatalf("run did not return after %s:\n%s", waitLimit, out)
	}
	for _, pid := range []int{operatorPID, podPID} {
		if alive(pid) {
			t.Errorf("process %d outlived netfleet-dev", pid)
		}
	}
	for _, p := range []string{ready, dir} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind (%v)", p, err)
		}
	}
	for _, step := range []string{"stopping operator", "stopping pods", "stopping kube-apiserver and etcd", "removing " + dir} {
		if !strings.Contains(out.String(), "netfleet-dev: "+step) {
			t.Errorf("output lacks step %q:\n%s", step, out)
		}
	}
}

func TestRefusesBadInvocations(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "operator")
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"missing operator", []string{"--operator-cmd", missing}, "operator binary " + missing + " not found"},
		{"empty operator", []string{"--operator-cmd", " "}, "no --operator-cmd"},
		{"bad image flag", []string{"--image", "netfleet/gameserver"}, "want image=binary"},
		{"missing image binary", []string{"--operator-cmd", sleep, "--image", "x=" + missing}, "image x: binary"},
		{"bad address", []string{"--operator-cmd", sleep, "--first-address", "localhost"}, "--first-address"},
		{"stray argument", []string{"up"}, "unexpected arguments"},
		{"load without node", []string{"--load", "operator.tar"}, "--load needs --node"},
		{"node with operator command", []string{"--node", "--operator-cmd", sleep}, "--operator-cmd is for the pod runner"},
		{"node with image binary", []string{"--node", "--image", "x=" + sleep}, "--image is for the pod runner"},
		{"node with missing archive", []string{"--node", "--dir", t.TempDir(), "--load", missing + ".tar"}, "make images"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &syncBuffer{}
			err := run(context.Background(), tc.args, out)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if strings.Contains(out.String(), "starting etcd") {
				t.Errorf("started the control plane before refusing:\n%s", out)
			}
		})
	}
}

// TestOperatorExitEndsRun: when the operator dies, netfleet-dev says so, tears everything down
// and fails.
func TestOperatorExitEndsRun(t *testing.T) {
	falseBin, err := exec.LookPath("false")
	if err != nil {
		t.Fatal(err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "state")
	out := &syncBuffer{}
	err = run(context.Background(), []string{"--operator-cmd", falseBin, "--image", "x=" + sleep, "--dir", dir}, out)
	if err == nil || !strings.Contains(err.Error(), "operator exited unexpectedly") {
		t.Fatalf("error %v, want the operator's exit\n%s", err, out)
	}
	if !strings.Contains(out.String(), "netfleet-dev: stopping kube-apiserver and etcd") {
		t.Errorf("control plane not stopped:\n%s", out)
	}
	// A state directory given with --dir is kept, with the operator's log in it.
	if _, err := os.Stat(filepath.Join(dir, "operator.log")); err != nil {
		t.Errorf("operator log: %v", err)
	}
}
