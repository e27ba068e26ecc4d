package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/netfleet/netfleet/internal/testenv"
)

// The suite's operator runs as the operator's ServiceAccount, with only the ClusterRole that
// `make manifests` generates from the +kubebuilder:rbac markers and the leader-election Role
// (config/rbac), and elects itself leader as a deployed operator does: every test of the package
// is then also a test that those rules let the operator do its job, and a verb missing from a
// marker fails the test that needs it with a Forbidden error in the operator's log.

// operatorUser is the user name of the operator's ServiceAccount.
const operatorUser = "system:serviceaccount:netfleet-system:netfleet-operator"

// operatorConfig installs config/rbac's ServiceAccount, ClusterRole, leader-election Role and
// their bindings with c, and returns restCfg impersonating the ServiceAccount.
func operatorConfig(ctx context.Context, c client.Client) (*rest.Config, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "netfleet-system"}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace %s: %w", ns.Name, err)
	}
	for _, o := range []struct {
		file string
		obj  client.Object
	}{
		{"service_account.yaml", &corev1.ServiceAccount{}},
		{"role.yaml", &rbacv1.ClusterRole{}},
		{"role_binding.yaml", &rbacv1.ClusterRoleBinding{}},
		{"leader_election_role.yaml", &rbacv1.Role{}},
		{"leader_election_role_binding.yaml", &rbacv1.RoleBinding{}},
	} {
		raw, err := os.ReadFile(filepath.Join(root, "config", "rbac", o.file))
		if err != nil {
			return nil, err
		}
		if err := yaml.UnmarshalStrict(raw, o.obj); err != nil {
			return nil, fmt.Errorf("config/rbac/%s: %w", o.file, err)
		}
		if err := c.Create(ctx, o.obj); err != nil {
			return nil, fmt.Errorf("create config/rbac/%s: %w", o.file, err)
		}
	}
	cfg := rest.CopyConfig(restCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: operatorUser}
	return cfg, nil
}

// TestLeaderElectionEvent: the operator records its election as a core Event on its Lease, which
// the leader-election Role must allow (the GameServer Events are of events.k8s.io).
func TestLeaderElectionEvent(t *testing.T) {
	waitFor(t, waitLong, "the operator's LeaderElection Event", func() (bool, error) {
		var events corev1.EventList
		if err := k8s.List(context.Background(), &events, client.InNamespace("netfleet-system")); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == "LeaderElection" && e.InvolvedObject.Kind == "Lease" && e.InvolvedObject.Name == "netfleet-operator" {
				return true, nil
			}
		}
		return false, nil
	})
}
