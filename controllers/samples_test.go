package controllers

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/netfleet/netfleet/internal/testenv"
)

// TestSamplesValid creates every manifest of config/samples (the kustomization aside) on the real
// API server (dry run): the samples the docs point at pass the CRDs' validation.
func TestSamplesValid(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("samples %v (%v)", files, err)
	}
	ns := newNamespace(t)
	for _, file := range files {
		if filepath.Base(file) == "kustomization.yaml" {
			continue
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
				t.Fatal(err)
			}
			obj.SetNamespace(ns)
			if err := k8s.Create(context.Background(), obj, client.DryRunAll); err != nil {
				t.Errorf("%s refused: %v", obj.GetKind(), err)
			}
		})
	}
}
