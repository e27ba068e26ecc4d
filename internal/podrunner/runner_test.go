package podrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/netfleet/netfleet/internal/testbin"
	"github.com/netfleet/netfleet/internal/testenv"
)

const (
	// testImage is mapped to the podprog binary; testFirstAddress keeps the tests' Pods clear of
	// the default addresses a development control plane may be using.
	testImage      = "netfleet/test-prog"
	testNodePrefix = "podrunner-test"
	// waitLimit bounds every wait; generous for a loaded 2-core machine.
	waitLimit = 45 * time.Second
)

var (
	testFirstAddress = netip.MustParseAddr("127.0.90.2")
	cfg              *rest.Config
	k8s              client.Client
	progPath         string
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "podrunner-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	progPath = filepath.Join(tmp, "podprog")
	if out, err := testbin.GoBuild("", nil, "-o", progPath, "./testdata/podprog").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build podprog: %v\n%s", err, out)
		return 1
	}
	env, err := testenv.Environment(false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg, err = env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s, err = client.New(cfg, client.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

var namespaces atomic.Int32

// namespace creates a namespace of its own for a test (repeated runs share the API server).
func namespace(t *testing.T, base string) string {
	t.Helper()
	ns := fmt.Sprintf("%s-%d", base, namespaces.Add(1))
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// startRunner runs a Runner for namespace ns until the returned stop is called or
// the test ends; stop returns Start's error.
func startRunner(t *testing.T, ns string, tweak func(*Options)) (*Runner, func() error) {
	t.Helper()
	ctx := context.Background()
	opts := Options{
		Images:       map[string]string{testImage: progPath},
		Dir:          t.TempDir(),
		Namespace:    ns,
		FirstAddress: testFirstAddress,
		NodePrefix:   testNodePrefix,
		// Readiness probes every 200 ms rather than 1 s keep the tests short.
		MaxProbePeriod: 200 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&opts)
	}
	r, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(log.IntoContext(ctx, testr.New(t)))
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	select {
	case <-r.Started():
	case err := <-done:
		cancel()
		t.Fatalf("runner ended at start: %v", err)
	case <-time.After(waitLimit):
		cancel()
		t.Fatal("runner did not start")
	}
	stopped := false
	var stopErr error
	stop := func() error {
		if stopped {
			return stopErr
		}
		stopped = true
		cancel()
		select {
		case stopErr = <-done:
		case <-time.After(waitLimit):
			stopErr = errors.New("runner did not stop")
		}
		return stopErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop runner: %v", err)
		}
	})
	return r, stop
}

// podOpts shape a test Pod.
type podOpts struct {
	policy corev1.RestartPolicy
	env    []corev1.EnvVar
	mutate func(*corev1.Pod)
}

// testPod is a podprog Pod with its admin port 8080, a readiness probe on it (period 10 s, which
// the runner caps) and its report written to out.
func testPod(ns, name, out string, o podOpts) *corev1.Pod {
	grace := int64(5)
	env := append([]corev1.EnvVar{
		{Name: "NETFLEET_ADMIN_PORT", Value: "8080"},
		{Name: "PODPROG_OUT", Value: out},
	}, o.env...)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                 o.policy,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:  "server",
				Image: testImage + ":dev",
				Env:   env,
				Ports: []corev1.ContainerPort{{Name: "admin", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("admin")}},
					PeriodSeconds: 10,
				},
			}},
		},
	}
	if o.mutate != nil {
		o.mutate(pod)
	}
	return pod
}

func createPod(t *testing.T, pod *corev1.Pod) types.NamespacedName {
	t.Helper()
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	return client.ObjectKeyFromObject(pod)
}

