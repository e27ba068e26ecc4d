package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/gameserver/admin"
	"github.com/netfleet/netfleet/gameserver/broadcast"
	"github.com/netfleet/netfleet/gameserver/demo"
	"github.com/netfleet/netfleet/internal/botswarm"
	"github.com/netfleet/netfleet/internal/testenv"
)

func TestFormatPeers(t *testing.T) {
	tests := []struct {
		name string
		in   netcode.PeersResponse
		want string
	}{
		{name: "none", in: netcode.PeersResponse{Tick: 42}, want: "no peers connected (tick 42)\n"},
		{
			name: "by slot",
			in: netcode.PeersResponse{Tick: 9, Peers: []netcode.PeerInfo{
				{Slot: 7, SendRateHz: 60, RTTMillis: 12.4, BaselineRTTMillis: 11, Throttle: 1, BytesSent: 9000, RateClass: 1, State: "healthy"},
				{Slot: 3, SendRateHz: 29.6, LossRatio: 0.048, EnetLossRatio: 0.01, RTTMillis: 92, BaselineRTTMillis: 12, Throttle: 0.4921,
					CongestedBy: "loss+delay", BytesSent: 183920, RateClass: 2, CeilingBytesPerSec: 14260, State: "degraded"},
			}},
			want: "peer=3 rate=30 Hz loss=4.8% enet-loss=1.0% rtt=92 ms (base 12) throttle=0.49 congested=loss+delay class=2 sent=183920 B ceiling=14.3 kB/s state=degraded\n" +
				"peer=7 rate=60 Hz loss=0.0% enet-loss=0.0% rtt=12 ms (base 11) throttle=1.00 congested=no class=1 sent=9000 B ceiling=none state=healthy\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatPeers(tt.in); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestFormatConfig(t *testing.T) {
	gs := func(gen, applied int64, cond *metav1.Condition) *v1alpha1.GameServer {
		g := &v1alpha1.GameServer{ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: "arena-1", Generation: gen}}
		g.Status.Netcode.AppliedGeneration = applied
		g.Status.Netcode.AppliedHash = "aaaa"
		g.Status.State = v1alpha1.GameServerStateReady
		if cond != nil {
			g.Status.Conditions = []metav1.Condition{*cond}
		}
		return g
	}
	applied := &metav1.Condition{Type: v1alpha1.ConditionConfigApplied, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApplied}
	pending := &metav1.Condition{Type: v1alpha1.ConditionConfigApplied, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonPending}
	tests := []struct {
		name    string
		gs      *v1alpha1.GameServer
		running *netcode.ConfigStatus
		want    string
	}{
		{
			name: "applied", gs: gs(5, 5, applied), running: &netcode.ConfigStatus{Generation: 5, Hash: "bbbb"},
			want: "gameserver=games/arena-1 desired=5 applied=5 running=5 hash=bbbb configApplied=True reason=Applied state=Ready\n",
		},
		{
			name: "pending, process unreachable", gs: gs(6, 5, pending),
			want: "gameserver=games/arena-1 desired=6 applied=5 running=unknown hash=aaaa configApplied=False reason=Pending state=Ready\n",
		},
		{
			name: "no condition yet", gs: gs(1, 0, nil), running: &netcode.ConfigStatus{Hash: "cccc"},
			want: "gameserver=games/arena-1 desired=1 applied=0 running=0 hash=cccc configApplied=Unknown state=Ready\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatConfig(tt.gs, tt.running); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    options
		wantErr string
	}{
		{name: "peers with namespace after the name", args: []string{"peers", "arena-1", "-n", "games"},
			want: options{command: "peers", gameServer: "arena-1", namespace: "games", timeout: 10 * time.Second}},
		{name: "config with flags first", args: []string{"--kubeconfig", "/k", "--context", "dev", "--direct", "config", "gs"},
			want: options{command: "config", gameServer: "gs", kubeconfig: "/k", context: "dev", direct: true, timeout: 10 * time.Second}},
		{name: "no name", args: []string{"peers"}, wantErr: "want a command and a GameServer name"},
		{name: "unknown command", args: []string{"logs", "gs"}, wantErr: `unknown command "logs"`},
		{name: "bad timeout", args: []string{"peers", "gs", "--timeout", "0s"}, wantErr: "--timeout"},
		{name: "unknown flag", args: []string{"peers", "gs", "--bogus"}, wantErr: "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(tt.args, &bytes.Buffer{})
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %v, want one containing %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case got != tt.want:
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if _, err := parse([]string{"--help"}, &bytes.Buffer{}); !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("--help: %v, want pflag.ErrHelp", err)
	}
}

// TestRequestPaths: the plugin reads the GameServer and then its Pod's admin API through the
// pod proxy, at exactly the paths the API server serves, against a stand-in API server.
func TestRequestPaths(t *testing.T) {
	var paths []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.Method+" "+r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/netfleet.io/v1alpha1/namespaces/games/gameservers/arena-1":
			_ = json.NewEncoder(w).Encode(v1alpha1.GameServer{
				ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: "arena-1", Generation: 2},
				Spec:       v1alpha1.GameServerSpec{AdminPort: 9090},
			})
		case "/api/v1/namespaces/games/pods/arena-1:9090/proxy/v1/peers":
			_ = json.NewEncoder(w).Encode(netcode.PeersResponse{Tick: 1, Peers: []netcode.PeerInfo{{Slot: 1, SendRateHz: 60, Throttle: 1, RateClass: 1, State: "healthy"}}})
		case "/api/v1/namespaces/games/pods/arena-1:9090/proxy/v1/netcode":
			_ = json.NewEncoder(w).Encode(netcode.ConfigStatus{Generation: 2, Hash: "h"})
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	kubeconfig := writeKubeconfig(t, &clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: api.URL}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {}},
		Contexts:       map[string]*clientcmdapi.Context{"ctx": {Cluster: "c", AuthInfo: "u", Namespace: "games"}},
		CurrentContext: "ctx",
	})
	tests := []struct {
		command, want string
		paths         []string
	}{
		{command: "peers", want: "peer=1 rate=60 Hz", paths: []string{
			"GET /apis/netfleet.io/v1alpha1/namespaces/games/gameservers/arena-1",
			"GET /api/v1/namespaces/games/pods/arena-1:9090/proxy/v1/peers",
		}},
		{command: "config", want: "desired=2 applied=0 running=2", paths: []string{
			"GET /apis/netfleet.io/v1alpha1/namespaces/games/gameservers/arena-1",
			"GET /api/v1/namespaces/games/pods/arena-1:9090/proxy/v1/netcode",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			paths = nil
			var out, errOut bytes.Buffer
			if err := run(context.Background(), []string{tt.command, "arena-1", "--kubeconfig", kubeconfig}, &out, &errOut); err != nil {
				t.Fatalf("%v\n%s", err, errOut.String())
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output %q lacks %q", out.String(), tt.want)
			}
			if strings.Join(paths, "\n") != strings.Join(tt.paths, "\n") {
				t.Errorf("requests\n%s\nwant\n%s", strings.Join(paths, "\n"), strings.Join(tt.paths, "\n"))
			}
		})
	}
}

