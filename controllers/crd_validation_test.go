package controllers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

func i32p(v int32) *int32 { return &v }

// invalidGameServers are manifests the API server must refuse, each with the field its error
// must name. The netcode ones are also judged by netcode.Validate (TestValidateMatchesCRD).
var invalidGameServers = []struct {
	name  string
	field string
	edit  func(gs *v1alpha1.GameServer)
	// raw edits the manifest as JSON, for what typed Go cannot express.
	raw func(obj map[string]any)
}{
	{name: "no ports", field: "spec.ports", edit: func(gs *v1alpha1.GameServer) { gs.Spec.Ports = []v1alpha1.GameServerPort{} }},
	{name: "static without hostPort", field: "spec.ports[0].hostPort", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Ports[0].PortPolicy = v1alpha1.PortPolicyStatic
	}},
	{name: "dynamic with hostPort", field: "spec.ports[0].hostPort", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Ports[0].HostPort = 7000
	}},
	{name: "none with hostPort", field: "spec.ports[0].hostPort", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Ports[0].PortPolicy, gs.Spec.Ports[0].HostPort = v1alpha1.PortPolicyNone, 7000
	}},
	{name: "duplicate port names", field: "spec.ports[1]", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Ports = append(gs.Spec.Ports, v1alpha1.GameServerPort{Name: "game", ContainerPort: 7778})
	}},
	{name: "duplicate container ports", field: "spec.ports", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Ports = append(gs.Spec.Ports, v1alpha1.GameServerPort{Name: "voice", ContainerPort: netcode.DefaultGamePort})
	}},
	{name: "duplicate host ports", field: "spec.ports", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Ports = []v1alpha1.GameServerPort{
			{Name: "game", ContainerPort: 7777, PortPolicy: v1alpha1.PortPolicyStatic, HostPort: 7100},
			{Name: "voice", ContainerPort: 7778, PortPolicy: v1alpha1.PortPolicyStatic, HostPort: 7100},
		}
	}},
	{name: "port name not an IANA name", field: "spec.ports[0].name", edit: func(gs *v1alpha1.GameServer) { gs.Spec.Ports[0].Name = "Game_Port" }},
	{name: "container port zero", field: "spec.ports[0].containerPort", edit: func(gs *v1alpha1.GameServer) { gs.Spec.Ports[0].ContainerPort = 0 }},
	{name: "container port too big", field: "spec.ports[0].containerPort", edit: func(gs *v1alpha1.GameServer) { gs.Spec.Ports[0].ContainerPort = 70000 }},
	{name: "unknown protocol", field: "spec.ports[0].protocol", edit: func(gs *v1alpha1.GameServer) { gs.Spec.Ports[0].Protocol = "SCTP" }},
	{name: "unknown port policy", field: "spec.ports[0].portPolicy", edit: func(gs *v1alpha1.GameServer) { gs.Spec.Ports[0].PortPolicy = "Random" }},
	{name: "admin port on a game port", field: "spec.adminPort", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Ports[0].Protocol, gs.Spec.AdminPort = "TCP", netcode.DefaultGamePort
	}},
	{name: "container names no container", field: "spec.container", edit: func(gs *v1alpha1.GameServer) { gs.Spec.Container = "sidecar" }},
	{name: "no containers", field: "spec.template.spec.containers", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Template.Spec.Containers = nil
	}},
	{name: "template without a pod spec", field: "spec.template.spec.containers", raw: func(obj map[string]any) {
		delete(obj["spec"].(map[string]any)["template"].(map[string]any), "spec")
	}},
	{name: "container names no container of an empty list", field: "spec.container", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Container, gs.Spec.Template.Spec.Containers = "server", []corev1.Container{}
	}},
	{name: "health check too eager", field: "spec.health.unhealthyAfterSeconds", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Health.UnhealthyAfterSeconds = 1
	}},
	{name: "no template", field: "spec.template", raw: func(obj map[string]any) {
		delete(obj["spec"].(map[string]any), "template")
	}},
	{name: "float tick rate", field: "spec.netcode.tickRateHz", raw: func(obj map[string]any) {
		obj["spec"].(map[string]any)["netcode"] = map[string]any{"tickRateHz": 60.5}
	}},
	{name: "tick rate too high", field: "spec.netcode.tickRateHz", edit: func(gs *v1alpha1.GameServer) { gs.Spec.Netcode.TickRateHz = 200 }},
	{name: "minSendHz above tickRateHz", field: "spec.netcode.congestion.minSendHz", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Netcode.TickRateHz, gs.Spec.Netcode.Congestion.MinSendHz = 30, 40
	}},
	{name: "minSendHz above the default tick rate", field: "spec.netcode.congestion.minSendHz", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Netcode.Congestion.MinSendHz = 61
	}},
	{name: "decrease factor too close to 1", field: "spec.netcode.congestion.decreaseFactorPermille", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Netcode.Congestion.DecreaseFactorPermille = 995
	}},
	{name: "frame smaller than a packet", field: "spec.netcode.backpressure.frameBytes", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Netcode.Backpressure.FrameBytes = 1000
	}},
	{name: "frame pool under two frames", field: "spec.netcode.memory.framePoolBudgetBytes", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Netcode.Memory.FramePoolBudgetBytes = 65536
	}},
	{name: "snapshot budget under one record", field: "spec.netcode.budget.snapshotBytesPerTick", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Netcode.Budget.SnapshotBytesPerTick = i32p(10)
	}},
	{name: "session rate under one packet", field: "spec.netcode.budget.sessionBytesPerSecond", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Netcode.Budget.SessionBytesPerSecond = i32p(500)
	}},
	{name: "packet above the MTU", field: "spec.netcode.budget.maxPacketBytes", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Netcode.Budget.MaxPacketBytes = 1500
	}},
	{name: "ingress rate under one message", field: "spec.netcode.ingress.bytesPerSecond", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Netcode.Ingress.BytesPerSecond = 512
	}},
	{name: "negative budget floor", field: "spec.netcode.congestion.budgetFloorBytes", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Netcode.Congestion.BudgetFloorBytes = i32p(-1)
	}},
	{name: "loss ceiling below the loss threshold", field: "spec.netcode.congestion.lossCeilingPermille", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Netcode.Congestion.LossThresholdPermille, gs.Spec.Netcode.Congestion.LossCeilingPermille = 100, 50
	}},
	{name: "loss threshold above the default loss ceiling", field: "spec.netcode.congestion.lossCeilingPermille", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Netcode.Congestion.LossThresholdPermille = 200
	}},
	{name: "loss test rate too low", field: "spec.netcode.congestion.lossTestRatePermille", edit: func(gs *v1alpha1.GameServer) {
		gs.Spec.Netcode.Congestion.LossTestRatePermille = 400
	}},
}

