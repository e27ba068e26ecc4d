package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

const waitLong = 45 * time.Second

// waitApplied waits until the GameServer is in state want with its current generation applied.
func waitApplied(t *testing.T, gs *v1alpha1.GameServer, want v1alpha1.GameServerState) *v1alpha1.GameServer {
	t.Helper()
	var got *v1alpha1.GameServer
	waitFor(t, waitLong, fmt.Sprintf("%s %s with its generation applied", gs.Name, want), func() (bool, error) {
		got = getGS(t, gs)
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionConfigApplied)
		ok := got.Status.State == want && c != nil && c.Status == metav1.ConditionTrue &&
			got.Status.Netcode.AppliedGeneration == got.Generation && got.Status.ObservedGeneration == got.Generation
		return ok, fmt.Errorf("status %+v", got.Status)
	})
	return got
}

func TestGameServerLifecycle(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	gs := newGameServer(ns, "gs-life", v1alpha1.PortPolicyDynamic, 0)
	gs.Spec.Template.Labels = map[string]string{"app": "arena"}
	gs.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: netcode.EnvAdminToken, Value: "literal-must-be-replaced"}}
	if err := k8s.Create(ctx, gs); err != nil {
		t.Fatal(err)
	}

	got := waitApplied(t, gs, v1alpha1.GameServerStateReady)
	if got.Generation != 1 || got.Status.Netcode.Progress != "1/1" {
		t.Errorf("generation %d progress %q", got.Generation, got.Status.Netcode.Progress)
	}

	// The Pod: owned, labeled, with the ports, the environment and the probe.
	var pod corev1.Pod
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(gs), &pod); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(&pod, got) {
		t.Errorf("pod not controlled by the GameServer: %+v", pod.OwnerReferences)
	}
	if pod.Labels[v1alpha1.LabelGameServer] != gs.Name || pod.Labels["app"] != "arena" {
		t.Errorf("pod labels %v", pod.Labels)
	}
	c := pod.Spec.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env[netcode.EnvAdminToken]; e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		e.ValueFrom.SecretKeyRef.Name != AdminTokenSecretName || e.ValueFrom.SecretKeyRef.Key != AdminTokenSecretKey {
		t.Errorf("token env %+v", e)
	}
	if env[netcode.EnvAdminPort].Value != strconv.Itoa(testAdminPort) || env[netcode.EnvGamePort].Value != "7777" || env[netcode.EnvBindAddress].Value != "0.0.0.0" {
		t.Errorf("env %+v", env)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != netcode.PathReadyz || c.ReadinessProbe.HTTPGet.Port.IntValue() != testAdminPort {
		t.Errorf("readiness probe %+v", c.ReadinessProbe)
	}
	hostPort, _ := gamePortAt(got, &pod)
	if hostPort < testPortRange.Min || hostPort > testPortRange.Max {
		t.Errorf("dynamic host port %d outside %s", hostPort, testPortRange)
	}
	// The node has both an InternalIP and an ExternalIP: players are given the ExternalIP.
	if got.Status.Address != testNodeExternalIP || got.Status.Port != hostPort || got.Status.NodeName != testNode {
		t.Errorf("address %s:%d on %q, want %s:%d on %s", got.Status.Address, got.Status.Port, got.Status.NodeName, testNodeExternalIP, hostPort, testNode)
	}

	// The Secret: one random 32-byte token.
	var sec corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: AdminTokenSecretName}, &sec); err != nil {
		t.Fatal(err)
	}
	if tok := sec.Data[AdminTokenSecretKey]; len(tok) != 64 {
		t.Errorf("token of %d hex digits, want 64", len(tok))
	}

	// The process runs the desired config, reported with its instance id. The defaults it
	// started with are that config, so the push only gave them a generation: nothing to apply.
	run := kube.pod(client.ObjectKeyFromObject(gs))
	p := run.current()
	cfg, applied := p.rt.current()
	if cfg.Hash() != gs.Spec.Netcode.Hash() || applied != 0 || got.Status.Netcode.InstanceID != p.srv.InstanceID() ||
		got.Status.Netcode.AppliedHash != cfg.Hash() {
		t.Errorf("process runs %s after %d applies (instance %s); status %+v", cfg.Hash(), applied, p.srv.InstanceID(), got.Status.Netcode)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("Ready condition %+v", ready)
	}

	// A netcode edit reaches the same process, without touching the Pod.
	podUID := pod.UID
	propagated := histogramCount(t, configPropagation)
	editGS(t, gs, func(g *v1alpha1.GameServer) {
		g.Spec.Netcode.TickRateHz = 30
		g.Spec.Netcode.Congestion.MinSendHz = 5
	})
	got = waitApplied(t, gs, v1alpha1.GameServerStateReady)
	if got.Generation != 2 || got.Status.Netcode.Progress != "2/2" {
		t.Errorf("after the edit: generation %d progress %q", got.Generation, got.Status.Netcode.Progress)
	}
	cfg, applied = p.rt.current()
	if cfg.TickRateHz != 30 || cfg.Congestion.MinSendHz != 5 || applied != 1 || run.current() != p {
		t.Errorf("process runs tick %d minSend %d after %d applies", cfg.TickRateHz, cfg.Congestion.MinSendHz, applied)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(gs), &pod); err != nil || pod.UID != podUID {
		t.Errorf("pod replaced or gone: %v", err)
	}
	if n := histogramCount(t, configPropagation); n <= propagated {
		t.Errorf("propagation histogram has %d samples, had %d before the edit", n, propagated)
	}

	// Events tell the story.
	waitFor(t, waitLong, "events", func() (bool, error) {
		reasons := eventReasons(t, ns, gs.Name)
		for _, want := range []string{"PodCreated", "Starting", "Ready", "ConfigApplied"} {
			if !reasons[want] {
				return false, fmt.Errorf("reasons %v, missing %s", reasons, want)
			}
		}
		return true, nil
	})
}

