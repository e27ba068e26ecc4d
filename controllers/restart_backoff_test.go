package controllers

import (
	"context"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// TestNewProcessResetsPushBackoff: calls to a server whose process is dead back off, up to
// RetryMax while a container's restart back-off lasts. Once the Pod shows a new process (its
// restart count went up), the first retry comes within RetryBase again: the backoff the dead
// process earned must not delay the new one's config (test/e2e's crash loop measured the push
// seconds late).
func TestNewProcessResetsPushBackoff(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	// Nobody listens: every call is refused, as by a process that is down or not up yet.
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: AdminTokenSecretName},
		Data:       map[string][]byte{AdminTokenSecretKey: []byte("tok")},
	}
	c := fake.NewClientBuilder().WithScheme(testScheme).WithObjects(secret).Build()
	opts := GameServerOptions{RetryBase: 100 * time.Millisecond, RetryMax: 10 * time.Second}
	opts.setDefaults()
	r := &GameServerReconciler{
		Client: c, recorder: events.NewFakeRecorder(100), pusher: NewPusher(time.Second),
		tokens: newTokenStore(c, c), memos: newMemos(), opts: opts,
	}
	gs := &v1alpha1.GameServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gs", UID: "uid", Generation: 2},
		Spec:       v1alpha1.GameServerSpec{AdminPort: int32(port)},
	}
	gs.Status.State = v1alpha1.GameServerStateReady
	gs.Status.Netcode = v1alpha1.GameServerNetcodeStatus{AppliedGeneration: 2, AppliedHash: gs.Spec.Netcode.Default().Hash(), InstanceID: "dead"}
	pod := testPod(corev1.PodRunning, "node", false)
	pod.Status.PodIP = "127.0.0.1"
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "server", RestartCount: 3}}
	memo := r.memos.get(types.NamespacedName{Namespace: gs.Namespace, Name: gs.Name}, gs.UID)

	pass := func() time.Duration {
		t.Helper()
		d, err := r.reconcileConfig(context.Background(), gs, pod, memo)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	var d time.Duration
	for range 10 {
		d = pass()
	}
	if d < opts.RetryMax/2 {
		t.Fatalf("after 10 refused calls the retry comes in %s, want the maximum backoff", d)
	}
	// The runner starts a new process: the restart count goes up before it listens.
	pod.Status.ContainerStatuses[0].RestartCount = 4
	if d := pass(); d > opts.RetryBase {
		t.Errorf("first retry for the new process in %s, want at most %s", d, opts.RetryBase)
	}
	if d := pass(); d > 2*opts.RetryBase {
		t.Errorf("second retry for the new process in %s, want at most %s", d, 2*opts.RetryBase)
	}
}
