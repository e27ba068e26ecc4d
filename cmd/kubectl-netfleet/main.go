// Command kubectl-netfleet is the netfleet kubectl plugin. On the PATH it runs as
// `kubectl netfleet`:
//
//	kubectl netfleet peers <gameserver> [-n namespace]   one line per connected peer
//	kubectl netfleet config <gameserver> [-n namespace]  desired, applied and running config generation
//
// peers reads the game server's admin API (GET /v1/peers) through the API server's pod proxy,
// GET /api/v1/namespaces/{ns}/pods/{pod}:{adminPort}/proxy/v1/peers, so it needs nothing but
// the kubeconfig's access to pods/proxy; the read is open on the admin API, so no admin token is
// sent. The Pod is the one named after the GameServer and the port is its spec.adminPort.
// The API server refuses to proxy to loopback Pod IPs, which the local control plane
// (netfleet-dev) gives its Pods; there, --direct reaches the Pod IP straight from this machine.
//
// config prints the GameServer's desired generation (metadata.generation), the generation the
// operator recorded as applied, its ConfigApplied condition, and the generation the process
// itself reports it runs (GET /v1/netcode, the same way as peers).
//
// Flags: -n/--namespace, --kubeconfig, --context, --direct, --timeout; KUBECONFIG is honored.
// It imports api/netcode and api/v1alpha1 and client-go, never the game server or the
// controllers.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

const usage = `Usage:
  kubectl netfleet peers <gameserver> [-n namespace] [flags]
  kubectl netfleet config <gameserver> [-n namespace] [flags]

Flags:
`

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, pflag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "kubectl-netfleet:", err)
		os.Exit(1)
	}
}

// options are the parsed command line.
type options struct {
	command, gameServer string
	namespace           string
	kubeconfig, context string
	direct              bool
	timeout             time.Duration
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := pflag.NewFlagSet("kubectl-netfleet", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the GameServer; default the kubeconfig context's")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file; default $KUBECONFIG or ~/.kube/config")
	fs.StringVar(&o.context, "context", "", "kubeconfig context to use")
	fs.BoolVar(&o.direct, "direct", false, "reach the Pod IP directly instead of through the API server's pod proxy (for Pods on loopback addresses, as netfleet-dev runs them)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound of the whole command")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return o, fmt.Errorf("want a command and a GameServer name, got %d arguments", fs.NArg())
	}
	o.command, o.gameServer = fs.Arg(0), fs.Arg(1)
	if o.command != "peers" && o.command != "config" {
		fs.Usage()
		return o, fmt.Errorf("unknown command %q: want peers or config", o.command)
	}
	if o.timeout <= 0 {
		return o, fmt.Errorf("--timeout %v must be positive", o.timeout)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.context}
	overrides.Context.Namespace = o.namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	ns, _, err := cc.Namespace()
	if err != nil {
		return fmt.Errorf("namespace: %w", err)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	g := gameServerAPI{cs: cs, ns: ns, name: o.gameServer, direct: o.direct}
	gs, err := g.get(ctx)
	if err != nil {
		return err
	}
	switch o.command {
	case "peers":
		var peers netcode.PeersResponse
		if err := g.admin(ctx, gs, netcode.PathPeers, &peers); err != nil {
			return err
		}
		_, err = io.WriteString(stdout, formatPeers(peers))
		return err
	default:
		var running *netcode.ConfigStatus
		var st netcode.ConfigStatus
		if err := g.admin(ctx, gs, netcode.PathNetcode, &st); err != nil {
			fmt.Fprintln(stderr, "kubectl-netfleet: the process's running config is not known:", err)
		} else {
			running = &st
		}
		_, err = io.WriteString(stdout, formatConfig(gs, running))
		return err
	}
}

// gameServerAPI reaches one GameServer and its Pod's admin API.
type gameServerAPI struct {
	cs       kubernetes.Interface
	ns, name string
	direct   bool
}

// get reads the GameServer.
func (g gameServerAPI) get(ctx context.Context) (*v1alpha1.GameServer, error) {
	raw, err := g.cs.CoreV1().RESTClient().Get().
		AbsPath("/apis", v1alpha1.GroupVersion.Group, v1alpha1.GroupVersion.Version, "namespaces", g.ns, "gameservers", g.name).
		DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("get gameserver %s/%s: %w", g.ns, g.name, err)
	}
	gs := &v1alpha1.GameServer{}
	if err := json.Unmarshal(raw, gs); err != nil {
		return nil, fmt.Errorf("decode gameserver %s/%s: %w", g.ns, g.name, err)
	}
	return gs, nil
}

// adminPort is the GameServer's admin port, defaulted as the CRD defaults it.
func adminPort(gs *v1alpha1.GameServer) int {
	if gs.Spec.AdminPort == 0 {
		return netcode.DefaultAdminPort
	}
	return int(gs.Spec.AdminPort)
}

