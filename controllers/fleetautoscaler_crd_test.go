package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

func strp(s string) *string { return &s }

// webhookPolicy is a valid Webhook policy on url.
func webhookPolicy(url string) v1alpha1.FleetAutoscalerPolicy {
	return v1alpha1.FleetAutoscalerPolicy{Type: v1alpha1.FleetAutoscalerPolicyWebhook, Webhook: &v1alpha1.WebhookPolicy{URL: strp(url)}}
}

// invalidAutoscalers are FleetAutoscalers the API server must refuse, each with the field its
// error must name.
var invalidAutoscalers = []struct {
	name  string
	field string
	edit  func(fas *v1alpha1.FleetAutoscaler)
	raw   func(obj map[string]any)
}{
	{name: "buffer over max", field: "spec.policy.buffer.bufferSize", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Buffer.BufferSize, fas.Spec.Policy.Buffer.MaxReplicas = intstr.FromInt32(11), 10
	}},
	{name: "min over max", field: "spec.policy.buffer.minReplicas", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Buffer.MinReplicas, fas.Spec.Policy.Buffer.MaxReplicas = 8, 5
	}},
	{name: "percentage 0", field: "spec.policy.buffer.bufferSize", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Buffer.BufferSize = intstr.FromString("0%")
	}},
	{name: "percentage 100", field: "spec.policy.buffer.bufferSize", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Buffer.BufferSize = intstr.FromString("100%")
	}},
	{name: "percentage 150", field: "spec.policy.buffer.bufferSize", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Buffer.BufferSize = intstr.FromString("150%")
	}},
	{name: "negative percentage", field: "spec.policy.buffer.bufferSize", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Buffer.BufferSize = intstr.FromString("-5%")
	}},
	{name: "fractional percentage", field: "spec.policy.buffer.bufferSize", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Buffer.BufferSize = intstr.FromString("2.5%")
	}},
	{name: "count as a string", field: "spec.policy.buffer.bufferSize", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Buffer.BufferSize = intstr.FromString("5")
	}},
	{name: "count zero", field: "spec.policy.buffer.bufferSize", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Buffer.BufferSize = intstr.FromInt32(0)
	}},
	{name: "no bufferSize", field: "spec.policy.buffer.bufferSize", raw: func(obj map[string]any) {
		delete(obj["spec"].(map[string]any)["policy"].(map[string]any)["buffer"].(map[string]any), "bufferSize")
	}},
	{name: "maxReplicas zero", field: "spec.policy.buffer.maxReplicas", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Buffer.MaxReplicas = 0
	}},
	{name: "maxReplicas above a fleet's", field: "spec.policy.buffer.maxReplicas", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Buffer.MaxReplicas = 10001
	}},
	{name: "negative minReplicas", field: "spec.policy.buffer.minReplicas", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Buffer.MinReplicas = -1
	}},
	{name: "both policies", field: "spec.policy.webhook", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Webhook = webhookPolicy("https://scaler.example/scale").Webhook
	}},
	{name: "both policies, type Webhook", field: "spec.policy.buffer", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Type = v1alpha1.FleetAutoscalerPolicyWebhook
		fas.Spec.Policy.Webhook = webhookPolicy("https://scaler.example/scale").Webhook
	}},
	{name: "neither policy, type Buffer", field: "spec.policy.buffer", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Buffer = nil
	}},
	{name: "neither policy, type Webhook", field: "spec.policy.webhook", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy = v1alpha1.FleetAutoscalerPolicy{Type: v1alpha1.FleetAutoscalerPolicyWebhook}
	}},
	{name: "unknown policy type", field: "spec.policy.type", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy.Type = "Counter"
	}},
	{name: "no policy type", field: "spec.policy.type", raw: func(obj map[string]any) {
		delete(obj["spec"].(map[string]any)["policy"].(map[string]any), "type")
	}},
	{name: "webhook with url and service", field: "spec.policy.webhook.url", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy = webhookPolicy("https://scaler.example/scale")
		fas.Spec.Policy.Webhook.Service = &v1alpha1.WebhookServiceReference{Name: "scaler"}
	}},
	{name: "webhook with neither url nor service", field: "spec.policy.webhook.url", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy = webhookPolicy("https://scaler.example/scale")
		fas.Spec.Policy.Webhook.URL = nil
	}},
	{name: "webhook url not a URL", field: "spec.policy.webhook.url", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy = webhookPolicy("scaler:80 /scale")
	}},
	{name: "webhook url of another scheme", field: "spec.policy.webhook.url", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy = webhookPolicy("ftp://scaler.example/scale")
	}},
	{name: "webhook url without a host", field: "spec.policy.webhook.url", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy = webhookPolicy("https:///scale")
	}},
	{name: "webhook url with a fragment", field: "spec.policy.webhook.url", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy = webhookPolicy("https://scaler.example/scale#now")
	}},
	{name: "CA bundle with an http url", field: "spec.policy.webhook.caBundle", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy = webhookPolicy("http://scaler.example/scale")
		fas.Spec.Policy.Webhook.CABundle = []byte("-----BEGIN CERTIFICATE-----")
	}},
	{name: "timeout too long", field: "spec.policy.webhook.timeoutSeconds", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy = webhookPolicy("https://scaler.example/scale")
		fas.Spec.Policy.Webhook.TimeoutSeconds = 31
	}},
	{name: "service port out of range", field: "spec.policy.webhook.service.port", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy = v1alpha1.FleetAutoscalerPolicy{Type: v1alpha1.FleetAutoscalerPolicyWebhook, Webhook: &v1alpha1.WebhookPolicy{
			Service: &v1alpha1.WebhookServiceReference{Name: "scaler", Port: 70000}}}
	}},
	{name: "service path without a slash", field: "spec.policy.webhook.service.path", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy = v1alpha1.FleetAutoscalerPolicy{Type: v1alpha1.FleetAutoscalerPolicyWebhook, Webhook: &v1alpha1.WebhookPolicy{
			Service: &v1alpha1.WebhookServiceReference{Name: "scaler", Path: "scale"}}}
	}},
	{name: "service name not a DNS label", field: "spec.policy.webhook.service.name", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Policy = v1alpha1.FleetAutoscalerPolicy{Type: v1alpha1.FleetAutoscalerPolicyWebhook, Webhook: &v1alpha1.WebhookPolicy{
			Service: &v1alpha1.WebhookServiceReference{Name: "Scaler.svc"}}}
	}},
	{name: "fleet name not a DNS label", field: "spec.fleetName", edit: func(fas *v1alpha1.FleetAutoscaler) { fas.Spec.FleetName = "Arena" }},
	{name: "no fleet name", field: "spec.fleetName", edit: func(fas *v1alpha1.FleetAutoscaler) { fas.Spec.FleetName = "" }},
	{name: "unknown sync mode", field: "spec.sync.mode", edit: func(fas *v1alpha1.FleetAutoscaler) { fas.Spec.Sync.Mode = "Sometimes" }},
	{name: "sync interval too long", field: "spec.sync.intervalSeconds", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Sync.IntervalSeconds = 86401
	}},
	{name: "negative sync interval", field: "spec.sync.intervalSeconds", edit: func(fas *v1alpha1.FleetAutoscaler) {
		fas.Spec.Sync.IntervalSeconds = -1
	}},
}