// TestThroughRealPodProxy runs the plugin against a real API server whose pod proxy reaches a
// real game server (tick loop with ENet bots connected, admin API) listening on this host's
// non-loopback address, which the API server process reaches. The API server refuses to proxy to
// a loopback Pod IP; there --direct reaches the admin API from this machine instead.
func TestThroughRealPodProxy(t *testing.T) {
	hostIP := hostAddress(t)
	env, cfg := testenv.Start(t, true)
	user, err := env.AddUser(envtest.User{Name: "plugin-user", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	// A real game server with two bots, its admin API on the host address and on loopback.
	handler, game := startGameServer(t)
	proxied := serve(t, net.JoinHostPort(hostIP.String(), "0"), handler)
	loopback := serve(t, "127.0.0.1:0", handler)
	startBots(t, game, 2)

	ctx := context.Background()
	ns := "plugin"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	createServer(t, k8s, ns, "arena-1", proxied)
	createServer(t, k8s, ns, "local-1", loopback)

	plugin := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, append(args, "-n", ns, "--kubeconfig", kubeconfig), &out, &errOut)
		return out.String() + errOut.String(), err
	}
	// The bots' sessions show once they are connected and a second has been measured.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := plugin("peers", "arena-1")
		if err == nil && strings.Count(out, "peer=") == 2 && !strings.Contains(out, "rate=0 Hz") {
			t.Logf("kubectl netfleet peers arena-1 (through the pod proxy):\n%s", out)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("peers through the pod proxy: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}

	out, err := plugin("config", "arena-1")
	if err != nil || !strings.Contains(out, "gameserver=plugin/arena-1 desired=1 applied=1 running=0") ||
		!strings.Contains(out, "configApplied=True reason=Applied state=Ready") {
		t.Errorf("config through the pod proxy: %v\n%s", err, out)
	}
	t.Logf("kubectl netfleet config arena-1:\n%s", out)

	if out, err := plugin("peers", "local-1"); err == nil || !strings.Contains(err.Error(), "--direct") {
		t.Errorf("peers of a loopback Pod through the pod proxy: %v\n%s, want the API server's refusal", err, out)
	} else {
		t.Logf("the API server refuses to proxy to a loopback Pod IP: %v", err)
	}
	if out, err := plugin("peers", "local-1", "--direct"); err != nil || strings.Count(out, "peer=") != 2 {
		t.Errorf("peers --direct of a loopback Pod: %v\n%s", err, out)
	}
}

// hostAddress is a non-loopback IPv4 address of this host: the API server refuses to proxy to
// loopback and link-local Pod IPs.
func hostAddress(t *testing.T) netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		if ip := p.Addr(); ip.Is4() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
			return ip
		}
	}
	t.Skip("no non-loopback IPv4 address on this host for the API server's pod proxy to reach; TestRequestPaths covers the request path")
	return netip.Addr{}
}