// waitPod polls the Pod until ok accepts it.
func waitPod(t *testing.T, key types.NamespacedName, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	pod := &corev1.Pod{}
	for {
		err := k8s.Get(context.Background(), key, pod)
		if err == nil && ok(pod) {
			return pod
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: not %s after %s (get error %v); status:\n%s", key, what, waitLimit, err, dump(pod.Status))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitGone(t *testing.T, key types.NamespacedName) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		err := k8s.Get(context.Background(), key, &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s still there after %s (get error %v)", key, waitLimit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func dump(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func isReady(pod *corev1.Pod) bool {
	c := findCondition(pod.Status.Conditions, corev1.PodReady)
	return pod.Status.Phase == corev1.PodRunning && c != nil && c.Status == corev1.ConditionTrue
}

// progReport is what podprog writes on start.
type progReport struct {
	PID      int               `json:"pid"`
	Args     []string          `json:"args"`
	Env      map[string]string `json:"env"`
	ChildPID int               `json:"childPid"`
}

// readReport waits for a report of a process other than notPID.
func readReport(t *testing.T, path string, notPID int) progReport {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		var rep progReport
		b, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(b, &rep)
		}
		if err == nil && rep.PID != notPID {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new report in %s after %s: %v", path, waitLimit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive reports whether pid is a live process; a zombie (exited, not yet reaped by whoever
// inherited it) counts as gone.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesized command name.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func waitDead(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still alive after %s", pid, waitLimit)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// askExit asks the Pod's podprog to exit with code.
func askExit(t *testing.T, pod *corev1.Pod, code int) {
	t.Helper()
	url := fmt.Sprintf("http://%s:8080/exit?code=%d", pod.Status.PodIP, code)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
}

func TestRunsPodWithResolvedEnvironment(t *testing.T) {
	ns := namespace(t, "env")
	r, _ := startRunner(t, ns, nil)
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "admin-token", Namespace: ns},
		Data: map[string][]byte{"token": []byte("s3cret")}}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
		Data: map[string]string{"mode": "demo", "level": "3"}}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "report.json")
	pod := testPod(ns, "game-1", out, podOpts{
		policy: corev1.RestartPolicyAlways,
		env: []corev1.EnvVar{
			{Name: "NETFLEET_ADMIN_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "admin-token"}, Key: "token"}}},
			{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "mode"}}},
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: "TEAM", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['team']"}}},
			{Name: "GREETING", Value: "hello $(POD_NAME)"},
			{Name: "NETFLEET_BIND_ADDRESS", Value: "0.0.0.0"},
			{Name: "NETFLEET_GAME_PORT", Value: "7777"},
		},
		mutate: func(p *corev1.Pod) {
			p.Labels = map[string]string{"team": "blue"}
			c := &p.Spec.Containers[0]
			c.EnvFrom = []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
			c.Command = []string{"/podprog", "--verbose"}
			c.Args = []string{"--name=$(POD_NAME)", "$$(POD_NAME)"}
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: "game", ContainerPort: 7777, HostPort: 7100, Protocol: corev1.ProtocolUDP})
		},
	})
	key := createPod(t, pod)
	got := waitPod(t, key, "running and ready", isReady)

	wantIP := testFirstAddress.String()
	wantNode := nodeName(testNodePrefix, testFirstAddress)
	if got.Spec.NodeName != wantNode || got.Status.PodIP != wantIP || got.Status.HostIP != wantIP ||
		len(got.Status.PodIPs) != 1 || got.Status.PodIPs[0].IP != wantIP || got.Status.StartTime == nil {
		t.Fatalf("placement: node %q podIP %q hostIP %q podIPs %v startTime %v; want node %s on %s",
			got.Spec.NodeName, got.Status.PodIP, got.Status.HostIP, got.Status.PodIPs, got.Status.StartTime, wantNode, wantIP)
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		if c := findCondition(got.Status.Conditions, ct); c == nil || c.Status != corev1.ConditionTrue {
			t.Errorf("condition %s: %+v", ct, c)
		}
	}
	cs := got.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Running == nil || !cs[0].Ready || cs[0].RestartCount != 0 || cs[0].Started == nil || !*cs[0].Started {
		t.Errorf("container status: %s", dump(cs))
	}

	var node corev1.Node
	if err := k8s.Get(ctx, client.ObjectKey{Name: wantNode}, &node); err != nil {
		t.Fatalf("node: %v", err)
	}
	if !nodeServes(&node.Status, testFirstAddress) {
		t.Errorf("node status: %s", dump(node.Status))
	}

	rep := readReport(t, out, 0)
	want := map[string]string{
		"NETFLEET_ADMIN_TOKEN":  "s3cret",
		"MODE":                  "demo",
		"CFG_mode":              "demo",
		"CFG_level":             "3",
		"POD_IP":                wantIP,
		"POD_NAME":              "game-1",
		"NODE":                  wantNode,
		"TEAM":                  "blue",
		"GREETING":              "hello game-1",
		"HOSTNAME":              "game-1",
		"NETFLEET_BIND_ADDRESS": wantIP,
		"NETFLEET_GAME_PORT":    "7100",
	}
	for k, v := range want {
		if rep.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, rep.Env[k], v)
		}
	}
	if wantArgs := []string{"--verbose", "--name=game-1", "$(POD_NAME)"}; strings.Join(rep.Args, " ") != strings.Join(wantArgs, " ") {
		t.Errorf("args %q, want %q", rep.Args, wantArgs)
	}

	logPath := filepath.Join(r.Dir(), ns+"_game-1_"+string(got.UID), "server.log")
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), " stdout podprog listening on "+wantIP+":8080") {
		t.Errorf("log %s lacks the program's output:\n%s", logPath, b)
	}
}