// TestFleetAutoscalerCRDRefusesInvalid creates each invalid FleetAutoscaler on the real API
// server: each is refused as Invalid with the offending field named.
func TestFleetAutoscalerCRDRefusesInvalid(t *testing.T) {
	ns := newNamespace(t)
	for i, tc := range invalidAutoscalers {
		t.Run(tc.name, func(t *testing.T) {
			fas := newBufferAutoscaler(ns, fmt.Sprintf("bad-%d", i), "arena", intstr.FromInt32(2), 1, 10)
			var obj client.Object = fas
			if tc.edit != nil {
				tc.edit(fas)
			}
			if tc.raw != nil {
				m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(fas)
				if err != nil {
					t.Fatal(err)
				}
				tc.raw(m)
				u := &unstructured.Unstructured{Object: m}
				u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("FleetAutoscaler"))
				obj = u
			}
			err := k8s.Create(context.Background(), obj, client.DryRunAll)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want Invalid", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error does not name %s: %v", tc.field, err)
			}
		})
	}
}

// TestFleetAutoscalerCRDDefaults: what the API server fills in, and the valid edge cases it
// takes.
func TestFleetAutoscalerCRDDefaults(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	raw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "FleetAutoscaler",
		"metadata": map[string]any{"namespace": ns, "name": "minimal"},
		"spec": map[string]any{"fleetName": "arena", "policy": map[string]any{
			"type": "Buffer", "buffer": map[string]any{"bufferSize": "20%", "maxReplicas": 10},
		}},
	}}
	if err := k8s.Create(ctx, raw, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.FleetAutoscaler
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw.Object, &got); err != nil {
		t.Fatal(err)
	}
	if s := got.Spec.Sync; s.Mode != v1alpha1.FleetAutoscalerSyncEvents || s.IntervalSeconds != 30 || got.Spec.Policy.Buffer.MinReplicas != 0 {
		t.Errorf("defaults: sync %+v, minReplicas %d", s, got.Spec.Policy.Buffer.MinReplicas)
	}

	service := &v1alpha1.FleetAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "service"},
		Spec: v1alpha1.FleetAutoscalerSpec{FleetName: "arena", Policy: v1alpha1.FleetAutoscalerPolicy{
			Type: v1alpha1.FleetAutoscalerPolicyWebhook, Webhook: &v1alpha1.WebhookPolicy{Service: &v1alpha1.WebhookServiceReference{Name: "scaler"}},
		}},
	}
	if err := k8s.Create(ctx, service, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if w := service.Spec.Policy.Webhook; w.TimeoutSeconds != 10 || w.Service.Port != 8000 {
		t.Errorf("webhook defaults: timeout %d, port %d", w.TimeoutSeconds, w.Service.Port)
	}

	valid := []func(*v1alpha1.FleetAutoscaler){
		func(f *v1alpha1.FleetAutoscaler) { f.Spec.Policy.Buffer.BufferSize = intstr.FromString("1%") },
		func(f *v1alpha1.FleetAutoscaler) { f.Spec.Policy.Buffer.BufferSize = intstr.FromString("99%") },
		func(f *v1alpha1.FleetAutoscaler) {
			f.Spec.Policy.Buffer.BufferSize, f.Spec.Policy.Buffer.MinReplicas, f.Spec.Policy.Buffer.MaxReplicas = intstr.FromInt32(10), 10, 10
		},
		// A percentage is not compared with maxReplicas: it is a share of the replicas.
		func(f *v1alpha1.FleetAutoscaler) {
			f.Spec.Policy.Buffer.BufferSize, f.Spec.Policy.Buffer.MaxReplicas = intstr.FromString("50%"), 1
		},
		func(f *v1alpha1.FleetAutoscaler) {
			f.Spec.Policy = webhookPolicy("https://scaler.example:8443/scale?fleet=arena")
			f.Spec.Policy.Webhook.CABundle = []byte("-----BEGIN CERTIFICATE-----")
		},
		func(f *v1alpha1.FleetAutoscaler) { f.Spec.Policy = webhookPolicy("http://10.0.0.7/") },
	}
	for i, edit := range valid {
		fas := newBufferAutoscaler(ns, fmt.Sprintf("valid-%d", i), "arena", intstr.FromInt32(2), 1, 10)
		edit(fas)
		if err := k8s.Create(ctx, fas, client.DryRunAll); err != nil {
			t.Errorf("valid %d refused: %v", i, err)
		}
	}
}
