package podrunner

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

const (
	// maxPatchTries bounds the status patches tried against concurrent changes of one Pod.
	maxPatchTries = 5
	// configRetry is how soon a container whose environment could not be resolved is tried
	// again (e.g. once its Secret exists).
	configRetry = time.Second
	// reportRetry is how soon a failed status report is tried again.
	reportRetry = time.Second
	// defaultGracePeriod is the termination grace period of a Pod that names none.
	defaultGracePeriod = 30 * time.Second
)

// exitEvent tells a worker that a container's process is gone.
type exitEvent struct {
	container int
	attempt   int
}

// container is the worker's record of one container of its Pod.
type container struct {
	spec    *corev1.Container
	binary  string
	logPath string

	attempts int // processes started (or tried), to tell stale events from current ones
	restarts int32
	proc     *process // the running process; nil when none runs
	id       string
	moved    map[int32]int32
	state    corev1.ContainerState
	last     corev1.ContainerState
	started  bool // the startup probe succeeded, or there is none
	ready    bool // the readiness probe succeeded last (by its thresholds)
	// startAt is when a (re)start is due; zero when none is pending.
	startAt time.Time
	// crashes counts restarts in a row that came soon after their start, for the back-off.
	crashes int
	// streak is, per probe kind, the successes (>0) or failures (<0) in a row.
	streak [probeKinds]int
	stops  [probeKinds]chan struct{}
}

func (c *container) status() corev1.ContainerStatus {
	started := c.proc != nil && c.started
	ready := started && (c.spec.ReadinessProbe == nil || c.ready)
	return corev1.ContainerStatus{
		Name:                 c.spec.Name,
		Image:                c.spec.Image,
		ImageID:              "file://" + c.binary,
		ContainerID:          c.id,
		State:                *c.state.DeepCopy(),
		LastTerminationState: *c.last.DeepCopy(),
		Ready:                ready,
		RestartCount:         c.restarts,
		Started:              &started,
	}
}

func (c *container) stopProbes() {
	for k, ch := range c.stops {
		if ch != nil {
			close(ch)
			c.stops[k] = nil
		}
	}
}

// worker runs one Pod: it schedules it, runs its containers and reports its status until the Pod
// is deleted or the runner stops. Everything but the mailbox is owned by run's goroutine.
type worker struct {
	r    *Runner
	uid  types.UID
	key  types.NamespacedName
	addr netip.Addr
	node string
	dir  string

	// The mailbox: the newest Pod the watch has seen, and whether it saw the Pod go.
	mu     sync.Mutex
	latest *corev1.Pod
	gone   bool
	wake   chan struct{}

	events chan any // exitEvent and probeResult
	quit   chan struct{}

	log        logr.Logger
	pod        *corev1.Pod
	containers []*container
	rejected   string // why the Pod was not admitted; it is Failed
	frozen     bool   // a finished Pod found on a node: its status stays as it is
	reportAt   time.Time
}

func newWorker(r *Runner, pod *corev1.Pod, addr netip.Addr) *worker {
	return &worker{
		r:      r,
		uid:    pod.UID,
		key:    client.ObjectKeyFromObject(pod),
		addr:   addr,
		node:   nodeName(r.opts.NodePrefix, addr),
		dir:    filepath.Join(r.opts.Dir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID)),
		pod:    pod,
		wake:   make(chan struct{}, 1),
		events: make(chan any, 16),
		quit:   make(chan struct{}),
	}
}

// notify hands the worker a newer Pod; it never blocks.
func (w *worker) notify(pod *corev1.Pod) {
	w.mu.Lock()
	w.latest = pod.DeepCopy()
	w.mu.Unlock()
	w.poke()
}

// notifyGone tells the worker that its Pod no longer exists.
func (w *worker) notifyGone() {
	w.mu.Lock()
	w.gone = true
	w.mu.Unlock()
	w.poke()
}

func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) take() (*corev1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.latest
	w.latest = nil
	return p, w.gone
}

func (w *worker) isGone() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gone
}

