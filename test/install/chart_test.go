package install

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	chart       = "charts/netfleet"
	releaseNS   = "netfleet-system"
	prometheus  = `[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]`
	monitorsOn  = "metrics.serviceMonitor.enabled=true,metrics.podMonitor.enabled=true"
	adminFromPr = "networkPolicy.gameServers.adminFrom=" + prometheus
)

// withMonitors are the helm arguments that turn both monitors on, with Prometheus admitted to
// the game servers' admin port.
var withMonitors = []string{"--set", monitorsOn, "--set-json", adminFromPr}

// TestChartValues lints and renders the chart with the values a user is likely to set, and checks
// that values the chart cannot honor are refused, by the schema or the templates, with a message
// that says why.
func TestChartValues(t *testing.T) {
	x := newTools(t)
	tests := []struct {
		name    string
		args    []string
		wantErr string // empty: lint and render pass
	}{
		{name: "defaults"},
		{name: "monitors", args: withMonitors},
		{name: "allocator over TLS behind a load balancer", args: []string{"--set",
			"allocator.tls.secretName=allocator-tls,allocator.service.type=LoadBalancer,allocator.service.loadBalancerSourceRanges={10.0.0.0/8}"}},
		{name: "no allocator, no network policies, no dashboards", args: []string{"--set",
			"allocator.enabled=false,networkPolicy.enabled=false,dashboards.enabled=false"}},
		{name: "pinned image", args: []string{"--set", "operator.image.digest=sha256:" + strings.Repeat("ab", 32)}},
		{name: "unknown value", args: []string{"--set", "operator.replica=3"}, wantErr: "additional properties 'replica' not allowed"},
		{name: "bad port range", args: []string{"--set", "operator.portRange=7000"}, wantErr: "portRange"},
		{name: "bad log level", args: []string{"--set", "operator.logLevel=loud"}, wantErr: "logLevel"},
		{name: "pod monitor behind the network policy without Prometheus admitted",
			args: []string{"--set", "metrics.podMonitor.enabled=true"}, wantErr: "networkPolicy.gameServers.adminFrom is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantErr == "" {
				x.run(t, nil, x.helm, append([]string{"lint", "--strict", chart}, tt.args...)...)
				x.run(t, nil, x.helm, append([]string{"template", "netfleet", chart}, tt.args...)...)
				return
			}
			_, err := x.try(nil, x.helm, append([]string{"template", "netfleet", chart}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("helm template: %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

// TestChartRender checks what the chart renders against what the rest of netfleet expects: the
// generated CRDs and RBAC rules, the operator's flags, the monitors' relabeling that the
// dashboards select on, the dashboards themselves, and the NetworkPolicy that keeps the game
// servers' admin API to the operator.
func TestChartRender(t *testing.T) {
	x := newTools(t)
	objs := decode(t, x.run(t, nil, x.helm, append([]string{"template", "netfleet", chart, "-n", releaseNS}, withMonitors...)...))

	t.Run("CRDs are the generated ones", func(t *testing.T) {
		want, err := filepath.Glob(x.path("config/crd/bases/*.yaml"))
		if err != nil || len(want) != 4 {
			t.Fatalf("generated CRDs: %v %v", want, err)
		}
		for _, f := range want {
			a, errA := os.ReadFile(f)
			b, errB := os.ReadFile(x.path(chart + "/crds/" + filepath.Base(f)))
			if errA != nil || errB != nil || string(a) != string(b) {
				t.Errorf("%s: the chart's copy differs from config/crd/bases (run make manifests): %v %v", filepath.Base(f), errA, errB)
			}
		}
	})

	t.Run("RBAC rules are the generated ones", func(t *testing.T) {
		for _, c := range []struct{ kind, name, file string }{
			{"ClusterRole", "netfleet-operator", "config/rbac/role.yaml"},
			{"Role", "netfleet-operator-leader-election", "config/rbac/leader_election_role.yaml"},
		} {
			got := field(t, find(t, objs, c.kind, c.name).Object, "rules")
			want := field(t, yamlFile(t, x.path(c.file)), "rules")
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s rules differ from %s:\n got %v\nwant %v", c.kind, c.name, c.file, got, want)
			}
		}
		for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
			for _, b := range ofKind(objs, kind) {
				subject := field(t, b.Object, "subjects", 0).(map[string]any)
				if subject["name"] != "netfleet-operator" || subject["namespace"] != releaseNS {
					t.Errorf("%s %s binds %v, want the operator's ServiceAccount", kind, b.GetName(), subject)
				}
			}
		}
		find(t, objs, "ServiceAccount", "netfleet-operator")
	})

	deploy := find(t, objs, "Deployment", "netfleet-operator")
	podLabels := stringMap(field(t, deploy.Object, "spec", "template", "metadata", "labels"))
	t.Run("operator Deployment", func(t *testing.T) {
		if got := field(t, deploy.Object, "spec", "replicas"); got != float64(2) {
			t.Errorf("replicas %v, want 2", got)
		}
		c := field(t, deploy.Object, "spec", "template", "spec", "containers", 0).(map[string]any)
		if c["image"] != "ghcr.io/netfleet/operator:0.1.0" {
			t.Errorf("image %v", c["image"])
		}
		args := strings.Join(anyStrings(c["args"]), " ")
		for _, want := range []string{"--leader-elect=true", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081",
			"--allocator-bind-address=:8090", "--allocator-token-secret=$(POD_NAMESPACE)/netfleet-allocator-token", "--port-range=7000-8000"} {
			if !strings.Contains(args, want) {
				t.Errorf("args %q lack %s", args, want)
			}
		}
		if sa := field(t, deploy.Object, "spec", "template", "spec", "serviceAccountName"); sa != "netfleet-operator" {
			t.Errorf("serviceAccountName %v", sa)
		}
		if nonRoot := field(t, deploy.Object, "spec", "template", "spec", "securityContext", "runAsNonRoot"); nonRoot != true {
			t.Errorf("runAsNonRoot %v", nonRoot)
		}
		// The image's user, set for the Pod: the kubelet then writes the ServiceAccount token 0600.
		for _, k := range []string{"runAsUser", "runAsGroup"} {
			if id := field(t, deploy.Object, "spec", "template", "spec", "securityContext", k); id != int64(65532) && id != float64(65532) {
				t.Errorf("%s %v (%T), want 65532", k, id, id)
			}
		}
	})

	t.Run("Services select the operator", func(t *testing.T) {
		for _, name := range []string{"netfleet-metrics", "netfleet-allocator"} {
			svc := find(t, objs, "Service", name)
			if sel := stringMap(field(t, svc.Object, "spec", "selector")); !subset(sel, podLabels) {
				t.Errorf("Service %s selects %v, not the operator's Pods %v", name, sel, podLabels)
			}
		}
	})

	t.Run("ServiceMonitor", func(t *testing.T) {
		sm := find(t, objs, "ServiceMonitor", "netfleet-operator")
		svc := find(t, objs, "Service", "netfleet-metrics")
		if sel := stringMap(field(t, sm.Object, "spec", "selector", "matchLabels")); !subset(sel, svc.GetLabels()) {
			t.Errorf("selects %v, not the metrics Service %v", sel, svc.GetLabels())
		}
		if other := find(t, objs, "Service", "netfleet-allocator"); subset(stringMap(field(t, sm.Object, "spec", "selector", "matchLabels")), other.GetLabels()) {
			t.Error("it also selects the allocator Service")
		}
		ep := field(t, sm.Object, "spec", "endpoints", 0).(map[string]any)
		if ep["port"] != "metrics" || ep["honorLabels"] != true {
			t.Errorf("endpoint %v, want port metrics with honorLabels (the operator's series carry namespace and fleet)", ep)
		}
	})

	t.Run("PodMonitor labels targets as the dashboards expect", func(t *testing.T) {
		pm := find(t, objs, "PodMonitor", "netfleet-gameservers")
		expr := field(t, pm.Object, "spec", "selector", "matchExpressions", 0).(map[string]any)
		if expr["key"] != "netfleet.io/gameserver" || expr["operator"] != "Exists" {
			t.Errorf("selector %v, want every Pod labeled netfleet.io/gameserver", expr)
		}
		ep := field(t, pm.Object, "spec", "podMetricsEndpoints", 0).(map[string]any)
		if ep["port"] != "admin" || ep["path"] != "/metrics" {
			t.Errorf("endpoint %v, want the admin port's /metrics", ep)
		}
		got := map[string]string{}
		for _, r := range ep["relabelings"].([]any) {
			r := r.(map[string]any)
			if r["action"] != "replace" {
				continue
			}
			got[r["targetLabel"].(string)] = strings.Join(anyStrings(r["sourceLabels"]), ";")
		}
		want := map[string]string{
			"namespace":  "__meta_kubernetes_namespace",
			"pod":        "__meta_kubernetes_pod_name",
			"gameserver": "__meta_kubernetes_pod_label_netfleet_io_gameserver",
			"fleet":      "__meta_kubernetes_pod_label_netfleet_io_fleet",
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("relabelings set %v, want %v", got, want)
		}
	})

	t.Run("dashboards", func(t *testing.T) {
		files, err := filepath.Glob(x.path(chart + "/dashboards/*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("dashboards: %v %v", files, err)
		}
		cms := map[string]*unstructured.Unstructured{}
		for _, cm := range ofKind(objs, "ConfigMap") {
			if cm.GetLabels()["grafana_dashboard"] == "1" {
				for key := range stringMap(cm.Object["data"]) {
					cms[key] = cm
				}
			}
		}
		if len(cms) != len(files) {
			t.Errorf("%d dashboard ConfigMaps, want one per file: %d", len(cms), len(files))
		}
		for _, f := range files {
			cm, ok := cms[filepath.Base(f)]
			if !ok {
				t.Errorf("no ConfigMap for %s", filepath.Base(f))
				continue
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want, got any
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if err := json.Unmarshal([]byte(stringMap(cm.Object["data"])[filepath.Base(f)]), &got); err != nil {
				t.Fatalf("ConfigMap %s: %v", cm.GetName(), err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ConfigMap %s does not hold %s", cm.GetName(), filepath.Base(f))
			}
		}
	})

	t.Run("NetworkPolicy keeps the admin port to the operator", func(t *testing.T) {
		np := find(t, objs, "NetworkPolicy", "netfleet-gameservers")
		if np.GetNamespace() != "default" {
			t.Errorf("namespace %q, want default", np.GetNamespace())
		}
		expr := field(t, np.Object, "spec", "podSelector", "matchExpressions", 0).(map[string]any)
		if expr["key"] != "netfleet.io/gameserver" || expr["operator"] != "Exists" {
			t.Errorf("podSelector %v", expr)
		}
		rules := field(t, np.Object, "spec", "ingress").([]any)
		var adminRules int
		for _, r := range rules {
			r := r.(map[string]any)
			for _, p := range r["ports"].([]any) {
				p := p.(map[string]any)
				if p["port"] != float64(8080) {
					continue
				}
				adminRules++
				from := r["from"].([]any)
				op := from[0].(map[string]any)
				if ns := stringMap(field(t, op, "namespaceSelector", "matchLabels")); ns["kubernetes.io/metadata.name"] != releaseNS {
					t.Errorf("admin port admitted from namespaces %v", ns)
				}
				if sel := stringMap(field(t, op, "podSelector", "matchLabels")); !subset(sel, podLabels) || len(sel) == 0 {
					t.Errorf("admin port admitted from Pods %v, not the operator's %v", sel, podLabels)
				}
				if len(from) != 2 {
					t.Errorf("admin port admitted from %d peers, want the operator and Prometheus", len(from))
				}
			}
		}
		if adminRules != 1 {
			t.Errorf("%d rules name the admin port, want 1", adminRules)
		}
		find(t, objs, "NetworkPolicy", "netfleet-operator")
	})
}

// TestChartInstall installs the chart with helm on a real API server (which runs no controllers:
// nothing starts, so the install does not wait), then checks that every object is there, and
// that the rendered chart is also accepted as it is by `kubectl apply --dry-run=server`.
func TestChartInstall(t *testing.T) {
	x := newTools(t)
	c := x.startCluster(t)
	// The Prometheus Operator's monitor CRDs, as a cluster with Prometheus Operator has them.
	x.run(t, nil, x.kubectl, "apply", "--server-side", "-f", x.path("test/install/testdata"))
	x.run(t, nil, x.kubectl, "wait", "--for=condition=Established", "--timeout=30s",
		"crd/podmonitors.monitoring.coreos.com", "crd/servicemonitors.monitoring.coreos.com")

	x.run(t, nil, x.helm, append([]string{"install", "netfleet", chart, "-n", releaseNS, "--create-namespace", "--wait=false"}, withMonitors...)...)
	status := x.run(t, nil, x.helm, "status", "netfleet", "-n", releaseNS, "-o", "json")
	var st struct {
		Info struct{ Status string } `json:"info"`
	}
	if err := json.Unmarshal(status, &st); err != nil || st.Info.Status != "deployed" {
		t.Fatalf("helm status: %q %v", st.Info.Status, err)
	}

	ctx := context.Background()
	for _, o := range []struct {
		gvk       schema.GroupVersionKind
		namespace string
		names     []string
	}{
		{crdGVK, "", []string{"gameservers.netfleet.io", "fleets.netfleet.io", "gameserverallocations.netfleet.io", "fleetautoscalers.netfleet.io"}},
		{gvk("apps", "v1", "Deployment"), releaseNS, []string{"netfleet-operator"}},
		{gvk("", "v1", "ServiceAccount"), releaseNS, []string{"netfleet-operator"}},
		{gvk("rbac.authorization.k8s.io", "v1", "ClusterRole"), "", []string{"netfleet-operator"}},
		{gvk("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"), "", []string{"netfleet-operator"}},
		{gvk("rbac.authorization.k8s.io", "v1", "Role"), releaseNS, []string{"netfleet-operator-leader-election"}},
		{gvk("rbac.authorization.k8s.io", "v1", "RoleBinding"), releaseNS, []string{"netfleet-operator-leader-election"}},
		{gvk("", "v1", "Service"), releaseNS, []string{"netfleet-metrics", "netfleet-allocator"}},
		{gvk("", "v1", "ConfigMap"), releaseNS, []string{"netfleet-dashboard-fleet-overview", "netfleet-dashboard-gameserver", "netfleet-dashboard-operator"}},
		{gvk("networking.k8s.io", "v1", "NetworkPolicy"), releaseNS, []string{"netfleet-operator"}},
		{gvk("networking.k8s.io", "v1", "NetworkPolicy"), "default", []string{"netfleet-gameservers"}},
		{gvk("monitoring.coreos.com", "v1", "ServiceMonitor"), releaseNS, []string{"netfleet-operator"}},
		{gvk("monitoring.coreos.com", "v1", "PodMonitor"), releaseNS, []string{"netfleet-gameservers"}},
	} {
		for _, name := range o.names {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(o.gvk)
			if err := c.Get(ctx, types.NamespacedName{Namespace: o.namespace, Name: name}, u); err != nil {
				t.Errorf("%s %s/%s: %v", o.gvk.Kind, o.namespace, name, err)
			}
		}
	}
	for _, name := range []string{"gameservers.netfleet.io", "fleets.netfleet.io", "gameserverallocations.netfleet.io", "fleetautoscalers.netfleet.io"} {
		if !established(t, c, name) {
			t.Errorf("CRD %s is not Established", name)
		}
	}

	// The same chart as plain manifests, CRDs included, into another namespace.
	const ns = "netfleet-dry-run"
	x.run(t, nil, x.kubectl, "create", "namespace", ns)
	manifests := x.run(t, nil, x.helm, append([]string{"template", "dry-run", chart, "-n", ns, "--include-crds"}, withMonitors...)...)
	out := x.run(t, manifests, x.kubectl, "apply", "--server-side", "--dry-run=server", "-f", "-")
	applied := strings.Count(string(out), "(server dry run)")
	if want := len(decode(t, manifests)); applied != want {
		t.Errorf("kubectl applied %d objects (dry run), want %d:\n%s", applied, want, out)
	}
}

var crdGVK = gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition")

func gvk(group, version, kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}
}

func established(t *testing.T, c client.Client, name string) bool {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(crdGVK)
	if err := c.Get(context.Background(), types.NamespacedName{Name: name}, u); err != nil {
		t.Fatalf("CRD %s: %v", name, err)
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	return slices.ContainsFunc(conds, func(c any) bool {
		m, _ := c.(map[string]any)
		return m["type"] == "Established" && m["status"] == "True"
	})
}

// stringMap converts a decoded YAML object of strings.
func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := make(map[string]string, len(m))
	for k, v := range m {
		s, _ := v.(string)
		out[k] = s
	}
	return out
}

// anyStrings converts a decoded YAML list of strings.
func anyStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, e := range l {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

// subset reports whether sel is a non-empty selector that matches labels.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return len(sel) > 0
}
