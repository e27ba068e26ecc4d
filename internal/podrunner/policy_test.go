package podrunner

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "x", "EMPTY": ""}
	lookup := func(n string) (string, bool) {
		v, ok := vars[n]
		return v, ok
	}
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "x"},
		{"pre-$(A)-post", "pre-x-post"},
		{"$(EMPTY)|", "|"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$", "$"},
		{"$", "$"},
		{"a$b", "a$b"},
		{"$(A", "$(A"},
		{"$(A)$(A)", "xx"},
		{"$()", "$()"},
	} {
		if got := expand(tc.in, lookup); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestImageMatching(t *testing.T) {
	o := Options{Images: map[string]string{
		"netfleet/gameserver":    "/bin/gs",
		"netfleet/gameserver:v2": "/bin/gs2",
		"localhost:5000/bots":    "/bin/bots",
	}}
	for _, tc := range []struct{ image, want string }{
		{"netfleet/gameserver", "/bin/gs"},
		{"netfleet/gameserver:dev", "/bin/gs"},
		{"netfleet/gameserver:v2", "/bin/gs2"},
		{"netfleet/gameserver@sha256:0123", "/bin/gs"},
		{"netfleet/gameserver:v1@sha256:0123", "/bin/gs"},
		{"localhost:5000/bots:latest", "/bin/bots"},
		{"localhost:5000/bots", "/bin/bots"},
		{"netfleet/gameserver-extra:v1", ""},
		{"docker.io/netfleet/gameserver:v1", ""},
		{"localhost:5000", ""},
	} {
		got, _ := o.binaryFor(tc.image)
		if got != tc.want {
			t.Errorf("binaryFor(%q) = %q, want %q", tc.image, got, tc.want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "prog")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"ok", Options{Dir: dir, Images: map[string]string{"x": exe}}, ""},
		{"no dir", Options{Images: map[string]string{"x": exe}}, "Dir is required"},
		{"no images", Options{Dir: dir}, "image map is empty"},
		{"missing binary", Options{Dir: dir, Images: map[string]string{"x": filepath.Join(dir, "nope")}}, "no such file"},
		{"not executable", Options{Dir: dir, Images: map[string]string{"x": plain}}, "not an executable"},
		{"bad image", Options{Dir: dir, Images: map[string]string{"a b": exe}}, "not an image reference"},
		{"host address", Options{Dir: dir, Images: map[string]string{"x": exe}, FirstAddress: netip.MustParseAddr("127.0.0.1")}, "other than 127.0.0.1"},
		{"not loopback", Options{Dir: dir, Images: map[string]string{"x": exe}, FirstAddress: netip.MustParseAddr("10.0.0.2")}, "loopback"},
		{"bad prefix", Options{Dir: dir, Images: map[string]string{"x": exe}, NodePrefix: "Bad_Prefix"}, "node prefix"},
		{"negative", Options{Dir: dir, Images: map[string]string{"x": exe}, MaxGracePeriod: -time.Second}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			err := o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			case err == nil:
				if o.FirstAddress != DefaultFirstAddress || o.NodePrefix != DefaultNodePrefix || o.MaxGracePeriod != DefaultMaxGracePeriod ||
					o.MaxProbePeriod != DefaultMaxProbePeriod || o.MaxRestartBackoff != DefaultMaxRestartBackoff {
					t.Errorf("defaults not applied: %+v", o)
				}
			}
		})
	}
}

func TestAddressPool(t *testing.T) {
	p := newAddressPool(netip.MustParseAddr("127.0.0.253"))
	var got []string
	for range 3 {
		a, err := p.take()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a.String())
	}
	// .255 and .0 are skipped.
	if want := "127.0.0.253 127.0.0.254 127.0.1.1"; strings.Join(got, " ") != want {
		t.Fatalf("took %v, want %s", got, want)
	}
	p.release(netip.MustParseAddr("127.0.0.254"))
	if a, _ := p.take(); a.String() != "127.0.0.254" {
		t.Errorf("after release took %s, want the released 127.0.0.254", a)
	}
	if p.claim(netip.MustParseAddr("127.0.1.1")) {
		t.Error("claimed an address in use")
	}
	if !p.claim(netip.MustParseAddr("127.0.5.5")) {
		t.Error("could not claim a free address")
	}

	end := newAddressPool(netip.MustParseAddr("127.255.255.254"))
	if _, err := end.take(); err != nil {
		t.Fatal(err)
	}
	if _, err := end.take(); err == nil {
		t.Error("took an address beyond 127.255.255.254")
	}
}