// send delivers an event to the worker unless stop closes or the worker has ended.
func (w *worker) send(ev any, stop <-chan struct{}) bool {
	select {
	case w.events <- ev:
		return true
	case <-stop:
		return false
	case <-w.quit:
		return false
	}
}

// run runs the Pod until it is gone or ctx ends. It reports whether it deleted the Pod object.
func (w *worker) run(ctx context.Context) (deleted bool) {
	defer close(w.quit)
	w.log = log.FromContext(ctx).WithValues("pod", w.key, "address", w.addr)
	ctx = log.IntoContext(ctx, w.log)
	adopted := w.pod.Spec.NodeName != ""
	if !w.schedule(ctx) {
		return false
	}
	w.admit(adopted, time.Now())

	for {
		if w.pod.DeletionTimestamp != nil {
			w.log.Info("pod is being deleted; stopping its containers")
			w.stopAll(w.grace(w.pod.DeletionGracePeriodSeconds))
			w.deletePod(ctx)
			return true
		}
		now := time.Now()
		w.startDue(ctx, now)
		w.reportAt = time.Time{}
		if err := w.report(ctx, now); err != nil {
			w.log.Error(err, "report pod status")
			w.reportAt = now.Add(reportRetry)
		}
		var timer *time.Timer
		var due <-chan time.Time
		if at, ok := w.nextDue(); ok {
			timer = time.NewTimer(time.Until(at))
			due = timer.C
		}
		select {
		case <-ctx.Done():
			w.stopAll(w.grace(nil))
			return false
		case <-w.wake:
			pod, gone := w.take()
			if gone {
				w.log.Info("pod is gone; stopping its containers")
				w.stopAll(w.grace(nil))
				return false
			}
			if pod != nil {
				w.pod = pod
			}
		case ev := <-w.events:
			w.handle(ctx, ev)
		case <-due:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// pause waits d; it reports false when the worker should stop instead.
func (w *worker) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return !w.isGone()
	}
}

// schedule ensures the Pod's node and binds the Pod to it. It reports false when the Pod is no
// longer the worker's (deleted, or bound elsewhere) or ctx ended.
func (w *worker) schedule(ctx context.Context) bool {
	for attempt := 0; ; attempt++ {
		err := w.r.ensureNode(ctx, w.node, w.addr)
		if err == nil {
			break
		}
		w.log.Error(err, "ensure node")
		if !w.pause(ctx, restartBackoff(attempt, w.r.opts.MaxRestartBackoff)) {
			return false
		}
	}
	if w.pod.Spec.NodeName != "" {
		return true
	}
	for attempt := 0; ; attempt++ {
		err := w.r.bind(ctx, w.pod.DeepCopy(), w.node)
		switch {
		case err == nil:
			w.pod.Spec.NodeName = w.node
			w.log.Info("pod scheduled", "node", w.node)
			return true
		case apierrors.IsNotFound(err):
			return false
		case apierrors.IsConflict(err):
			// Bound meanwhile (by this runner before, or by another scheduler), or replaced.
			fresh := &corev1.Pod{}
			if err := w.r.client.Get(ctx, w.key, fresh); err != nil || fresh.UID != w.uid {
				return false
			}
			w.pod = fresh
			return fresh.Spec.NodeName == w.node
		}
		w.log.Error(err, "bind pod")
		if !w.pause(ctx, restartBackoff(attempt, w.r.opts.MaxRestartBackoff)) {
			return false
		}
	}
}

// admit decides whether the Pod can run here and sets up its containers. A Pod found already
// bound to the runner's node (adopted) lost its processes with the runner that ran it: its
// containers are treated as having exited, and restarted per the restart policy.
func (w *worker) admit(adopted bool, now time.Time) {
	phase := w.pod.Status.Phase
	if adopted && (phase == corev1.PodSucceeded || phase == corev1.PodFailed) {
		w.frozen = true
		return
	}
	if reason := unsupported(w.pod); reason != "" {
		w.rejected = reason
		w.log.Info("pod rejected", "reason", reason)
		return
	}
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		w.rejected = fmt.Sprintf("cannot create the pod's directory: %v", err)
		w.log.Error(err, "pod rejected")
		return
	}
	for i := range w.pod.Spec.Containers {
		spec := &w.pod.Spec.Containers[i]
		bin, _ := w.r.opts.binaryFor(spec.Image)
		c := &container{
			spec:    spec,
			binary:  bin,
			logPath: filepath.Join(w.dir, spec.Name+".log"),
			state:   corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			startAt: now,
		}
		w.containers = append(w.containers, c)
		if !adopted {
			continue
		}
		for _, prev := range w.pod.Status.ContainerStatuses {
			if prev.Name == spec.Name {
				w.recover(c, prev, now)
			}
		}
	}
}