func TestRestartPolicies(t *testing.T) {
	ns := namespace(t, "restarts")
	startRunner(t, ns, nil)
	for _, tc := range []struct {
		name   string
		policy corev1.RestartPolicy
		code   int
		// restarted: the container comes back; else the Pod ends in phase.
		restarted bool
		phase     corev1.PodPhase
	}{
		{"always-exit-1", corev1.RestartPolicyAlways, 1, true, ""},
		{"always-exit-0", corev1.RestartPolicyAlways, 0, true, ""},
		{"onfailure-exit-2", corev1.RestartPolicyOnFailure, 2, true, ""},
		{"onfailure-exit-0", corev1.RestartPolicyOnFailure, 0, false, corev1.PodSucceeded},
		{"never-exit-0", corev1.RestartPolicyNever, 0, false, corev1.PodSucceeded},
		{"never-exit-3", corev1.RestartPolicyNever, 3, false, corev1.PodFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "report.json")
			key := createPod(t, testPod(ns, tc.name, out, podOpts{policy: tc.policy}))
			pod := waitPod(t, key, "ready", isReady)
			first := readReport(t, out, 0)
			askExit(t, pod, tc.code)
			if tc.restarted {
				pod = waitPod(t, key, "restarted and ready", func(p *corev1.Pod) bool {
					return isReady(p) && p.Status.ContainerStatuses[0].RestartCount == 1
				})
				last := pod.Status.ContainerStatuses[0].LastTerminationState.Terminated
				if last == nil || last.ExitCode != int32(tc.code) {
					t.Errorf("last termination: %s", dump(last))
				}
				if second := readReport(t, out, first.PID); second.PID == first.PID {
					t.Error("same process after restart")
				}
				waitDead(t, first.PID)
				return
			}
			pod = waitPod(t, key, string(tc.phase), func(p *corev1.Pod) bool { return p.Status.Phase == tc.phase })
			cs := pod.Status.ContainerStatuses[0]
			if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != int32(tc.code) || cs.RestartCount != 0 || cs.Ready {
				t.Errorf("container status: %s", dump(cs))
			}
			if c := findCondition(pod.Status.Conditions, corev1.PodReady); c == nil || c.Status != corev1.ConditionFalse || c.Reason != "PodCompleted" {
				t.Errorf("ready condition: %+v", c)
			}
		})
	}
}