// editGS changes a GameServer's spec, retrying when the operator wrote its status meanwhile.
func editGS(t *testing.T, gs *v1alpha1.GameServer, edit func(*v1alpha1.GameServer)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		g := getGS(t, gs)
		edit(g)
		return k8s.Update(context.Background(), g)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func histogramCount(t testing.TB, h prometheus.Histogram) uint64 {
	t.Helper()
	return histogramMetric(t, h).GetSampleCount()
}

func histogramMetric(t testing.TB, h prometheus.Histogram) *dto.Histogram {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram()
}

func eventReasons(t *testing.T, ns, name string) map[string]bool {
	t.Helper()
	var evs eventsv1.EventList
	if err := k8s.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range evs.Items {
		if e.Regarding.Name == name {
			out[e.Reason] = true
		}
	}
	return out
}

// TestProcessRestartRepushes restarts a server's process the way a kubelet shows it (restart
// count up, readiness down): the new process gets the config again at once.
func TestProcessRestartRepushes(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	gs := newGameServer(ns, "gs-restart", v1alpha1.PortPolicyStatic, 7801)
	gs.Spec.Netcode.TickRateHz = 20
	if err := k8s.Create(ctx, gs); err != nil {
		t.Fatal(err)
	}
	got := waitApplied(t, gs, v1alpha1.GameServerStateReady)
	if got.Status.Address != testNodeExternalIP || got.Status.Port != 7801 {
		t.Errorf("static port: address %s:%d", got.Status.Address, got.Status.Port)
	}
	oldID := got.Status.Netcode.InstanceID

	p, err := kube.restart(ctx, client.ObjectKeyFromObject(gs), true)
	if err != nil {
		t.Fatal(err)
	}
	newID := p.srv.InstanceID()
	if newID == oldID {
		t.Fatal("the new process has the old instance id")
	}
	waitFor(t, waitLong, "the new process to get its config", func() (bool, error) {
		got = getGS(t, gs)
		cfg, _ := p.rt.current()
		return got.Status.Netcode.InstanceID == newID && got.Status.Netcode.AppliedGeneration == got.Generation &&
			cfg.TickRateHz == 20 && got.Status.State == v1alpha1.GameServerStateReady, fmt.Errorf("status %+v", got.Status)
	})
	waitFor(t, waitLong, "a ProcessRestarted event", func() (bool, error) {
		r := eventReasons(t, ns, gs.Name)
		return r["ProcessRestarted"], fmt.Errorf("reasons %v", r)
	})
}

// TestSilentRestartCaughtByVerify replaces the process without any sign in the Pod status: the
// periodic check finds the new instance and pushes the config again within the verify interval.
func TestSilentRestartCaughtByVerify(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	gs := newGameServer(ns, "gs-silent", v1alpha1.PortPolicyNone, 0)
	gs.Spec.Netcode.TickRateHz = 40
	if err := k8s.Create(ctx, gs); err != nil {
		t.Fatal(err)
	}
	got := waitApplied(t, gs, v1alpha1.GameServerStateReady)
	ip, _ := kube.pod(client.ObjectKeyFromObject(gs)).endpoint()
	if got.Status.Address != ip || got.Status.Port != netcode.DefaultGamePort {
		t.Errorf("no host port: address %s:%d, want %s:%d", got.Status.Address, got.Status.Port, ip, netcode.DefaultGamePort)
	}
	p, err := kube.restart(ctx, client.ObjectKeyFromObject(gs), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*testVerifyInterval+10*time.Second, "the periodic check to re-push", func() (bool, error) {
		cfg, n := p.rt.current()
		got = getGS(t, gs)
		return n == 1 && cfg.TickRateHz == 40 && got.Status.Netcode.InstanceID == p.srv.InstanceID(), fmt.Errorf("status %+v", got.Status)
	})
}

// TestAllocatedKeepsPodAndConfig plays allocation: an Allocated server stays Allocated through a
// process restart and still gets config edits.
func TestAllocatedKeepsPodAndConfig(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	gs := newGameServer(ns, "gs-alloc", v1alpha1.PortPolicyDynamic, 0)
	if err := k8s.Create(ctx, gs); err != nil {
		t.Fatal(err)
	}
	got := waitApplied(t, gs, v1alpha1.GameServerStateReady)
	// Allocation sets the state with an optimistic lock, retrying when the operator wrote
	// meanwhile.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got = getGS(t, gs)
		base := got.DeepCopy()
		got.Status.State = v1alpha1.GameServerStateAllocated
		return k8s.Status().Patch(ctx, got, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := kube.restart(ctx, client.ObjectKeyFromObject(gs), true)
	if err != nil {
		t.Fatal(err)
	}
	editGS(t, gs, func(g *v1alpha1.GameServer) {
		g.Spec.Netcode.Budget.MaxPacketBytes = 1000
	})
	got = waitApplied(t, gs, v1alpha1.GameServerStateAllocated)
	if cfg, _ := p.rt.current(); cfg.Budget.MaxPacketBytes != 1000 || got.Status.Netcode.InstanceID != p.srv.InstanceID() {
		t.Errorf("allocated server runs maxPacketBytes %d, instance %s", cfg.Budget.MaxPacketBytes, got.Status.Netcode.InstanceID)
	}
}

// TestFinalStates ends servers' Pods: a served server whose process exits is Shutdown; a Pod that
// fails before it was ever ready is Error.
func TestFinalStates(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	tests := []struct {
		name      string
		failStart bool
		phase     corev1.PodPhase
		want      v1alpha1.GameServerState
	}{
		{name: "done", phase: corev1.PodSucceeded, want: v1alpha1.GameServerStateShutdown},
		{name: "crashed-after-ready", phase: corev1.PodFailed, want: v1alpha1.GameServerStateShutdown},
		{name: "crashed-at-start", failStart: true, want: v1alpha1.GameServerStateError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gs := newGameServer(ns, tc.name, v1alpha1.PortPolicyNone, 0)
			if tc.failStart {
				gs.Spec.Template.Annotations = map[string]string{annotationFailStart: "true"}
			}
			if err := k8s.Create(ctx, gs); err != nil {
				t.Fatal(err)
			}
			if !tc.failStart {
				waitApplied(t, gs, v1alpha1.GameServerStateReady)
				if err := kube.finish(ctx, client.ObjectKeyFromObject(gs), tc.phase); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, waitLong, string(tc.want), func() (bool, error) {
				got := getGS(t, gs)
				c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
				return got.Status.State == tc.want && c != nil && c.Status == metav1.ConditionFalse, fmt.Errorf("status %+v", got.Status)
			})
		})
	}
}

// TestRuntimeRefusal pushes a config the CRD accepts but the runtime refuses: ConfigApplied says
// Refused with the server's reason, the process keeps its config, and a fixed spec goes through.
func TestRuntimeRefusal(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	gs := newGameServer(ns, "gs-refused", v1alpha1.PortPolicyNone, 0)
	if err := k8s.Create(ctx, gs); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, gs, v1alpha1.GameServerStateReady)
	p := kube.pod(client.ObjectKeyFromObject(gs)).current()
	refusedBefore := testutil.ToFloat64(configPushErrors.WithLabelValues(pushErrRefused))

	editGS(t, gs, func(g *v1alpha1.GameServer) {
		g.Spec.Netcode.TickRateHz = refusedTickRateHz
	})
	waitFor(t, waitLong, "ConfigApplied Refused", func() (bool, error) {
		got := getGS(t, gs)
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionConfigApplied)
		return c != nil && c.Reason == v1alpha1.ReasonRefused && c.ObservedGeneration == got.Generation &&
			strings.Contains(c.Message, "tickRateHz") && got.Status.State == v1alpha1.GameServerStateReady &&
			got.Status.Netcode.AppliedGeneration == 1, fmt.Errorf("status %+v", got.Status)
	})
	if cfg, n := p.rt.current(); cfg.TickRateHz != netcode.DefaultTickRateHz || n != 0 {
		t.Errorf("the refused config changed the process: tick %d after %d applies", cfg.TickRateHz, n)
	}
	if got := testutil.ToFloat64(configPushErrors.WithLabelValues(pushErrRefused)); got != refusedBefore+1 {
		t.Errorf("refused pushes counted %v, want %v", got, refusedBefore+1)
	}

	editGS(t, gs, func(g *v1alpha1.GameServer) {
		g.Spec.Netcode.TickRateHz = 50
	})
	waitApplied(t, gs, v1alpha1.GameServerStateReady)
	if cfg, _ := p.rt.current(); cfg.TickRateHz != 50 {
		t.Errorf("tick rate %d after the fix", cfg.TickRateHz)
	}
}

