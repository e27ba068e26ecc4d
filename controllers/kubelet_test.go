package controllers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/connecttoken"
	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/admin"
	"github.com/netfleet/netfleet/gameserver/lifecycle"
)

// memRuntime is a tick loop in memory: ticks are counted from its start at its tick rate, and
// Apply installs a config at the next tick boundary, as the real loop does. It refuses a tick
// rate of refusedTickRateHz, standing in for a runtime invariant the CRD cannot see.
type memRuntime struct {
	start time.Time

	mu      sync.Mutex
	cfg     netcode.NetcodeConfig
	applied []netcode.NetcodeConfig
	keyIDs  []uint32
	server  netip.AddrPort
}

// refusedTickRateHz is a valid tick rate that memRuntime refuses.
const refusedTickRateHz = 13

func newMemRuntime() *memRuntime {
	return &memRuntime{start: time.Now(), cfg: netcode.NetcodeConfig{}.Default()}
}

func (m *memRuntime) period() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return time.Second / time.Duration(m.cfg.TickRateHz)
}

func (m *memRuntime) Apply(ctx context.Context, r netcode.Resolved) error {
	cfg := r.Config()
	if cfg.TickRateHz == refusedTickRateHz {
		return &netcode.ValidationError{Fields: []netcode.FieldError{{Field: "tickRateHz", Detail: "13 Hz is not supported by this runtime"}}}
	}
	p := m.period()
	wait := p - time.Since(m.start)%p
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cfg = cfg
	m.applied = append(m.applied, cfg)
	return nil
}

func (m *memRuntime) Peers(dst []netcode.PeerInfo) []netcode.PeerInfo { return dst }

// SetConnectKeys and ConnectKeys hold connect-token keys as the real loop does
// (admin.ConnectKeyRuntime).
func (m *memRuntime) SetConnectKeys(_ context.Context, keys []connecttoken.Key, server netip.AddrPort) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keyIDs = m.keyIDs[:0]
	for _, k := range keys {
		m.keyIDs = append(m.keyIDs, k.ID)
	}
	m.server = server
	return nil
}

func (m *memRuntime) ConnectKeys(context.Context) ([]uint32, netip.AddrPort, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.keyIDs), m.server, nil
}

func (m *memRuntime) Tick() uint64 { return uint64(time.Since(m.start)/m.period()) + 1 }

func (m *memRuntime) current() (netcode.NetcodeConfig, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg, len(m.applied)
}

// annotationFailStart on a Pod template makes the fake kubelet fail the Pod at start.
const annotationFailStart = "test.netfleet.io/fail-start"

// proc is one game-server process the fake kubelet runs for a Pod.
type proc struct {
	rt     *memRuntime
	lc     *lifecycle.Lifecycle
	srv    *admin.Server
	cancel context.CancelFunc
	done   chan struct{}
}

// podRun is the fake kubelet's record of one Pod.
type podRun struct {
	key   types.NamespacedName
	ip    string
	port  int
	token string

	mu       sync.Mutex
	proc     *proc
	restarts int32
	// probe wakes the Pod's worker to probe readiness again.
	probe chan struct{}
}

// endpoint is the Pod's IP and admin port.
func (p *podRun) endpoint() (string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ip, p.port
}

func (p *podRun) current() *proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proc
}

// kubelet plays the node agent for the tests: it binds each game-server Pod to its node, runs its
// process — a real admin.Server on a memRuntime, listening on the Pod's own loopback address —
// reports the Pod Running with that IP, probes /readyz and reports readiness, as a kubelet would.
type kubelet struct {
	c    client.Client
	node string

	mu     sync.Mutex
	pods   map[types.NamespacedName]*podRun
	nextIP int
	// subnet is the second octet of the Pods' addresses, picked at random so that test binaries
	// running at the same time on one machine do not take each other's addresses.
	subnet int
	errs   []error
}

func newKubelet(c client.Client, node string) *kubelet {
	return &kubelet{c: c, node: node, pods: map[types.NamespacedName]*podRun{}, nextIP: 1, subnet: 64 + rand.IntN(128)}
}

// start watches game-server Pods through informer and runs each new one.
func (k *kubelet) start(ctx context.Context, informers cache.Cache) error {
	inf, err := informers.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		key := client.ObjectKeyFromObject(pod)
		k.mu.Lock()
		if _, seen := k.pods[key]; seen {
			k.mu.Unlock()
			return
		}
		n := k.nextIP
		k.nextIP++
		run := &podRun{key: key, ip: k.address(n), probe: make(chan struct{}, 1)}
		k.pods[key] = run
		k.mu.Unlock()
		go k.runPod(ctx, run, pod.DeepCopy())
	}})
	if err != nil {
		return fmt.Errorf("pod handler: %w", err)
	}
	return nil
}

