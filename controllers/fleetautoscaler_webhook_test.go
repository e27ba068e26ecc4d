package controllers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// scalerWebhook is a webhook endpoint on a real HTTPS server: each path answers in its own way,
// and every call is recorded.
type scalerWebhook struct {
	srv *httptest.Server

	mu       sync.Mutex
	replicas int32
	calls    map[string][]webhookCall
}

// webhookCall is one call: when it came and when its answer was written (or the caller gave up).
type webhookCall struct {
	at, end time.Time
	req     v1alpha1.FleetAutoscaleRequest
}

func newScalerWebhook(t *testing.T) *scalerWebhook {
	t.Helper()
	w := &scalerWebhook{calls: map[string][]webhookCall{}}
	w.srv = httptest.NewTLSServer(http.HandlerFunc(w.serve))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *scalerWebhook) serve(rw http.ResponseWriter, r *http.Request) {
	var review v1alpha1.FleetAutoscaleReview
	raw, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(raw, &review); err != nil || review.Request == nil || r.Method != http.MethodPost ||
		r.Header.Get("Content-Type") != "application/json" {
		http.Error(rw, "bad request", http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	i := len(w.calls[r.URL.Path])
	w.calls[r.URL.Path] = append(w.calls[r.URL.Path], webhookCall{at: time.Now(), req: *review.Request})
	replicas := w.replicas
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.calls[r.URL.Path][i].end = time.Now()
		w.mu.Unlock()
	}()
	uid := review.Request.UID
	switch r.URL.Path {
	case "/scale":
		// An Agones-style answer: the review echoed, with its response.
		review.Response = &v1alpha1.FleetAutoscaleResponse{UID: uid, Scale: true, Replicas: replicas}
		_ = json.NewEncoder(rw).Encode(review)
	case "/keep":
		_, _ = fmt.Fprintf(rw, `{"response":{"uid":%q,"scale":false,"replicas":1}}`, uid)
	case "/slow":
		// No answer while the caller waits: the handler ends when the caller gives up (or, as a
		// bound, after a minute, with an error), so no answer of it can ever be taken.
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
			http.Error(rw, "too slow", http.StatusGatewayTimeout)
		}
	case "/error":
		http.Error(rw, "scaler is broken", http.StatusInternalServerError)
	case "/malformed":
		_, _ = fmt.Fprintf(rw, `{"response":{"uid":%q,"scale":true,"replicas":"three"}}`, uid)
	case "/wrong-uid":
		_, _ = fmt.Fprint(rw, `{"response":{"uid":"not-this-request","scale":true,"replicas":1}}`)
	case "/out-of-range":
		_, _ = fmt.Fprintf(rw, `{"response":{"uid":%q,"scale":true,"replicas":20000}}`, uid)
	default:
		http.NotFound(rw, r)
	}
}

func (w *scalerWebhook) setReplicas(n int32) {
	w.mu.Lock()
	w.replicas = n
	w.mu.Unlock()
}

func (w *scalerWebhook) callsTo(path string) []webhookCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]webhookCall(nil), w.calls[path]...)
}

// caBundle is the PEM of the server's certificate.
func (w *scalerWebhook) caBundle() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.srv.Certificate().Raw})
}