// TestAdminRefusesBadPushes sends the pushes a game server must refuse to a running server
// through the operator's client, and checks each answer's classification and that the running
// config never changes.
func TestAdminRefusesBadPushes(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	gs := newGameServer(ns, "gs-admin", v1alpha1.PortPolicyNone, 0)
	if err := k8s.Create(ctx, gs); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, gs, v1alpha1.GameServerStateReady)
	// A second generation, so that there is an older one to replay.
	editGS(t, gs, func(g *v1alpha1.GameServer) {
		g.Spec.Netcode.TickRateHz = 45
	})
	got := waitApplied(t, gs, v1alpha1.GameServerStateReady)
	run := kube.pod(client.ObjectKeyFromObject(gs))
	p := run.current()
	_, applied := p.rt.current()
	ip, port := run.endpoint()
	endpoint := net.JoinHostPort(ip, strconv.Itoa(port))
	pusher := NewPusher(5 * time.Second)
	gen := got.Generation
	bad := netcode.NetcodeConfig{
		Backpressure: netcode.BackpressureConfig{FrameBytes: 300000},
		Memory:       netcode.MemoryConfig{FramePoolBudgetBytes: 500000},
	}

	tests := []struct {
		name       string
		token      string
		push       netcode.ConfigPush
		raw        []byte
		wantReason string
		wantCode   int
		wantField  string
	}{
		{name: "wrong token", token: strings.Repeat("0", 64), push: netcode.ConfigPush{Generation: gen + 1}, wantReason: pushErrUnauthorized, wantCode: 401},
		{name: "no token", token: "", push: netcode.ConfigPush{Generation: gen + 1}, wantReason: pushErrUnauthorized, wantCode: 401},
		{name: "stale generation", token: run.token, push: netcode.ConfigPush{Generation: gen - 1}, wantReason: pushErrConflict, wantCode: 409},
		{name: "same generation other config", token: run.token, push: netcode.ConfigPush{Generation: gen, Config: netcode.NetcodeConfig{TickRateHz: 99}}, wantReason: pushErrConflict, wantCode: 409},
		{name: "invalid config", token: run.token, push: netcode.ConfigPush{Generation: gen + 1, Config: bad}, wantReason: pushErrRefused, wantCode: 422, wantField: "memory.framePoolBudgetBytes"},
		{name: "oversized body", token: run.token, raw: oversizedPush(t, gen+1), wantReason: pushErrOther, wantCode: 413},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.raw != nil {
				var st netcode.ConfigStatus
				err = pusher.do(ctx, pusher.client, "PUT", "http://"+endpoint+netcode.PathNetcode, tc.token, tc.raw, &st)
			} else {
				_, err = pusher.Push(ctx, endpoint, tc.token, tc.push)
			}
			pe, ok := errors.AsType[*PushError](err)
			if !ok {
				t.Fatalf("error %v, want a PushError", err)
			}
			if pe.Reason != tc.wantReason || pe.StatusCode != tc.wantCode || pe.Field != tc.wantField {
				t.Errorf("got %s %d field %q (%s), want %s %d field %q", pe.Reason, pe.StatusCode, pe.Field, pe.Message, tc.wantReason, tc.wantCode, tc.wantField)
			}
			st, err := pusher.Status(ctx, endpoint, run.token)
			if err != nil {
				t.Fatal(err)
			}
			if cfg, n := p.rt.current(); st.Generation != gen || n != applied || cfg.Hash() != got.Status.Netcode.AppliedHash {
				t.Errorf("the refused push changed the server: generation %d, %d applies", st.Generation, n)
			}
		})
	}
}