func (k *kubelet) fail(err error) {
	k.mu.Lock()
	k.errs = append(k.errs, err)
	k.mu.Unlock()
}

// errors returns what went wrong in the kubelet's workers.
func (k *kubelet) errors() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return errors.Join(k.errs...)
}

func (k *kubelet) pod(key types.NamespacedName) *podRun {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pods[key]
}

func (k *kubelet) runPod(ctx context.Context, run *podRun, pod *corev1.Pod) {
	if err := k.bind(ctx, pod); err != nil {
		k.fail(err)
		return
	}
	if pod.Annotations[annotationFailStart] == "true" {
		// The container exits at once: the Pod fails before it was ever ready.
		if err := k.report(ctx, run, corev1.PodFailed, false); err != nil {
			k.fail(err)
		}
		return
	}
	c := pod.Spec.Containers[0]
	for _, e := range c.Env {
		switch {
		case e.Name == netcode.EnvAdminPort:
			port, _ := strconv.Atoi(e.Value)
			run.mu.Lock()
			run.port = port
			run.mu.Unlock()
		case e.Name == netcode.EnvAdminToken && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			// Resolve the reference as the kubelet does when it starts the container.
			var sec corev1.Secret
			ref := e.ValueFrom.SecretKeyRef
			if err := k.c.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, &sec); err != nil {
				k.fail(fmt.Errorf("pod %s: token secret: %w", run.key, err))
				return
			}
			run.token = string(sec.Data[ref.Key])
		}
	}
	if _, port := run.endpoint(); port == 0 || run.token == "" {
		k.fail(fmt.Errorf("pod %s: no admin port or token in the environment", run.key))
		return
	}
	ln, err := k.claimAddress(run)
	if err != nil {
		k.fail(err)
		return
	}
	if err := k.startProc(ctx, run, ln); err != nil {
		k.fail(err)
		return
	}
	if err := k.report(ctx, run, corev1.PodRunning, false); err != nil {
		k.fail(err)
		return
	}
	k.probeLoop(ctx, run)
}

// claimAddress binds the Pod's admin port on its address. Should another test binary hold that
// address, it has most likely picked the same subnet: the kubelet moves to another random subnet
// and the Pod gets an address there. The Pod IP is reported only after this.
func (k *kubelet) claimAddress(run *podRun) (net.Listener, error) {
	for try := 0; ; try++ {
		ip, port := run.endpoint()
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err == nil {
			return ln, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) || try == 20 {
			return nil, fmt.Errorf("pod %s: listen: %w", run.key, err)
		}
		k.mu.Lock()
		// Unless another Pod has moved the kubelet already.
		if strings.HasPrefix(ip, fmt.Sprintf("127.%d.", k.subnet)) {
			k.subnet = 16 + rand.IntN(224)
		}
		n := k.nextIP
		k.nextIP++
		next := k.address(n)
		k.mu.Unlock()
		run.mu.Lock()
		run.ip = next
		run.mu.Unlock()
	}
}

// address is the n-th Pod address, in 127.<subnet>.0.0/16, clear of 127.0.0.1. k.mu must be
// held.
func (k *kubelet) address(n int) string {
	return fmt.Sprintf("127.%d.%d.%d", k.subnet, n/250, n%250+1)
}

func (k *kubelet) bind(ctx context.Context, pod *corev1.Pod) error {
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		Target:     corev1.ObjectReference{Kind: "Node", Name: k.node},
	}
	if err := k.c.SubResource("binding").Create(ctx, pod, b); err != nil {
		return fmt.Errorf("bind pod %s: %w", pod.Name, err)
	}
	return nil
}