func TestLivenessProbeFailureRestartsContainer(t *testing.T) {
	ns := namespace(t, "liveness")
	startRunner(t, ns, nil)
	out := filepath.Join(t.TempDir(), "report.json")
	key := createPod(t, testPod(ns, "unhealthy", out, podOpts{
		policy: corev1.RestartPolicyAlways,
		env:    []corev1.EnvVar{{Name: "PODPROG_UNHEALTHY", Value: "1"}},
		mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{
				ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
				PeriodSeconds:    1,
				FailureThreshold: 2,
			}
		},
	}))
	pod := waitPod(t, key, "restarted", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	// Killed by SIGTERM: exit code 128+15.
	if last := pod.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 143 {
		t.Errorf("last termination: %s", dump(last))
	}
}

func TestDeletePodStopsItsProcesses(t *testing.T) {
	ns := namespace(t, "delete")
	startRunner(t, ns, func(o *Options) { o.MaxGracePeriod = 2 * time.Second })
	for _, tc := range []struct {
		name string
		env  []corev1.EnvVar
	}{
		{"graceful", nil},
		// Ignores SIGTERM, so only SIGKILL after the grace period ends it; its child dies with it.
		{"stubborn", []corev1.EnvVar{{Name: "PODPROG_IGNORE_TERM", Value: "1"}, {Name: "PODPROG_CHILD", Value: "1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "report.json")
			key := createPod(t, testPod(ns, tc.name, out, podOpts{policy: corev1.RestartPolicyAlways, env: tc.env}))
			pod := waitPod(t, key, "ready", isReady)
			rep := readReport(t, out, 0)
			if err := k8s.Delete(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			waitGone(t, key)
			if alive(rep.PID) {
				t.Errorf("process %d alive after its pod was deleted", rep.PID)
			}
			if rep.ChildPID != 0 {
				waitDead(t, rep.ChildPID)
			}
		})
	}
}

func TestWaitsForMissingSecret(t *testing.T) {
	ns := namespace(t, "config")
	startRunner(t, ns, nil)
	out := filepath.Join(t.TempDir(), "report.json")
	key := createPod(t, testPod(ns, "needs-secret", out, podOpts{
		policy: corev1.RestartPolicyAlways,
		env: []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "later"}, Key: "token"}}}},
	}))
	waitPod(t, key, "waiting for its secret", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return p.Status.Phase == corev1.PodPending && len(cs) == 1 && cs[0].State.Waiting != nil &&
			cs[0].State.Waiting.Reason == "CreateContainerConfigError"
	})
	if err := k8s.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "later", Namespace: ns},
		Data: map[string][]byte{"token": []byte("t0k")}}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, key, "ready", isReady)
	if rep := readReport(t, out, 0); rep.Env["TOKEN"] != "t0k" {
		t.Errorf("TOKEN = %q", rep.Env["TOKEN"])
	}
}