func oversizedPush(t *testing.T, gen int64) []byte {
	t.Helper()
	raw, err := json.Marshal(netcode.ConfigPush{Generation: gen})
	if err != nil {
		t.Fatal(err)
	}
	return append(raw, []byte(strings.Repeat(" ", netcode.MaxAdminBodyBytes))...)
}

// TestSecretNeverLeaks drives a server through a push, a refused config and a replaced Secret
// (so the server refuses the operator's new token), then looks for the tokens in Pod specs,
// events, GameServer objects and the operator's log.
func TestSecretNeverLeaks(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	gs := newGameServer(ns, "gs-secret", v1alpha1.PortPolicyNone, 0)
	if err := k8s.Create(ctx, gs); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, gs, v1alpha1.GameServerStateReady)
	var sec corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: AdminTokenSecretName}, &sec); err != nil {
		t.Fatal(err)
	}
	tokens := []string{string(sec.Data[AdminTokenSecretKey])}
	unauthorizedBefore := testutil.ToFloat64(configPushErrors.WithLabelValues(pushErrUnauthorized))

	// Replace the Secret: the running process keeps the old token, so the operator's pushes with
	// the new one are refused.
	newTok, err := newAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, newTok)
	sec.Data[AdminTokenSecretKey] = []byte(newTok)
	if err := k8s.Update(ctx, &sec); err != nil {
		t.Fatal(err)
	}
	// The operator keeps tokens in memory; make it read the replaced Secret now.
	operator.tokens.forget(ns)
	editGS(t, gs, func(g *v1alpha1.GameServer) {
		g.Spec.Netcode.TickRateHz = 90
	})
	waitFor(t, waitLong, "the token refusal", func() (bool, error) {
		got := getGS(t, gs)
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionConfigApplied)
		return c != nil && c.Reason == v1alpha1.ReasonRefused && strings.Contains(c.Message, "token") &&
			testutil.ToFloat64(configPushErrors.WithLabelValues(pushErrUnauthorized)) > unauthorizedBefore, fmt.Errorf("conditions %+v", got.Status.Conditions)
	})

	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var evs eventsv1.EventList
	if err := k8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var gss v1alpha1.GameServerList
	if err := k8s.List(ctx, &gss, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) == 0 || operatorLog.Len() == 0 {
		t.Fatalf("nothing to search: %d events, %d bytes of log", len(evs.Items), operatorLog.Len())
	}
	for _, obj := range []any{pods, evs, gss} {
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range tokens {
			if strings.Contains(string(raw), tok) {
				t.Errorf("token found in %T", obj)
			}
		}
	}
	for _, tok := range tokens {
		if operatorLog.Contains(tok) || operatorLog.Contains(tok[:16]) {
			t.Error("token found in the operator's log")
		}
	}
	// Stop the retries.
	if err := k8s.Delete(ctx, gs); err != nil {
		t.Fatal(err)
	}
}