// startProc starts a new process (a new admin.Server, so a new instance id) for the Pod, serving
// on ln, or on the Pod's address when ln is nil (a restart).
func (k *kubelet) startProc(ctx context.Context, run *podRun, ln net.Listener) error {
	rt := newMemRuntime()
	lc := lifecycle.New()
	srv, err := admin.New(rt, admin.Options{Token: run.token, Lifecycle: lc})
	if err != nil {
		return fmt.Errorf("pod %s: %w", run.key, err)
	}
	ip, port := run.endpoint()
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	// The previous process's socket may linger a moment after it stopped.
	for try := 0; ln == nil; try++ {
		ln, err = net.Listen("tcp", addr)
		if err != nil && try == 50 {
			return fmt.Errorf("pod %s: listen %s: %w", run.key, addr, err)
		}
		if err != nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
	pctx, cancel := context.WithCancel(ctx)
	p := &proc{rt: rt, lc: lc, srv: srv, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		if err := srv.Serve(pctx, ln); err != nil {
			k.fail(err)
		}
	}()
	run.mu.Lock()
	run.proc = p
	run.mu.Unlock()
	return nil
}

// report writes the Pod's status as the kubelet would.
func (k *kubelet) report(ctx context.Context, run *podRun, phase corev1.PodPhase, ready bool) error {
	readyStatus := corev1.ConditionFalse
	if ready {
		readyStatus = corev1.ConditionTrue
	}
	now := metav1.Now()
	for try := 0; ; try++ {
		var pod corev1.Pod
		if err := k.c.Get(ctx, run.key, &pod); err != nil {
			return fmt.Errorf("get pod %s: %w", run.key, err)
		}
		base := pod.DeepCopy()
		pod.Status.Phase = phase
		ip, _ := run.endpoint()
		pod.Status.PodIP, pod.Status.HostIP = ip, "127.0.0.1"
		pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		pod.Status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
		if pod.Status.StartTime == nil {
			pod.Status.StartTime = &now
		}
		pod.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: readyStatus, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: readyStatus, LastTransitionTime: now},
		}
		c := pod.Spec.Containers[0]
		run.mu.Lock()
		restarts := run.restarts
		run.mu.Unlock()
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: ready, RestartCount: restarts}
		switch phase {
		case corev1.PodRunning:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
		default:
			code := int32(0)
			if phase == corev1.PodFailed {
				code = 1
			}
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: code, StartedAt: now, FinishedAt: now}
		}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		err := k.c.Status().Patch(ctx, &pod, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || try == 10 {
			return fmt.Errorf("report pod %s: %w", run.key, err)
		}
	}
}

// probeLoop probes /readyz of a not-ready Pod and reports it ready once it answers 200, then
// waits until a restart asks for probing again.
func (k *kubelet) probeLoop(ctx context.Context, run *podRun) {
	hc := &http.Client{Timeout: time.Second}
	ip, port := run.endpoint()
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(port)) + netcode.PathReadyz
	for {
		// Probe soon after start, then less often, as many Pods may wait for their first push.
		for ready, wait := false, 50*time.Millisecond; !ready; wait = min(wait*3/2, time.Second) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			resp, err := hc.Get(url)
			if err != nil {
				continue
			}
			_ = resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
		if err := k.report(ctx, run, corev1.PodRunning, true); err != nil {
			if ctx.Err() == nil && !apierrors.IsNotFound(errors.Unwrap(err)) {
				k.fail(err)
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-run.probe:
		}
	}
}

// restart replaces the Pod's process with a new one on the same address. With visible set, the
// kubelet reports it as a real one does (restart count up, not ready until probed ready);
// otherwise the Pod status does not change at all.
func (k *kubelet) restart(ctx context.Context, key types.NamespacedName, visible bool) (*proc, error) {
	run := k.pod(key)
	if run == nil {
		return nil, fmt.Errorf("no pod %s", key)
	}
	old := run.current()
	old.cancel()
	<-old.done
	if err := k.startProc(ctx, run, nil); err != nil {
		return nil, err
	}
	if visible {
		run.mu.Lock()
		run.restarts++
		run.mu.Unlock()
		if err := k.report(ctx, run, corev1.PodRunning, false); err != nil {
			return nil, err
		}
		run.probe <- struct{}{}
	}
	return run.current(), nil
}

// hang makes the Pod's process stop answering, as a wedged one does: its admin API goes away and
// the Pod status does not change.
func (k *kubelet) hang(_ context.Context, key types.NamespacedName) error {
	run := k.pod(key)
	if run == nil {
		return fmt.Errorf("no pod %s", key)
	}
	p := run.current()
	p.cancel()
	<-p.done
	return nil
}

// finish ends the Pod's process and reports the Pod in phase (Succeeded or Failed).
func (k *kubelet) finish(ctx context.Context, key types.NamespacedName, phase corev1.PodPhase) error {
	run := k.pod(key)
	if run == nil {
		return fmt.Errorf("no pod %s", key)
	}
	p := run.current()
	p.cancel()
	<-p.done
	return k.report(ctx, run, phase, false)
}
