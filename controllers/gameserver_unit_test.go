package controllers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

func testPod(phase corev1.PodPhase, node string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: st},
		}},
	}
}

func TestNextState(t *testing.T) {
	const (
		creating  = v1alpha1.GameServerStateCreating
		starting  = v1alpha1.GameServerStateStarting
		ready     = v1alpha1.GameServerStateReady
		allocated = v1alpha1.GameServerStateAllocated
		shutdown  = v1alpha1.GameServerStateShutdown
		errState  = v1alpha1.GameServerStateError
	)
	pending := testPod(corev1.PodPending, "", false)
	scheduled := testPod(corev1.PodPending, "n", false)
	running := testPod(corev1.PodRunning, "n", false)
	runningReady := testPod(corev1.PodRunning, "n", true)
	succeeded := testPod(corev1.PodSucceeded, "n", false)
	failed := testPod(corev1.PodFailed, "n", false)
	tests := []struct {
		name          string
		cur           v1alpha1.GameServerState
		pod           *corev1.Pod
		configRunning bool
		want          v1alpha1.GameServerState
	}{
		{name: "new", cur: "", want: creating},
		{name: "pod being created", cur: creating, want: creating},
		{name: "pod unscheduled", cur: creating, pod: pending, want: creating},
		{name: "pod scheduled", cur: creating, pod: scheduled, want: starting},
		{name: "running, no config yet", cur: starting, pod: running, want: starting},
		{name: "ready but no config", cur: starting, pod: runningReady, want: starting},
		{name: "config but not ready", cur: starting, pod: running, configRunning: true, want: starting},
		{name: "ready with config", cur: starting, pod: runningReady, configRunning: true, want: ready},
		{name: "ready loses readiness", cur: ready, pod: running, configRunning: true, want: starting},
		{name: "allocated loses readiness", cur: allocated, pod: running, configRunning: true, want: allocated},
		{name: "allocated stays", cur: allocated, pod: runningReady, configRunning: true, want: allocated},
		{name: "ready process exits", cur: ready, pod: succeeded, want: shutdown},
		{name: "allocated process exits", cur: allocated, pod: succeeded, want: shutdown},
		{name: "allocated process fails", cur: allocated, pod: failed, want: shutdown},
		{name: "ready process fails", cur: ready, pod: failed, want: shutdown},
		{name: "starting process fails", cur: starting, pod: failed, want: errState},
		{name: "creating pod fails", cur: creating, pod: failed, want: errState},
		{name: "starting process exits", cur: starting, pod: succeeded, want: shutdown},
		{name: "pod vanished while ready", cur: ready, want: errState},
		{name: "pod vanished while allocated", cur: allocated, want: errState},
		{name: "pod vanished while starting", cur: starting, want: errState},
		{name: "shutdown is final", cur: shutdown, pod: runningReady, configRunning: true, want: shutdown},
		{name: "error is final", cur: errState, pod: runningReady, configRunning: true, want: errState},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextState(tc.cur, tc.pod, tc.configRunning); got != tc.want {
				t.Errorf("nextState(%q) = %q, want %q", tc.cur, got, tc.want)
			}
		})
	}
}