// recover carries an adopted container's history over from its last reported status.
func (w *worker) recover(c *container, prev corev1.ContainerStatus, now time.Time) {
	var t *corev1.ContainerStateTerminated
	switch {
	case prev.State.Running != nil:
		t = &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "ContainerStatusUnknown",
			Message:   "The container could not be located when the pod was restarted",
			StartedAt: prev.State.Running.StartedAt, FinishedAt: stamp(now),
		}
	case prev.State.Terminated != nil:
		t = prev.State.Terminated
	case prev.LastTerminationState.Terminated != nil:
		t = prev.LastTerminationState.Terminated
	default:
		return
	}
	c.restarts, c.attempts, c.id = prev.RestartCount, 1, prev.ContainerID
	c.last = prev.LastTerminationState
	w.exited(c, t.StartedAt.Time, t.FinishedAt.Time, t.ExitCode, t.Reason, t.Message)
}

// unsupported says why the runner cannot run pod, or "" when it can.
func unsupported(pod *corev1.Pod) string {
	if len(pod.Spec.InitContainers) > 0 {
		return "init containers are not supported by the local pod runner"
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		for k := range probeKinds {
			if p := probeSpec(c, k); p != nil && p.HTTPGet == nil && p.TCPSocket == nil {
				return fmt.Sprintf("container %s: %s probe: only httpGet and tcpSocket probes are supported by the local pod runner", c.Name, k)
			}
		}
		for _, e := range c.Env {
			if src := e.ValueFrom; src != nil && src.SecretKeyRef == nil && src.ConfigMapKeyRef == nil && src.FieldRef == nil {
				return fmt.Sprintf("container %s: env %s: only secretKeyRef, configMapKeyRef and fieldRef are supported by the local pod runner", c.Name, e.Name)
			}
		}
	}
	return ""
}

// startDue starts every container whose (re)start is due.
func (w *worker) startDue(ctx context.Context, now time.Time) {
	for i, c := range w.containers {
		if !c.startAt.IsZero() && !now.Before(c.startAt) {
			w.start(ctx, i, c, now)
		}
	}
}

func (w *worker) start(ctx context.Context, i int, c *container, now time.Time) {
	c.startAt = time.Time{}
	env := &podEnv{pod: w.pod, addr: w.addr, node: w.node, dir: w.dir, reader: w.r.client}
	l, err := env.resolve(ctx, c.spec)
	if err != nil {
		c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: err.Error()}}
		c.startAt = now.Add(configRetry)
		w.log.Info("cannot configure container", "container", c.spec.Name, "error", err.Error())
		return
	}
	if c.attempts > 0 {
		c.restarts++
	}
	c.attempts++
	c.streak = [probeKinds]int{}
	c.started, c.ready = c.spec.StartupProbe == nil, false
	p, err := startProcess(c.binary, l.args, l.env, w.dir, c.logPath)
	if err != nil {
		// As containerd reports it: the container exists but never ran.
		c.id = ""
		w.exited(c, now, now, 128, "StartError", err.Error())
		w.log.Error(err, "start container", "container", c.spec.Name)
		return
	}
	c.proc, c.moved = p, l.moved
	c.id = "local://" + strconv.Itoa(p.pid)
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: stamp(p.started)}}
	w.log.Info("container started", "container", c.spec.Name, "pid", p.pid, "restarts", c.restarts, "log", c.logPath)
	ev := exitEvent{container: i, attempt: c.attempts}
	go func() {
		<-p.done
		w.send(ev, nil)
	}()
	if c.started {
		w.startProbe(ctx, i, c, readinessProbe)
		w.startProbe(ctx, i, c, livenessProbe)
	} else {
		w.startProbe(ctx, i, c, startupProbe)
	}
}

