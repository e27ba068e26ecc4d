package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// TestDecideBuffer checks the Buffer policy's replicas against figures worked out by hand.
func TestDecideBuffer(t *testing.T) {
	count := intstr.FromInt32
	pct := intstr.FromString
	tests := []struct {
		name      string
		buffer    intstr.IntOrString
		min, max  int32
		allocated int32
		replicas  int32
		wanted    int32
		limit     string
	}{
		{name: "count, idle", buffer: count(3), max: 20, allocated: 0, replicas: 3, wanted: 3, limit: v1alpha1.ReasonWithinLimits},
		{name: "count, busy", buffer: count(3), max: 20, allocated: 9, replicas: 12, wanted: 12, limit: v1alpha1.ReasonWithinLimits},
		{name: "count, at max", buffer: count(3), max: 10, allocated: 9, replicas: 10, wanted: 12, limit: v1alpha1.ReasonAtMaxReplicas},
		{name: "count, exactly max", buffer: count(3), max: 12, allocated: 9, replicas: 12, wanted: 12, limit: v1alpha1.ReasonWithinLimits},
		{name: "count, more Allocated than max", buffer: count(2), max: 5, allocated: 8, replicas: 5, wanted: 10, limit: v1alpha1.ReasonAtMaxReplicas},
		{name: "count, at min", buffer: count(2), min: 6, max: 20, allocated: 1, replicas: 6, wanted: 3, limit: v1alpha1.ReasonAtMinReplicas},
		{name: "count, above min", buffer: count(2), min: 6, max: 20, allocated: 5, replicas: 7, wanted: 7, limit: v1alpha1.ReasonWithinLimits},
		{name: "count, beyond a fleet's range", buffer: count(10000), max: 10000, allocated: 9000, replicas: 10000, wanted: 10000, limit: v1alpha1.ReasonWithinLimits},
		// 160 Allocated with 20% free: 200 replicas (40 free); one more Allocated: 202 (161/0.8 = 201.25).
		{name: "percent", buffer: pct("20%"), max: 400, allocated: 160, replicas: 200, wanted: 200, limit: v1alpha1.ReasonWithinLimits},
		{name: "percent, rounded up", buffer: pct("20%"), max: 400, allocated: 161, replicas: 202, wanted: 202, limit: v1alpha1.ReasonWithinLimits},
		{name: "percent, idle keeps one free", buffer: pct("20%"), max: 400, allocated: 0, replicas: 1, wanted: 1, limit: v1alpha1.ReasonWithinLimits},
		{name: "percent, small keeps one free", buffer: pct("10%"), max: 400, allocated: 3, replicas: 4, wanted: 4, limit: v1alpha1.ReasonWithinLimits},
		{name: "percent, half", buffer: pct("50%"), max: 400, allocated: 7, replicas: 14, wanted: 14, limit: v1alpha1.ReasonWithinLimits},
		{name: "percent, 99", buffer: pct("99%"), max: 10000, allocated: 2, replicas: 200, wanted: 200, limit: v1alpha1.ReasonWithinLimits},
		{name: "percent, 1", buffer: pct("1%"), max: 10000, allocated: 99, replicas: 100, wanted: 100, limit: v1alpha1.ReasonWithinLimits},
		{name: "percent, at min", buffer: pct("25%"), min: 4, max: 40, allocated: 0, replicas: 4, wanted: 1, limit: v1alpha1.ReasonAtMinReplicas},
		{name: "percent, at max", buffer: pct("25%"), min: 4, max: 40, allocated: 36, replicas: 40, wanted: 48, limit: v1alpha1.ReasonAtMaxReplicas},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := decideBuffer(v1alpha1.BufferPolicy{BufferSize: tc.buffer, MinReplicas: tc.min, MaxReplicas: tc.max}, tc.allocated)
			if err != nil {
				t.Fatal(err)
			}
			if d.replicas != tc.replicas || d.wanted != tc.wanted || d.limit != tc.limit {
				t.Errorf("got replicas %d wanted %d limit %s, want %d %d %s", d.replicas, d.wanted, d.limit, tc.replicas, tc.wanted, tc.limit)
			}
			if d.why == "" {
				t.Error("no explanation")
			}
		})
	}
}

// TestDecideBufferRefuses: a buffer the CRD would refuse is an error naming the field, not a
// number.
func TestDecideBufferRefuses(t *testing.T) {
	for _, b := range []intstr.IntOrString{intstr.FromInt32(0), intstr.FromInt32(-2), intstr.FromString("0%"),
		intstr.FromString("100%"), intstr.FromString("20"), intstr.FromString("x%"), intstr.FromString("")} {
		_, err := decideBuffer(v1alpha1.BufferPolicy{BufferSize: b, MaxReplicas: 10}, 3)
		if err == nil || !strings.Contains(err.Error(), "spec.policy.buffer.bufferSize") {
			t.Errorf("bufferSize %s: err %v, want one naming spec.policy.buffer.bufferSize", b.String(), err)
		}
	}
}