// TestCRDRefusesInvalid creates each invalid manifest on the real API server: each is refused as
// Invalid with the offending field named.
func TestCRDRefusesInvalid(t *testing.T) {
	ns := newNamespace(t)
	for i, tc := range invalidGameServers {
		t.Run(tc.name, func(t *testing.T) {
			gs := newGameServer(ns, fmt.Sprintf("bad-%d", i), v1alpha1.PortPolicyDynamic, 0)
			var obj client.Object = gs
			if tc.edit != nil {
				tc.edit(gs)
			}
			if tc.raw != nil {
				u := toUnstructured(t, gs)
				tc.raw(u.Object)
				obj = u
			}
			err := k8s.Create(context.Background(), obj)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want Invalid", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error does not name %s: %v", tc.field, err)
			}
		})
	}
}

func toUnstructured(t *testing.T, gs *v1alpha1.GameServer) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(gs)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("GameServer"))
	return u
}

// TestValidateMatchesCRD judges the netcode manifests of invalidGameServers with netcode.Validate:
// it refuses each, naming the field the API server named, so a config pushed straight to a
// server meets the same rules as one applied with kubectl.
func TestValidateMatchesCRD(t *testing.T) {
	n := 0
	for _, tc := range invalidGameServers {
		field, ok := strings.CutPrefix(tc.field, "spec.netcode.")
		if !ok || tc.edit == nil {
			continue
		}
		n++
		t.Run(tc.name, func(t *testing.T) {
			gs := newGameServer("ns", "x", v1alpha1.PortPolicyDynamic, 0)
			tc.edit(gs)
			err := gs.Spec.Netcode.Validate()
			ve, ok := errors.AsType[*netcode.ValidationError](err)
			if !ok {
				t.Fatalf("Validate: %v, want a ValidationError", err)
			}
			var fields []string
			for _, f := range ve.Fields {
				fields = append(fields, f.Field)
			}
			if !slices.Contains(fields, field) {
				t.Errorf("Validate named %v, want %s", fields, field)
			}
		})
	}
	if n < 10 {
		t.Fatalf("only %d netcode cases", n)
	}
}

// TestCRDDefaultsAndImmutability checks what the API server fills in, and that the fields the
// Pod is built from cannot change.
func TestCRDDefaultsAndImmutability(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	gs := newGameServer(ns, "defaults", "", 0)
	gs.Spec.AdminPort = 0
	// A Pod that fails at once keeps this server out of the way of the other tests.
	gs.Spec.Template.Annotations = map[string]string{annotationFailStart: "true"}
	if err := k8s.Create(ctx, gs); err != nil {
		t.Fatal(err)
	}
	got := getGS(t, gs)
	p := got.Spec.Ports[0]
	if p.Protocol != "UDP" || p.PortPolicy != v1alpha1.PortPolicyDynamic || got.Spec.AdminPort != netcode.DefaultAdminPort {
		t.Errorf("port defaults: %+v, adminPort %d", p, got.Spec.AdminPort)
	}
	// Netcode defaults are the operator's and the server's to apply: the object keeps only what
	// was set, and reads back the same.
	if !reflect.DeepEqual(got.Spec.Netcode, netcode.NetcodeConfig{}) {
		t.Errorf("the API server filled in netcode fields: %+v", got.Spec.Netcode)
	}
	if want := (netcode.NetcodeConfig{}).Default(); got.Spec.Netcode.Default().Hash() != want.Hash() {
		t.Errorf("an empty netcode does not default to Default()")
	}

	tests := []struct {
		name  string
		field string
		edit  func(gs *v1alpha1.GameServer)
	}{
		{name: "ports", field: "spec.ports", edit: func(gs *v1alpha1.GameServer) { gs.Spec.Ports[0].ContainerPort = 7000 }},
		{name: "adminPort", field: "spec.adminPort", edit: func(gs *v1alpha1.GameServer) { gs.Spec.AdminPort = 9000 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Retried while the operator's status writes race the update.
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				edit := getGS(t, gs)
				tc.edit(edit)
				return k8s.Update(ctx, edit)
			})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("got %v, want Invalid naming %s", err, tc.field)
			}
		})
	}
}
