package install

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/netfleet/netfleet/internal/testenv"
)

func init() {
	// envtest logs through controller-runtime's logger; the tests read their tools' output.
	ctrllog.SetLogger(logr.Discard())
}

// commandTimeout bounds one helm or kubectl run; the tests stay well under a minute each.
const commandTimeout = 45 * time.Second

// tools runs the repository's helm and kubectl, with helm's state in the test's own directories
// and, once a cluster is up, its kubeconfig.
type tools struct {
	root, helm, kubectl string
	env                 []string
}

func newTools(t *testing.T) *tools {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	x := &tools{root: root, helm: filepath.Join(root, "bin", "helm"), kubectl: filepath.Join(assets, "kubectl")}
	if _, err := os.Stat(x.helm); err != nil {
		t.Fatalf("helm missing (run `make tools`): %v", err)
	}
	dir := t.TempDir()
	x.env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(dir, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(dir, "config"),
		"HELM_DATA_HOME="+filepath.Join(dir, "data"),
		"KUBECONFIG="+filepath.Join(dir, "no-cluster"),
	)
	return x
}

// path returns a path inside the repository.
func (x *tools) path(p string) string { return filepath.Join(x.root, filepath.FromSlash(p)) }

// startCluster starts a real API server (no CRDs, no controllers), points helm and kubectl at it
// with an admin kubeconfig, and returns a client.
func (x *tools) startCluster(t *testing.T) client.Client {
	t.Helper()
	began := time.Now()
	env, cfg := testenv.Start(t, false)
	t.Logf("API server up in %s", time.Since(began).Round(10*time.Millisecond))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	// A new slice: copies of x made earlier keep reading the old one. (The last KUBECONFIG wins.)
	x.env = append(slices.Clone(x.env), "KUBECONFIG="+kubeconfig)
	return newClient(t, cfg)
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// run runs a tool with stdin and returns its stdout, failing the test with its stderr.
func (x *tools) run(t *testing.T, stdin []byte, bin string, args ...string) []byte {
	t.Helper()
	began := time.Now()
	out, err := x.try(stdin, bin, args...)
	t.Logf("%s %s: %s", filepath.Base(bin), args[0], time.Since(began).Round(10*time.Millisecond))
	if err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(bin), strings.Join(args, " "), err)
	}
	return out
}

// try runs a tool and returns its stdout, or an error holding its stderr.
func (x *tools) try(stdin []byte, bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = x.root
	cmd.Env = x.env
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), errors.Join(err, errors.New(strings.TrimSpace(stderr.String())))
	}
	return stdout.Bytes(), nil
}

// decode splits a multi-document YAML stream into objects, skipping empty documents.
func decode(t *testing.T, stream []byte) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("read YAML: %v", err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("decode YAML document: %v\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// find returns the object of kind and name, failing the test when there is none.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among %d objects", kind, name, len(objs))
	return nil
}

// ofKind returns the objects of kind.
func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// field returns the value at the path of o (a path element that is an int indexes a list),
// failing the test when it is missing.
func field(t *testing.T, o map[string]any, path ...any) any {
	t.Helper()
	var cur any = o
	for i, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("%v: element %d is not an object", path, i)
			}
			if cur, ok = m[k]; !ok {
				t.Fatalf("%v: no %q", path, k)
			}
		case int:
			l, ok := cur.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("%v: element %d is not a list with %d items", path, i, k+1)
			}
			cur = l[k]
		}
	}
	return cur
}

// yamlFile decodes one YAML document from a file.
func yamlFile(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, raw)
	if len(objs) != 1 {
		t.Fatalf("%s: %d documents, want 1", path, len(objs))
	}
	return objs[0].Object
}