// TestRetryDelay: the back-off doubles from the base to the cap, each within ±10%.
func TestRetryDelay(t *testing.T) {
	base, maxDelay := 100*time.Millisecond, 1*time.Second
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{{1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {3, 400 * time.Millisecond}, {4, 800 * time.Millisecond},
		{5, time.Second}, {60, time.Second}} {
		for range 50 {
			d := retryDelay(tc.failures, base, maxDelay)
			if lo, hi := tc.want*9/10, tc.want*11/10; d < lo || d > hi {
				t.Fatalf("failure %d: delay %s, want within [%s, %s]", tc.failures, d, lo, hi)
			}
		}
	}
}

func TestWebhookURL(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name   string
		policy v1alpha1.WebhookPolicy
		want   string
	}{
		{name: "url", policy: v1alpha1.WebhookPolicy{URL: str("https://scaler.example:8443/scale?fleet=arena")},
			want: "https://scaler.example:8443/scale?fleet=arena"},
		{name: "service with defaults", policy: v1alpha1.WebhookPolicy{Service: &v1alpha1.WebhookServiceReference{Name: "scaler"}},
			want: "http://scaler.games.svc:8000/"},
		{name: "service in full", policy: v1alpha1.WebhookPolicy{Service: &v1alpha1.WebhookServiceReference{
			Namespace: "ops", Name: "scaler", Port: 9443, Path: "/v1/scale"}, CABundle: []byte("pem")},
			want: "https://scaler.ops.svc:9443/v1/scale"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := webhookURL(&tc.policy, "games")
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := webhookURL(&v1alpha1.WebhookPolicy{}, "games"); err == nil || !strings.Contains(err.Error(), "spec.policy.webhook") {
		t.Errorf("no url nor service: err %v", err)
	}
}

// TestWebhookClientRefusesBadCABundle: a CA bundle without a certificate is refused naming the
// field; clients are kept per bundle.
func TestWebhookClientRefusesBadCABundle(t *testing.T) {
	w := newWebhookCaller()
	if _, err := w.client([]byte("not a certificate")); err == nil || !strings.Contains(err.Error(), "spec.policy.webhook.caBundle") {
		t.Errorf("err %v, want one naming spec.policy.webhook.caBundle", err)
	}
	a, err := w.client(nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := w.client(nil); a != b {
		t.Error("a second client for the same bundle")
	}
}

// answeringTransport answers every webhook call with scale: true and replicas 7 for the call's
// uid, after waiting for the call's context to end when late is set: the transport hands the
// answer over although the call's time has run out.
type answeringTransport struct{ late bool }

func (a answeringTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var review v1alpha1.FleetAutoscaleReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		return nil, fmt.Errorf("request body: %w", err)
	}
	if review.Request == nil {
		return nil, errors.New("request body: no request")
	}
	if a.late {
		<-r.Context().Done()
	}
	body := fmt.Sprintf(`{"response":{"uid":%q,"scale":true,"replicas":7}}`, review.Request.UID)
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// TestWebhookLateAnswerIsATimeout: an answer handed over after the call's timeout is refused as
// a timeout, whatever it says; the same answer in time is taken.
func TestWebhookLateAnswerIsATimeout(t *testing.T) {
	url := "https://scaler.invalid/scale"
	p := &v1alpha1.WebhookPolicy{URL: &url, TimeoutSeconds: 1}
	for _, late := range []bool{false, true} {
		w := newWebhookCaller()
		w.clients[sha256.Sum256(nil)] = &http.Client{Transport: answeringTransport{late: late}}
		req := &v1alpha1.FleetAutoscaleRequest{UID: types.UID(fmt.Sprintf("call-%t", late)), Name: "f", Namespace: "ns"}
		resp, err := w.call(context.Background(), p, "ns", req)
		if !late {
			if err != nil || !resp.Scale || resp.Replicas != 7 {
				t.Fatalf("answer in time: %+v, %v; want scale to 7", resp, err)
			}
			continue
		}
		we, ok := errors.AsType[*webhookError](err)
		if !ok || we.reason != v1alpha1.ReasonWebhookTimeout || !strings.Contains(err.Error(), "no answer within 1s") {
			t.Fatalf("late answer: %+v, %v; want a %s error", resp, err, v1alpha1.ReasonWebhookTimeout)
		}
	}
}