func TestBuildPod(t *testing.T) {
	gs := newGameServer("ns", "arena-1", v1alpha1.PortPolicyDynamic, 0)
	gs.Spec.Ports = append(gs.Spec.Ports,
		v1alpha1.GameServerPort{Name: "query", ContainerPort: 27015, Protocol: corev1.ProtocolTCP, PortPolicy: v1alpha1.PortPolicyStatic, HostPort: 27015},
		v1alpha1.GameServerPort{Name: "voice", ContainerPort: 9000, PortPolicy: v1alpha1.PortPolicyNone},
	)
	gs.Spec.Container = "server"
	gs.Spec.Template.Spec.Containers = []corev1.Container{
		{Name: "sidecar", Image: "log-shipper"},
		{Name: "server", Image: "gs", Env: []corev1.EnvVar{
			{Name: netcode.EnvBindAddress, Value: "127.0.0.5"},
			{Name: netcode.EnvAdminToken, Value: "do-not-keep"},
			{Name: "MAP", Value: "dust"},
		}, Ports: []corev1.ContainerPort{{Name: "game", ContainerPort: 1}, {Name: "pprof", ContainerPort: 6060}}},
	}
	pod, err := buildPod(gs, map[string]int32{"game": 7123, "query": 27015})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "arena-1" || pod.Namespace != "ns" || pod.Labels[v1alpha1.LabelGameServer] != "arena-1" {
		t.Errorf("meta %+v", pod.ObjectMeta)
	}
	if len(pod.Spec.Containers[0].Env) != 0 || len(pod.Spec.Containers[0].Ports) != 0 {
		t.Errorf("the sidecar was changed: %+v", pod.Spec.Containers[0])
	}
	c := pod.Spec.Containers[1]
	ports := map[string]corev1.ContainerPort{}
	for _, p := range c.Ports {
		ports[p.Name] = p
	}
	want := map[string]corev1.ContainerPort{
		"game":  {Name: "game", ContainerPort: 7777, HostPort: 7123, Protocol: corev1.ProtocolUDP},
		"query": {Name: "query", ContainerPort: 27015, HostPort: 27015, Protocol: corev1.ProtocolTCP},
		"voice": {Name: "voice", ContainerPort: 9000, Protocol: corev1.ProtocolUDP},
		"admin": {Name: "admin", ContainerPort: testAdminPort, Protocol: corev1.ProtocolTCP},
		"pprof": {Name: "pprof", ContainerPort: 6060},
	}
	if len(ports) != len(want) || len(c.Ports) != len(want) {
		t.Fatalf("ports %+v", c.Ports)
	}
	for name, p := range want {
		if ports[name] != p {
			t.Errorf("port %s: %+v, want %+v", name, ports[name], p)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if env[netcode.EnvBindAddress].Value != "127.0.0.5" || env["MAP"].Value != "dust" || env[netcode.EnvGamePort].Value != "7777" {
		t.Errorf("env %+v", c.Env)
	}
	if tok := env[netcode.EnvAdminToken]; tok.Value != "" || tok.ValueFrom.SecretKeyRef.Name != AdminTokenSecretName {
		t.Errorf("token env %+v", tok)
	}
	if gs.Spec.Template.Spec.Containers[1].Env[1].Value != "do-not-keep" {
		t.Error("buildPod changed the GameServer's template")
	}

	if _, err := buildPod(gs, map[string]int32{"query": 27015}); err == nil {
		t.Error("a Dynamic port without a host port was accepted")
	}
	gs.Spec.Container = "missing"
	if _, err := buildPod(gs, map[string]int32{"game": 7123, "query": 27015}); err == nil {
		t.Error("a missing container was accepted")
	}
}

func TestParsePortRange(t *testing.T) {
	tests := []struct {
		in      string
		want    PortRange
		wantErr bool
	}{
		{in: "7000-8000", want: PortRange{7000, 8000}},
		{in: " 1 - 65535 ", want: PortRange{1, 65535}},
		{in: "7000-7000", want: PortRange{7000, 7000}},
		{in: "8000-7000", wantErr: true},
		{in: "0-100", wantErr: true},
		{in: "1-70000", wantErr: true},
		{in: "7000", wantErr: true},
		{in: "a-b", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tc := range tests {
		got, err := ParsePortRange(tc.in)
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("ParsePortRange(%q) = %v, %v", tc.in, got, err)
		}
	}
}

func TestHostPortPicker(t *testing.T) {
	h := newHostPortPicker(PortRange{Min: 100, Max: 104})
	now := time.Unix(1000, 0)
	used := map[int32]bool{100: true, 102: true}
	got, err := h.pick(used, 2, now)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int32]bool{}
	for _, p := range got {
		if used[p] || seen[p] || p < 100 || p > 104 {
			t.Errorf("picked %v", got)
		}
		seen[p] = true
	}
	// The two handed out are held while their Pods are not in the cache yet: one is left.
	last, err := h.pick(used, 1, now)
	if err != nil || seen[last[0]] || used[last[0]] {
		t.Fatalf("third pick %v, %v", last, err)
	}
	if _, err := h.pick(used, 1, now); err == nil {
		t.Error("picked from an exhausted range")
	}
	// Reservations expire.
	if _, err := h.pick(used, 3, now.Add(2*pendingPortTTL)); err != nil {
		t.Errorf("after expiry: %v", err)
	}
}

func TestBackoff(t *testing.T) {
	r := &GameServerReconciler{opts: GameServerOptions{RetryBase: 100 * time.Millisecond, RetryMax: 10 * time.Second}}
	for n := 1; n <= 100; n++ {
		want := min(100*time.Millisecond<<min(n-1, 20), 10*time.Second)
		for range 20 {
			if d := r.backoff(n); d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %s, want in [%s, %s]", n, d, want/2, want)
			}
		}
	}
}

// TestPusherClassifies maps every kind of answer to its push-error reason.
func TestPusherClassifies(t *testing.T) {
	tests := []struct {
		name   string
		code   int
		body   string
		want   string
		field  string
		gen    int64
		noHTTP bool
	}{
		{name: "ok", code: 200, body: `{"generation":3,"hash":"h","instanceID":"i"}`},
		{name: "refused", code: 422, body: `{"error":"bad","field":"tickRateHz"}`, want: pushErrRefused, field: "tickRateHz"},
		{name: "conflict", code: 409, body: `{"error":"old","generation":9}`, want: pushErrConflict, gen: 9},
		{name: "unauthorized", code: 401, body: `{"error":"no"}`, want: pushErrUnauthorized},
		{name: "too large", code: 413, body: `{"error":"big"}`, want: pushErrOther},
		{name: "server trouble", code: 503, body: `{"error":"slow"}`, want: pushErrUnreachable},
		{name: "not json", code: 500, body: `<html>`, want: pushErrUnreachable},
		{name: "garbled ok", code: 200, body: `{"generation":`, want: pushErrOther},
		{name: "nobody listening", noHTTP: true, want: pushErrUnreachable},
	}
	p := NewPusher(2 * time.Second)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer tok" || r.URL.Path != netcode.PathNetcode {
					w.WriteHeader(http.StatusTeapot)
					return
				}
				w.WriteHeader(tc.code)
				_, _ = w.Write([]byte(tc.body))
			}))
			endpoint := strings.TrimPrefix(srv.URL, "http://")
			if tc.noHTTP {
				srv.Close()
			} else {
				defer srv.Close()
			}
			st, err := p.Push(context.Background(), endpoint, "tok", netcode.ConfigPush{Generation: 3})
			if tc.want == "" {
				if err != nil || st.Generation != 3 || st.InstanceID != "i" {
					t.Fatalf("got %+v, %v", st, err)
				}
				return
			}
			pe, ok := errors.AsType[*PushError](err)
			if !ok {
				t.Fatalf("error %v", err)
			}
			if pe.Reason != tc.want || pe.Field != tc.field || pe.Generation != tc.gen {
				t.Errorf("got %+v, want reason %s field %q generation %d", pe, tc.want, tc.field, tc.gen)
			}
		})
	}
}

