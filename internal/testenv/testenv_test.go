package testenv

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestSmoke starts the real kube-apiserver and etcd, writes an object, reads it back and stops.
func TestSmoke(t *testing.T) {
	env, err := Environment(false)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = env.Stop()
		}
	}()

	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ver, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	if ver.GitVersion != KubeVersion {
		t.Fatalf("API server reports %s, want %s", ver.GitVersion, KubeVersion)
	}

	want := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
		Data:       map[string]string{"netcode": "live"},
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, want, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "smoke", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Data["netcode"] != "live" || got.UID == "" {
		t.Fatalf("read back %+v", got)
	}

	if err := env.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stopped = true
	if _, err := cs.Discovery().ServerVersion(); err == nil {
		t.Fatal("API server still answering after Stop")
	}
}