func TestNodeNames(t *testing.T) {
	a := netip.MustParseAddr("127.0.0.12")
	name := nodeName("netfleet-dev", a)
	if name != "netfleet-dev-127-0-0-12" {
		t.Fatalf("nodeName = %s", name)
	}
	if got, ok := nodeAddress("netfleet-dev", name); !ok || got != a {
		t.Errorf("nodeAddress(%s) = %s, %v", name, got, ok)
	}
	for _, other := range []string{"netfleet-dev-10-0-0-1", "other-127-0-0-12", "netfleet-dev-127-0-0", "netfleet-dev-127-0-0-012", "netfleet-devx-127-0-0-12"} {
		if _, ok := nodeAddress("netfleet-dev", other); ok {
			t.Errorf("nodeAddress(%s) claims a foreign node", other)
		}
	}
}

func TestRestartBackoff(t *testing.T) {
	var got []time.Duration
	for n := range 7 {
		got = append(got, restartBackoff(n, 3*time.Second))
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second, 3 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("backoffs %v, want %v", got, want)
		}
	}
}

func TestPodPhase(t *testing.T) {
	running := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	creating := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	exited := func(code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
	}
	backoff := corev1.ContainerStatus{
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}},
	}
	for _, tc := range []struct {
		name     string
		policy   corev1.RestartPolicy
		statuses []corev1.ContainerStatus
		want     corev1.PodPhase
	}{
		{"no statuses", corev1.RestartPolicyAlways, nil, corev1.PodPending},
		{"creating", corev1.RestartPolicyAlways, []corev1.ContainerStatus{creating}, corev1.PodPending},
		{"one of two creating", corev1.RestartPolicyAlways, []corev1.ContainerStatus{running, creating}, corev1.PodPending},
		{"running", corev1.RestartPolicyNever, []corev1.ContainerStatus{running}, corev1.PodRunning},
		{"one running one done", corev1.RestartPolicyNever, []corev1.ContainerStatus{running, exited(0)}, corev1.PodRunning},
		{"crash loop", corev1.RestartPolicyAlways, []corev1.ContainerStatus{backoff}, corev1.PodRunning},
		{"always, exited", corev1.RestartPolicyAlways, []corev1.ContainerStatus{exited(0)}, corev1.PodRunning},
		{"never, all 0", corev1.RestartPolicyNever, []corev1.ContainerStatus{exited(0), exited(0)}, corev1.PodSucceeded},
		{"never, one failed", corev1.RestartPolicyNever, []corev1.ContainerStatus{exited(0), exited(3)}, corev1.PodFailed},
		{"onfailure, all 0", corev1.RestartPolicyOnFailure, []corev1.ContainerStatus{exited(0)}, corev1.PodSucceeded},
		{"onfailure, restarting", corev1.RestartPolicyOnFailure, []corev1.ContainerStatus{exited(0), backoff}, corev1.PodRunning},
	} {
		if got := podPhase(tc.policy, tc.statuses); got != tc.want {
			t.Errorf("%s: phase %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestPodConditions(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	pod := &corev1.Pod{Spec: corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}}}}
	ready := []corev1.ContainerStatus{{Name: "a", Ready: true}}
	old := []corev1.PodCondition{
		{Type: "example.com/gate", Status: corev1.ConditionFalse, LastTransitionTime: t0},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t0},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: t0},
	}
	got := podConditions(old, pod, corev1.PodRunning, ready, t1)
	if len(got) != 5 || got[0].Type != "example.com/gate" || got[1].Type != corev1.PodScheduled {
		t.Fatalf("conditions not merged in place: %+v", got)
	}
	check := func(ct corev1.PodConditionType, status corev1.ConditionStatus, reason string, at metav1.Time) {
		t.Helper()
		c := findCondition(got, ct)
		if c == nil || c.Status != status || c.Reason != reason || !c.LastTransitionTime.Equal(&at) {
			t.Errorf("%s: %+v, want %s %q at %s", ct, c, status, reason, at)
		}
	}
	check(corev1.PodScheduled, corev1.ConditionTrue, "", t0)
	check(corev1.ContainersReady, corev1.ConditionTrue, "", t1)
	check(corev1.PodInitialized, corev1.ConditionTrue, "", t1)
	check(corev1.PodReady, corev1.ConditionFalse, "ReadinessGatesNotReady", t1)

	got[0].Status = corev1.ConditionTrue
	got = podConditions(got, pod, corev1.PodRunning, ready, t1)
	check(corev1.PodReady, corev1.ConditionTrue, "", t1)

	got = podConditions(got, pod, corev1.PodRunning, []corev1.ContainerStatus{{Name: "a"}, {Name: "b"}}, t1)
	if c := findCondition(got, corev1.ContainersReady); c.Message != "containers with unready status: [a b]" {
		t.Errorf("message %q", c.Message)
	}
	got = podConditions(got, pod, corev1.PodSucceeded, nil, t1)
	check(corev1.PodReady, corev1.ConditionFalse, "PodCompleted", t1)
}