func (w *worker) startProbe(ctx context.Context, i int, c *container, k probeKind) {
	spec := probeSpec(c.spec, k)
	if spec == nil {
		return
	}
	stop := make(chan struct{})
	c.stops[k] = stop
	t := target{addr: w.addr, ports: c.spec.Ports, moved: c.moved}
	attempt := c.attempts
	send := func(ok bool, msg string) bool {
		return w.send(probeResult{container: i, attempt: attempt, kind: k, ok: ok, msg: msg}, stop)
	}
	go probeLoop(ctx, spec, probePeriod(spec, k, w.r.opts.MaxProbePeriod), t, send, stop)
}

func (w *worker) handle(ctx context.Context, ev any) {
	switch ev := ev.(type) {
	case exitEvent:
		c := w.containers[ev.container]
		if ev.attempt != c.attempts || c.proc == nil {
			return
		}
		p := c.proc
		reason := "Completed"
		if p.exitCode != 0 {
			reason = "Error"
		}
		w.exited(c, p.started, p.finished, p.exitCode, reason, "")
	case probeResult:
		c := w.containers[ev.container]
		// A result of a probe stopped since (by an exit, or a startup probe that succeeded)
		// is stale.
		if ev.attempt != c.attempts || c.proc == nil || c.stops[ev.kind] == nil {
			return
		}
		w.probed(ctx, ev.container, c, ev)
	}
}

// probed applies one probe result by the probe's thresholds.
func (w *worker) probed(ctx context.Context, i int, c *container, ev probeResult) {
	spec := probeSpec(c.spec, ev.kind)
	s := &c.streak[ev.kind]
	switch {
	case ev.ok && *s < 0, !ev.ok && *s > 0:
		*s = 0
	}
	if ev.ok {
		*s++
	} else {
		*s--
	}
	succeeded := *s >= int(max(spec.SuccessThreshold, 1))
	failed := -*s >= int(max(spec.FailureThreshold, 1))
	if ev.kind == readinessProbe {
		if succeeded {
			c.ready = true
		} else if failed {
			c.ready = false
		}
		return
	}
	if ev.kind == startupProbe && succeeded {
		c.started = true
		close(c.stops[startupProbe])
		c.stops[startupProbe] = nil
		w.startProbe(ctx, i, c, readinessProbe)
		w.startProbe(ctx, i, c, livenessProbe)
		return
	}
	// A failed startup or liveness probe kills the container; the restart policy decides the rest.
	if failed {
		grace := w.grace(spec.TerminationGracePeriodSeconds)
		w.log.Info("container failed its probe; killing it", "container", c.spec.Name, "probe", ev.kind.String(), "result", ev.msg)
		c.proc.terminate(grace)
	}
}

// exited records that a container stopped and schedules its restart per the restart policy.
func (w *worker) exited(c *container, started, finished time.Time, code int32, reason, msg string) {
	c.proc, c.startAt = nil, time.Time{}
	c.stopProbes()
	c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: code, Reason: reason, Message: msg,
		StartedAt: stamp(started), FinishedAt: stamp(finished), ContainerID: c.id,
	}}
	policy := w.pod.Spec.RestartPolicy
	restart := policy == corev1.RestartPolicyAlways || (policy == corev1.RestartPolicyOnFailure && code != 0)
	w.log.Info("container exited", "container", c.spec.Name, "exitCode", code, "reason", reason, "restart", restart)
	if !restart {
		return
	}
	maxBackoff := w.r.opts.MaxRestartBackoff
	if finished.Sub(started) >= 2*maxBackoff {
		c.crashes = 0
	}
	d := restartBackoff(c.crashes, maxBackoff)
	c.crashes++
	c.last = c.state
	c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason:  "CrashLoopBackOff",
		Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", d, c.spec.Name, w.key.Name, w.key.Namespace, w.uid),
	}}
	c.startAt = time.Now().Add(d)
}