// TestNodeAddressPrefersExternalIP: players are given the node's ExternalIP when it has one, its
// InternalIP when it has only that, and the Pod's host IP when the Node has neither.
func TestNodeAddressPrefersExternalIP(t *testing.T) {
	pod := &corev1.Pod{Status: corev1.PodStatus{HostIP: "192.0.2.9"}}
	for _, c := range []struct {
		name  string
		addrs []corev1.NodeAddress
		want  string
	}{
		{"both, internal first", []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "10.0.0.4"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.4"},
		}, "203.0.113.4"},
		{"both, external first", []corev1.NodeAddress{
			{Type: corev1.NodeExternalIP, Address: "203.0.113.4"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.4"},
		}, "203.0.113.4"},
		{"internal only", []corev1.NodeAddress{
			{Type: corev1.NodeHostName, Address: "node-a"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.4"},
		}, "10.0.0.4"},
		{"empty external", []corev1.NodeAddress{
			{Type: corev1.NodeExternalIP}, {Type: corev1.NodeInternalIP, Address: "10.0.0.4"},
		}, "10.0.0.4"},
		{"hostname only", []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node-a"}}, "192.0.2.9"},
	} {
		node := &corev1.Node{Status: corev1.NodeStatus{Addresses: c.addrs}}
		if got := nodeAddress(node, pod); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
