package install

import (
	"strings"
	"testing"
)

// TestKustomizeBases builds every kustomize base under config/ with kubectl and applies it to a
// real API server with a server-side dry run, after installing what a user installs first: the
// CRDs (config/crd, for real) and the operator's namespace, and the Prometheus Operator's
// monitor CRDs for config/prometheus.
func TestKustomizeBases(t *testing.T) {
	x := newTools(t)
	bases := []struct {
		dir   string
		kinds []string // every kind the base must hold
	}{
		{"config/crd", []string{"CustomResourceDefinition"}},
		{"config/rbac", []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}},
		{"config/manager", []string{"Namespace", "Deployment", "Service"}},
		{"config/default", []string{"CustomResourceDefinition", "ClusterRole", "Namespace", "Deployment", "Service"}},
		{"config/samples", []string{"GameServer", "Fleet", "GameServerAllocation"}},
		{"config/prometheus", []string{"ServiceMonitor", "PodMonitor"}},
	}
	// The builds need no cluster: they run while it starts.
	type build struct {
		out []byte
		err error
	}
	builds := make([]chan build, len(bases))
	bx := *x
	for i, b := range bases {
		builds[i] = make(chan build, 1)
		go func() {
			out, err := bx.try(nil, bx.kubectl, "kustomize", bx.path(b.dir))
			builds[i] <- build{out, err}
		}()
	}
	x.startCluster(t)
	built := map[string][]byte{}
	for i, b := range bases {
		r := <-builds[i]
		if r.err != nil {
			t.Fatalf("kubectl kustomize %s: %v", b.dir, r.err)
		}
		objs := decode(t, r.out)
		for _, kind := range b.kinds {
			if len(ofKind(objs, kind)) == 0 {
				t.Errorf("%s builds no %s", b.dir, kind)
			}
		}
		built[b.dir] = r.out
	}

	// The CRDs are too large for a client-side apply's last-applied annotation: users apply them
	// server-side, as here.
	x.run(t, nil, x.kubectl, "apply", "--server-side", "-k", x.path("config/crd"))
	x.run(t, nil, x.kubectl, "apply", "--server-side", "-f", x.path("test/install/testdata"))
	x.run(t, nil, x.kubectl, "create", "namespace", "netfleet-system")
	x.run(t, nil, x.kubectl, "wait", "--for=condition=Established", "--timeout=30s", "crd", "--all")
	for _, b := range bases {
		t.Run(strings.TrimPrefix(b.dir, "config/"), func(t *testing.T) {
			out := x.run(t, nil, x.kubectl, "apply", "--server-side", "--dry-run=server", "-k", x.path(b.dir))
			applied := strings.Count(string(out), "(server dry run)")
			if want := len(decode(t, built[b.dir])); applied != want {
				t.Errorf("applied %d objects (dry run), want %d:\n%s", applied, want, out)
			}
		})
	}
}