func TestLeavesOtherPodsAndRejectsUnsupported(t *testing.T) {
	ns := namespace(t, "admission")
	startRunner(t, ns, nil)
	dir := t.TempDir()
	foreign := createPod(t, testPod(ns, "foreign", filepath.Join(dir, "foreign.json"), podOpts{
		policy: corev1.RestartPolicyAlways,
		mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "example.com/other:v1" },
	}))
	rejected := createPod(t, testPod(ns, "exec-probe", filepath.Join(dir, "exec-probe.json"), podOpts{
		policy: corev1.RestartPolicyAlways,
		mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe.HTTPGet = nil
			p.Spec.Containers[0].ReadinessProbe.Exec = &corev1.ExecAction{Command: []string{"true"}}
		},
	}))
	// Pods are handled in the order the watch delivers them: once the later Pod is rejected, the
	// foreign one has been looked at.
	pod := waitPod(t, rejected, "rejected", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if pod.Status.Reason != "UnsupportedPodSpec" || !strings.Contains(pod.Status.Message, "probe") {
		t.Errorf("rejection: reason %q message %q", pod.Status.Reason, pod.Status.Message)
	}
	got := &corev1.Pod{}
	if err := k8s.Get(context.Background(), foreign, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "" || got.Status.Phase != corev1.PodPending {
		t.Errorf("foreign pod touched: node %q phase %q", got.Spec.NodeName, got.Status.Phase)
	}
	// A rejected Pod is deleted like any other.
	if err := k8s.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitGone(t, rejected)
}

func TestShutdownLeavesNoProcess(t *testing.T) {
	ns := namespace(t, "shutdown")
	_, stop := startRunner(t, ns, func(o *Options) { o.MaxGracePeriod = time.Second })
	var pids []int
	for _, tc := range []struct {
		name string
		env  []corev1.EnvVar
	}{
		{"plain", nil},
		{"stubborn", []corev1.EnvVar{{Name: "PODPROG_IGNORE_TERM", Value: "1"}, {Name: "PODPROG_CHILD", Value: "1"}}},
	} {
		out := filepath.Join(t.TempDir(), tc.name+".json")
		key := createPod(t, testPod(ns, tc.name, out, podOpts{policy: corev1.RestartPolicyAlways, env: tc.env}))
		waitPod(t, key, "ready", isReady)
		rep := readReport(t, out, 0)
		pids = append(pids, rep.PID)
		if rep.ChildPID != 0 {
			pids = append(pids, rep.ChildPID)
		}
	}
	if len(pids) != 3 {
		t.Fatalf("pids %v, want 2 processes and a child", pids)
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// The runner's processes are reaped before Start returns; the child, killed with its group,
	// may take a moment to be reaped by whoever inherited it.
	for _, pid := range pids[:2] {
		if alive(pid) {
			t.Errorf("process %d alive after the runner stopped", pid)
		}
	}
	waitDead(t, pids[2])
}

func TestAdoptsPodsOnItsNodes(t *testing.T) {
	ns := namespace(t, "adopt")
	_, stop := startRunner(t, ns, nil)
	dir := t.TempDir()
	out := filepath.Join(dir, "survivor.json")
	key := createPod(t, testPod(ns, "survivor", out, podOpts{policy: corev1.RestartPolicyAlways}))
	before := waitPod(t, key, "ready", isReady)
	first := readReport(t, out, 0)
	doomedOut := filepath.Join(dir, "doomed.json")
	doomedKey := createPod(t, testPod(ns, "doomed", doomedOut, podOpts{policy: corev1.RestartPolicyAlways}))
	doomed := waitPod(t, doomedKey, "ready", isReady)
	doomedFirst := readReport(t, doomedOut, 0)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if alive(first.PID) {
		t.Fatalf("process %d alive after the runner stopped", first.PID)
	}
	// Deleted while no runner serves its node, the Pod waits with a deletion timestamp; the next
	// runner finishes the deletion without starting it again.
	if err := k8s.Delete(context.Background(), doomed); err != nil {
		t.Fatal(err)
	}
	waitPod(t, doomedKey, "terminating", func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })

	startRunner(t, ns, nil)
	after := waitPod(t, key, "ready again", func(p *corev1.Pod) bool {
		return isReady(p) && p.Status.ContainerStatuses[0].RestartCount == 1
	})
	if after.Spec.NodeName != before.Spec.NodeName || after.Status.PodIP != before.Status.PodIP {
		t.Errorf("moved from %s (%s) to %s (%s)", before.Spec.NodeName, before.Status.PodIP, after.Spec.NodeName, after.Status.PodIP)
	}
	if last := after.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.Reason != "ContainerStatusUnknown" {
		t.Errorf("last termination: %s", dump(last))
	}
	if rep := readReport(t, out, first.PID); rep.PID == first.PID {
		t.Error("no new process")
	}
	waitGone(t, doomedKey)
	if rep := readReport(t, doomedOut, 0); rep.PID != doomedFirst.PID {
		t.Errorf("the deleted pod was started again (pid %d)", rep.PID)
	}
}