// nextDue is the earliest pending container start or status report retry.
func (w *worker) nextDue() (time.Time, bool) {
	at := w.reportAt
	for _, c := range w.containers {
		if !c.startAt.IsZero() && (at.IsZero() || c.startAt.Before(at)) {
			at = c.startAt
		}
	}
	return at, !at.IsZero()
}

// grace is a termination grace period: seconds if set, else the Pod's, capped by the options.
func (w *worker) grace(seconds *int64) time.Duration {
	if seconds == nil {
		seconds = w.pod.Spec.TerminationGracePeriodSeconds
	}
	d := defaultGracePeriod
	if seconds != nil {
		d = time.Duration(max(*seconds, 0)) * time.Second
	}
	return min(d, w.r.opts.MaxGracePeriod)
}

// stopAll terminates every running container and waits until all are gone.
func (w *worker) stopAll(grace time.Duration) {
	for _, c := range w.containers {
		if c.proc != nil {
			c.proc.terminate(grace)
		}
	}
	for _, c := range w.containers {
		if c.proc != nil {
			<-c.proc.done
			w.log.Info("container stopped", "container", c.spec.Name, "pid", c.proc.pid, "exitCode", c.proc.exitCode)
			c.proc = nil
		}
		c.stopProbes()
	}
}

// deletePod removes the Pod object now that its containers are gone, as the kubelet does.
func (w *worker) deletePod(ctx context.Context) {
	uid := w.uid
	for attempt := 0; ; attempt++ {
		err := w.r.client.Delete(ctx, w.pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &uid})
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			w.log.Info("pod deleted")
			return
		}
		w.log.Error(err, "delete pod")
		if attempt == maxPatchTries || !w.pause(ctx, restartBackoff(attempt, w.r.opts.MaxRestartBackoff)) {
			return
		}
	}
}

// report patches the Pod's status when it differs from what the runner knows.
func (w *worker) report(ctx context.Context, now time.Time) error {
	if w.frozen {
		return nil
	}
	for try := 1; ; try++ {
		mod := w.pod.DeepCopy()
		w.fill(&mod.Status, now)
		if equality.Semantic.DeepEqual(w.pod.Status, mod.Status) {
			return nil
		}
		err := w.r.client.Status().Patch(ctx, mod, client.StrategicMergeFrom(w.pod, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			w.pod = mod
			return nil
		case apierrors.IsNotFound(err):
			// The watch reports the deletion.
			return nil
		case !apierrors.IsConflict(err) || try == maxPatchTries:
			return fmt.Errorf("patch status: %w", err)
		}
		fresh := &corev1.Pod{}
		if err := w.r.client.Get(ctx, w.key, fresh); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("get pod: %w", err)
		}
		if fresh.UID != w.uid {
			return nil
		}
		w.pod = fresh
	}
}

// fill writes the status the runner owns into st.
func (w *worker) fill(st *corev1.PodStatus, now time.Time) {
	if st.StartTime == nil {
		t := stamp(now)
		st.StartTime = &t
	}
	if w.rejected != "" {
		st.Phase, st.Reason, st.Message = corev1.PodFailed, "UnsupportedPodSpec", w.rejected
		st.Conditions = podConditions(st.Conditions, w.pod, st.Phase, nil, stamp(now))
		return
	}
	ip := w.addr.String()
	st.HostIP, st.PodIP = ip, ip
	st.HostIPs, st.PodIPs = []corev1.HostIP{{IP: ip}}, []corev1.PodIP{{IP: ip}}
	statuses := make([]corev1.ContainerStatus, len(w.containers))
	for i, c := range w.containers {
		statuses[i] = c.status()
	}
	st.ContainerStatuses = statuses
	st.Phase = podPhase(w.pod.Spec.RestartPolicy, statuses)
	st.Conditions = podConditions(st.Conditions, w.pod, st.Phase, statuses, stamp(now))
}