// TestFleetAutoscalerWebhook drives a fleet from a webhook on a real HTTPS server, checked
// against the autoscaler's CA bundle: the fleet takes the webhook's replicas, and the request
// describes the fleet. Then the webhook fails in every way — it times out, answers 500, answers
// malformed JSON or another request's uid, a replica count out of range, or cannot be reached
// — and each time the fleet is left as it is, AbleToScale says why, a Warning event is
// recorded, and the call is retried with a growing back-off (200 ms doubling in the suite).
// When it answers again, the fleet follows.
func TestFleetAutoscalerWebhook(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	hook := newScalerWebhook(t)
	hook.setReplicas(3)
	f := newFleet(ns, "hooked", 1)
	f.Labels = map[string]string{"game": "arena"}
	createReadyFleet(t, f)
	url := func(path string) *string { s := hook.srv.URL + path; return &s }
	fas := &v1alpha1.FleetAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hooked"},
		Spec: v1alpha1.FleetAutoscalerSpec{
			FleetName: f.Name,
			Policy: v1alpha1.FleetAutoscalerPolicy{Type: v1alpha1.FleetAutoscalerPolicyWebhook, Webhook: &v1alpha1.WebhookPolicy{
				URL: url("/scale"), CABundle: hook.caBundle(), TimeoutSeconds: 1,
			}},
			Sync: v1alpha1.FleetAutoscalerSync{Mode: v1alpha1.FleetAutoscalerSyncEvents, IntervalSeconds: testNoResync},
		},
	}
	if err := k8s.Create(ctx, fas); err != nil {
		t.Fatal(err)
	}
	waitFleet(t, f, fleetCounts{replicas: 3, ready: 3, updated: 3})
	waitAutoscaler(t, fas, autoscalerWant{desired: 3, current: 3, able: "True", ableReason: v1alpha1.ReasonScalingSucceeded,
		limitReason: v1alpha1.ReasonWithinLimits})

	// An allocation calls the webhook at once (no resync for an hour); it asks for 5.
	hook.setReplicas(5)
	before := len(hook.callsTo("/scale"))
	allocateBurst(t, ns, f.Name, 1)
	waitFleet(t, f, fleetCounts{replicas: 5, ready: 4, allocated: 1, updated: 5})
	calls := hook.callsTo("/scale")
	if len(calls) <= before {
		t.Fatalf("the allocation did not call the webhook")
	}
	req := calls[len(calls)-1].req
	if req.Name != f.Name || req.Namespace != ns || req.UID == "" || req.Status.AllocatedReplicas != 1 ||
		req.MetaData == nil || req.MetaData.Labels["game"] != "arena" || req.MetaData.Name != f.Name {
		t.Errorf("request %+v (metadata %+v)", req, req.MetaData)
	}

	// scale: false leaves the fleet as it is.
	editAutoscaler(t, fas, func(a *v1alpha1.FleetAutoscaler) { a.Spec.Policy.Webhook.URL = url("/keep") })
	waitAutoscaler(t, fas, autoscalerWant{desired: 5, current: 5, allocated: 1, able: "True", ableReason: v1alpha1.ReasonScalingSucceeded})
	if len(hook.callsTo("/keep")) == 0 {
		t.Fatal("no call to /keep")
	}

	closed := closedPort(t)
	failures := []struct {
		path, reason, message string
		url                   *string
	}{
		{path: "/slow", reason: v1alpha1.ReasonWebhookTimeout, message: "no answer within 1s"},
		{path: "/error", reason: v1alpha1.ReasonWebhookHTTPError, message: "500"},
		{path: "/malformed", reason: v1alpha1.ReasonWebhookMalformedResponse, message: "decode"},
		{path: "/wrong-uid", reason: v1alpha1.ReasonWebhookMalformedResponse, message: "response.uid"},
		{path: "/out-of-range", reason: v1alpha1.ReasonWebhookReplicasOutOfRange, message: "response.replicas 20000"},
		{reason: v1alpha1.ReasonWebhookUnreachable, message: "refused", url: &closed},
	}
	for _, fc := range failures {
		t.Run(fc.reason+fc.path, func(t *testing.T) {
			target := fc.url
			if target == nil {
				target = url(fc.path)
			}
			editAutoscaler(t, fas, func(a *v1alpha1.FleetAutoscaler) { a.Spec.Policy.Webhook.URL = target })
			got := waitAutoscaler(t, fas, autoscalerWant{desired: 5, current: 5, allocated: 1, able: "False", ableReason: fc.reason})
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAbleToScale)
			if !strings.Contains(c.Message, fc.message) || !strings.Contains(c.Message, "left at 5 replicas") {
				t.Errorf("AbleToScale message %q, want it to name %q and the fleet left at 5", c.Message, fc.message)
			}
			if got.Status.ObservedGeneration == got.Generation {
				t.Errorf("observedGeneration %d set by a failed pass", got.Status.ObservedGeneration)
			}
			if fc.path != "" {
				// Four calls: three gaps from one call's end to the next, each at least its back-off
				// (base doubled per failure, less 10% jitter; the passes themselves only add to
				// it), and growing.
				waitFor(t, fleetWait, "four calls", func() (bool, error) {
					n := len(hook.callsTo(fc.path))
					return n >= 4, fmt.Errorf("%d calls", n)
				})
				calls := hook.callsTo(fc.path)
				var gaps []time.Duration
				for i := 1; i < 4; i++ {
					gaps = append(gaps, calls[i].at.Sub(calls[i-1].end))
				}
				for i, g := range gaps {
					if least := testWebhookRetryBase << i * 9 / 10; g < least {
						t.Errorf("gap %d between calls %s, want at least %s (all gaps %v)", i+1, g, least, gaps)
					}
				}
				if gaps[2] < 2*gaps[0] {
					t.Errorf("gaps between calls %v: the back-off does not grow", gaps)
				}
			}
			if r := getFleet(t, f); r.Spec.Replicas != 5 {
				t.Errorf("fleet at %d replicas after a failed call, want 5", r.Spec.Replicas)
			}
		})
	}
	waitFor(t, fleetWait, "WebhookFailed events", func() (bool, error) {
		r := eventReasons(t, ns, fas.Name)
		return r["WebhookFailed"], fmt.Errorf("reasons %v", r)
	})

	// A CA bundle that is not the server's: the TLS handshake fails.
	editAutoscaler(t, fas, func(a *v1alpha1.FleetAutoscaler) {
		a.Spec.Policy.Webhook.URL = url("/scale")
		a.Spec.Policy.Webhook.CABundle = otherCA(t)
	})
	got := waitAutoscaler(t, fas, autoscalerWant{desired: 5, current: 5, allocated: 1, able: "False", ableReason: v1alpha1.ReasonWebhookUnreachable})
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAbleToScale); !strings.Contains(c.Message, "certificate") {
		t.Errorf("AbleToScale %q does not say the certificate was refused", c.Message)
	}

	// The webhook answers again, with the right CA: the fleet follows it.
	hook.setReplicas(2)
	editAutoscaler(t, fas, func(a *v1alpha1.FleetAutoscaler) { a.Spec.Policy.Webhook.CABundle = hook.caBundle() })
	waitFleet(t, f, fleetCounts{replicas: 2, ready: 1, allocated: 1, updated: 2})
	waitAutoscaler(t, fas, autoscalerWant{desired: 2, current: 2, allocated: 1, able: "True", ableReason: v1alpha1.ReasonScalingSucceeded})
}

// closedPort is an https URL on a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return "https://" + addr + "/scale"
}

// otherCA is a self-signed CA certificate of its own, not the one the test's webhook serves.
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