func TestProbeTargetPort(t *testing.T) {
	tg := target{
		ports: []corev1.ContainerPort{{Name: "admin", ContainerPort: 8080}, {Name: "game", ContainerPort: 7777}},
		moved: map[int32]int32{7777: 7100},
	}
	for _, tc := range []struct {
		port    intstr.IntOrString
		want    int32
		wantErr bool
	}{
		{intstr.FromString("admin"), 8080, false},
		{intstr.FromInt32(9090), 9090, false},
		{intstr.FromString("game"), 7100, false},
		{intstr.FromInt32(7777), 7100, false},
		{intstr.FromString("9091"), 9091, false},
		{intstr.FromString("nope"), 0, true},
		{intstr.FromInt32(0), 0, true},
	} {
		got, err := tg.port(tc.port)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("port(%s) = %d, %v; want %d, error %v", tc.port.String(), got, err, tc.want, tc.wantErr)
		}
	}
}

func TestResolveEnvironment(t *testing.T) {
	yes := true
	reader := fake.NewClientBuilder().WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Data: map[string][]byte{"k": []byte("secret"), "bad key": []byte("x")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Data: map[string]string{"k": "config"}, BinaryData: map[string][]byte{"b": []byte("bin")}},
	).Build()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u-1",
		Annotations: map[string]string{"a": "ann"}}}
	addr := netip.MustParseAddr("127.0.0.7")
	secretRef := func(name, key string, optional bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: &optional}}
	}
	for _, tc := range []struct {
		name    string
		c       corev1.Container
		want    map[string]string
		absent  []string
		wantErr string
	}{
		{
			name: "sources and order",
			c: corev1.Container{
				EnvFrom: []corev1.EnvFromSource{{Prefix: "S_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}},
				Env: []corev1.EnvVar{
					{Name: "X", Value: "1"},
					{Name: "X", Value: "2-$(X)"},
					{Name: "BIN", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, Key: "b"}}},
					{Name: "UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
					{Name: "ANN", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['a']"}}},
					{Name: "HOST", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
					{Name: "OPT", ValueFrom: secretRef("s", "missing", true)},
					{Name: "OPT2", ValueFrom: secretRef("missing", "k", true)},
					{Name: "PATH", Value: "/custom"},
				},
			},
			want:   map[string]string{"S_k": "secret", "X": "2-1", "BIN": "bin", "UID": "u-1", "ANN": "ann", "HOST": "127.0.0.7", "PATH": "/custom", "HOSTNAME": "p", "NETFLEET_BIND_ADDRESS": "127.0.0.7"},
			absent: []string{"S_bad key", "OPT", "OPT2"},
		},
		{
			name: "game port moves to its host port",
			c: corev1.Container{
				Env:   []corev1.EnvVar{{Name: "NETFLEET_GAME_PORT", Value: "7777"}, {Name: "NETFLEET_BIND_ADDRESS", Value: "0.0.0.0"}},
				Ports: []corev1.ContainerPort{{ContainerPort: 7777, HostPort: 7123, Protocol: corev1.ProtocolUDP}},
			},
			want: map[string]string{"NETFLEET_GAME_PORT": "7123", "NETFLEET_BIND_ADDRESS": "127.0.0.7"},
		},
		{
			name: "game port without host port stays",
			c: corev1.Container{
				Env:   []corev1.EnvVar{{Name: "NETFLEET_GAME_PORT", Value: "7777"}},
				Ports: []corev1.ContainerPort{{ContainerPort: 7777, Protocol: corev1.ProtocolUDP}},
			},
			want: map[string]string{"NETFLEET_GAME_PORT": "7777"},
		},
		{name: "missing key", c: corev1.Container{Env: []corev1.EnvVar{{Name: "T", ValueFrom: secretRef("s", "nope", false)}}}, wantErr: "couldn't find key nope in Secret ns/s"},
		{name: "missing secret", c: corev1.Container{Env: []corev1.EnvVar{{Name: "T", ValueFrom: secretRef("gone", "k", false)}}}, wantErr: "secret ns/gone"},
		{name: "missing optional envFrom", c: corev1.Container{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: &yes}}}}, want: map[string]string{"HOSTNAME": "p"}},
		{name: "unknown field", c: corev1.Container{Env: []corev1.EnvVar{{Name: "T", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.schedulerName"}}}}}, wantErr: "not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pe := &podEnv{pod: pod, addr: addr, node: "n", dir: "/pods/p", reader: reader}
			l, err := pe.resolve(context.Background(), &tc.c)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			env := map[string]string{}
			for _, kv := range l.env {
				k, v, _ := strings.Cut(kv, "=")
				if _, dup := env[k]; dup {
					t.Errorf("%s defined twice", k)
				}
				env[k] = v
			}
			for k, v := range tc.want {
				if env[k] != v {
					t.Errorf("%s = %q, want %q", k, env[k], v)
				}
			}
			for _, k := range tc.absent {
				if _, ok := env[k]; ok {
					t.Errorf("%s is set", k)
				}
			}
		})
	}
}