// startGameServer runs a tick loop on loopback and returns its admin API handler and game
// address.
func startGameServer(t *testing.T) (http.Handler, netip.AddrPort) {
	t.Helper()
	g, err := demo.NewGame(demo.GameConfig{World: demo.Config{Seed: 1, Population: 50, HalfExtent: 200}, Players: 8})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broadcast.New(broadcast.Options{
		Address:  netip.MustParseAddrPort("127.0.0.1:0"),
		MaxPeers: 8,
		Game:     g,
		Store:    g.Store(),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := admin.New(b, admin.Options{Token: "secret", ReadyWithoutPush: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Run() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := b.Stop(ctx); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return srv.Handler(), b.Address()
}

// serve serves h on addr and returns the bound address.
func serve(t *testing.T, addr string, h http.Handler) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return netip.MustParseAddrPort(ln.Addr().String())
}

func startBots(t *testing.T, addr netip.AddrPort, n int) {
	t.Helper()
	s, err := botswarm.New(botswarm.Config{
		Server: addr, Classes: []botswarm.Class{{Name: "bots", Count: n}}, Duration: 2 * time.Minute, Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		s.Wait()
	})
}

// createServer creates a GameServer whose admin port is admin's, and its Pod, running at
// admin's address, with the status a reconciler and a kubelet would have written.
func createServer(t *testing.T, k8s client.Client, ns, name string, admin netip.AddrPort) {
	t.Helper()
	ctx := context.Background()
	gs := &v1alpha1.GameServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.GameServerSpec{
			Ports:     []v1alpha1.GameServerPort{{Name: "game", ContainerPort: netcode.DefaultGamePort, PortPolicy: v1alpha1.PortPolicyNone}},
			AdminPort: int32(admin.Port()),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "server", Image: "netfleet/gameserver:test"}},
			}},
		},
	}
	if err := k8s.Create(ctx, gs); err != nil {
		t.Fatal(err)
	}
	gs.Status.State = v1alpha1.GameServerStateReady
	gs.Status.Netcode.AppliedGeneration = gs.Generation
	gs.Status.Conditions = []metav1.Condition{{
		Type: v1alpha1.ConditionConfigApplied, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApplied,
		Message: "applied", LastTransitionTime: metav1.Now(), ObservedGeneration: gs.Generation,
	}}
	if err := k8s.Status().Update(ctx, gs); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1alpha1.LabelGameServer: name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "server", Image: "netfleet/gameserver:test",
			Ports: []corev1.ContainerPort{{Name: "admin", ContainerPort: int32(admin.Port())}},
		}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = admin.Addr().String()
	pod.Status.PodIPs = []corev1.PodIP{{IP: admin.Addr().String()}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

func writeKubeconfig(t *testing.T, cfg *clientcmdapi.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