// admin GETs path of the Pod's admin API into v: through the API server's pod proxy, or
// straight to the Pod IP with --direct.
func (g gameServerAPI) admin(ctx context.Context, gs *v1alpha1.GameServer, path string, v any) error {
	port := strconv.Itoa(adminPort(gs))
	var raw []byte
	var err error
	if g.direct {
		raw, err = g.getDirect(ctx, port, path)
	} else {
		raw, err = g.cs.CoreV1().Pods(g.ns).ProxyGet("", gs.Name, port, path, nil).DoRaw(ctx)
		if err != nil {
			err = g.proxyError(ctx, gs.Name, port, path, raw, err)
		}
	}
	if err != nil {
		return fmt.Errorf("admin API of %s/%s: %w", g.ns, g.name, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("admin API of %s/%s: decode %s: %w", g.ns, g.name, path, err)
	}
	return nil
}

// proxyError explains a failed pod-proxy call: the answer's body (the API server's own words)
// and, for a Pod on a loopback address, which the API server never proxies to, the way around.
func (g gameServerAPI) proxyError(ctx context.Context, pod, port, path string, body []byte, err error) error {
	err = fmt.Errorf("through the pod proxy (pods/%s:%s/proxy%s): %w", pod, port, path, err)
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		err = fmt.Errorf("%w: %s", err, st.Message)
	} else if msg := strings.TrimSpace(string(body)); msg != "" && len(msg) < 512 {
		err = fmt.Errorf("%w: %s", err, msg)
	}
	p, perr := g.cs.CoreV1().Pods(g.ns).Get(ctx, pod, metav1.GetOptions{})
	if perr != nil {
		return err
	}
	if ip, perr := netip.ParseAddr(p.Status.PodIP); perr == nil && ip.IsLoopback() {
		return fmt.Errorf("%w (the Pod IP %s is a loopback address, which the API server does not proxy to; on the Pod's host, run with --direct)", err, ip)
	}
	return err
}

// getDirect GETs path from the Pod IP.
func (g gameServerAPI) getDirect(ctx context.Context, port, path string) ([]byte, error) {
	pod, err := g.cs.CoreV1().Pods(g.ns).Get(ctx, g.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get pod: %w", err)
	}
	if pod.Status.PodIP == "" {
		return nil, fmt.Errorf("pod %s has no IP yet", pod.Name)
	}
	url := "http://" + net.JoinHostPort(pod.Status.PodIP, port) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(raw)))
	}
	return raw, nil
}

// formatPeers renders one line per peer, by slot, e.g.
//
//	peer=3 rate=30 Hz loss=4.8% enet-loss=0.0% rtt=92 ms (base 12) throttle=0.49 congested=loss+delay class=1 sent=183920 B ceiling=none state=degraded
//
// base is the RTT baseline the congestion controller measures delay against; congested what its
// last evaluation found (loss, delay, backlog), or no; ceiling the bottleneck ceiling it holds
// on the peer's byte rate, in kB/s (1000 bytes), or none.
func formatPeers(r netcode.PeersResponse) string {
	if len(r.Peers) == 0 {
		return fmt.Sprintf("no peers connected (tick %d)\n", r.Tick)
	}
	peers := append([]netcode.PeerInfo(nil), r.Peers...)
	sort.Slice(peers, func(i, j int) bool { return peers[i].Slot < peers[j].Slot })
	var b strings.Builder
	for _, p := range peers {
		ceiling := "none"
		if p.CeilingBytesPerSec > 0 {
			ceiling = fmt.Sprintf("%.1f kB/s", p.CeilingBytesPerSec/1000)
		}
		congested := p.CongestedBy
		if congested == "" {
			congested = "no"
		}
		fmt.Fprintf(&b, "peer=%d rate=%.0f Hz loss=%.1f%% enet-loss=%.1f%% rtt=%.0f ms (base %.0f) throttle=%.2f congested=%s class=%d sent=%d B ceiling=%s state=%s\n",
			p.Slot, p.SendRateHz, 100*p.LossRatio, 100*p.EnetLossRatio, p.RTTMillis, p.BaselineRTTMillis, p.Throttle, congested,
			p.RateClass, p.BytesSent, ceiling, p.State)
	}
	return b.String()
}

// formatConfig renders the GameServer's desired and applied generations, its ConfigApplied
// condition and, when known, what the process runs, e.g.
//
//	gameserver=games/arena-1 desired=5 applied=5 running=5 hash=1f0c... configApplied=True reason=Applied state=Ready
func formatConfig(gs *v1alpha1.GameServer, running *netcode.ConfigStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "gameserver=%s/%s desired=%d applied=%d", gs.Namespace, gs.Name, gs.Generation, gs.Status.Netcode.AppliedGeneration)
	if running != nil {
		fmt.Fprintf(&b, " running=%d", running.Generation)
	} else {
		b.WriteString(" running=unknown")
	}
	hash := gs.Status.Netcode.AppliedHash
	if running != nil {
		hash = running.Hash
	}
	if hash == "" {
		hash = "none"
	}
	fmt.Fprintf(&b, " hash=%s", hash)
	if c := meta.FindStatusCondition(gs.Status.Conditions, v1alpha1.ConditionConfigApplied); c != nil {
		fmt.Fprintf(&b, " configApplied=%s reason=%s", c.Status, c.Reason)
	} else {
		b.WriteString(" configApplied=Unknown")
	}
	state := string(gs.Status.State)
	if state == "" {
		state = "Unknown"
	}
	fmt.Fprintf(&b, " state=%s\n", state)
	return b.String()
}
