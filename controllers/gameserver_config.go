package controllers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

// maxConditionMessage bounds a condition message taken from a server's answer.
const maxConditionMessage = 1024

// serverMemo is what the reconciler remembers about one GameServer between passes. None of it
// must survive an operator restart: a new operator checks every server once and carries on.
// Passes for one GameServer never run concurrently, so a memo needs no lock of its own.
type serverMemo struct {
	uid types.UID
	// failures counts consecutive failed admin calls, for the backoff; failedRestarts is the
	// Pod's restart count at the last of them.
	failures       int
	failedRestarts int32
	// checkedAt is when the process was last seen running the desired config; restarts and
	// ready are the Pod's restart count and readiness then. A change of either means the process
	// may be a new one, so it is checked at once.
	checkedAt time.Time
	restarts  int32
	ready     bool
	// refusedGen and refusedHash are the config the process refused (at refusedRestarts); it is
	// not pushed again until the spec or the process changes.
	refusedGen      int64
	refusedHash     string
	refusedRestarts int32
	// seenGen is the newest generation observed, first at seenAt; timing says its propagation
	// is still to be measured.
	seenGen int64
	seenAt  time.Time
	timing  bool
}

// memos holds a serverMemo per GameServer.
type memos struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*serverMemo
}

func newMemos() *memos { return &memos{m: map[types.NamespacedName]*serverMemo{}} }

// get returns the memo of key, a fresh one if the GameServer is new (or was recreated).
func (m *memos) get(key types.NamespacedName, uid types.UID) *serverMemo {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.m[key]
	if !ok || s.uid != uid {
		s = &serverMemo{uid: uid}
		m.m[key] = s
	}
	return s
}

func (m *memos) forget(key types.NamespacedName) {
	m.mu.Lock()
	delete(m.m, key)
	m.mu.Unlock()
}

// reconcileConfig keeps the server's process on spec.netcode: it pushes the config when the
// process has not applied this generation or is a new process, and otherwise checks every
// VerifyInterval (or at once when the Pod shows a restart or a readiness flip) that the process
// still runs it. It returns when to look again.
func (r *GameServerReconciler) reconcileConfig(ctx context.Context, gs *v1alpha1.GameServer, pod *corev1.Pod, memo *serverMemo) (time.Duration, error) {
	desired := gs.Spec.Netcode.Default()
	gen, hash := gs.Generation, desired.Hash()
	st := &gs.Status.Netcode
	now := time.Now()
	defer func() { st.Progress = fmt.Sprintf("%d/%d", st.AppliedGeneration, gen) }()

	if gen != memo.seenGen {
		// Only an edit of a server that already runs a config counts as propagation; a new
		// server's first push measures its start-up instead.
		memo.seenGen, memo.seenAt, memo.timing = gen, now, st.AppliedGeneration > 0 && st.AppliedGeneration < gen
	}
	upToDate := st.InstanceID != "" && st.AppliedGeneration == gen && st.AppliedHash == hash
	if gs.Status.State.IsFinal() {
		return 0, nil
	}
	if pod == nil || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		if !upToDate {
			r.setConfigCondition(gs, metav1.ConditionFalse, v1alpha1.ReasonPending, "waiting for the server's process to run")
		}
		return 0, nil
	}
	restarts, ready := podRestarts(pod), podReady(pod)
	if restarts != memo.failedRestarts {
		// A new process: the backoff earned by the failed calls to the dead one (for as long
		// as its restart back-off lasted) must not delay the new one's config.
		memo.failures = 0
	}
	changed := memo.checkedAt.IsZero() || restarts != memo.restarts || ready != memo.ready
	if memo.refusedGen == gen && memo.refusedHash == hash && memo.refusedRestarts == restarts {
		return 0, nil
	}
	if upToDate && !changed {
		if wait := memo.checkedAt.Add(r.opts.VerifyInterval).Sub(now); wait > 0 {
			return wait, nil
		}
	}
	tokensOn := desired.ConnectTokens.Mode != netcode.ConnectTokensDisabled

	token, err := r.tokens.get(ctx, gs.Namespace)
	if err != nil {
		return 0, err
	}
	endpoint := adminEndpoint(gs, pod)
	if upToDate {
		cur, err := r.pusher.Status(ctx, endpoint, token)
		if err != nil {
			return r.configFailed(ctx, gs, memo, restarts, err), nil
		}
		if cur.InstanceID == st.InstanceID && cur.Generation == gen && cur.Hash == hash {
			// A rotation reaches running servers at their checks.
			if tokensOn {
				if err := r.pushConnectKeys(ctx, gs, endpoint, token, false); err != nil {
					return r.configFailed(ctx, gs, memo, restarts, err), nil
				}
			}
			memo.failures, memo.checkedAt, memo.restarts, memo.ready = 0, now, restarts, ready
			return r.verifyAfter(), nil
		}
		if cur.InstanceID != st.InstanceID {
			r.recorder.Eventf(gs, pod, corev1.EventTypeNormal, "ProcessRestarted", "PushConfig",
				"process %s replaced %s; pushing generation %d again", cur.InstanceID, st.InstanceID, gen)
		}
		recordRunning(st, cur)
	}

	// The keys go first: a server refuses a mode that checks tokens until it holds them.
	if tokensOn {
		if err := r.pushConnectKeys(ctx, gs, endpoint, token, true); err != nil {
			return r.configFailed(ctx, gs, memo, restarts, err), nil
		}
	}
	running, err := r.pusher.Push(ctx, endpoint, token, netcode.ConfigPush{Generation: gen, Config: desired})
	if err != nil {
		return r.configFailed(ctx, gs, memo, restarts, err), nil
	}
	recordRunning(st, running)
	if running.Generation != gen || running.Hash != hash {
		// The server accepted the push yet reports another config: treat it as not applied.
		memo.failures, memo.failedRestarts = memo.failures+1, restarts
		r.setConfigCondition(gs, metav1.ConditionFalse, v1alpha1.ReasonPending,
			fmt.Sprintf("the server answered with generation %d (hash %s)", running.Generation, running.Hash))
		return r.backoff(memo.failures), nil
	}
	memo.failures, memo.checkedAt, memo.restarts, memo.ready = 0, now, restarts, ready
	if memo.timing && memo.seenGen == gen {
		configPropagation.Observe(time.Since(memo.seenAt).Seconds())
		memo.timing = false
	}
	// An event marks the condition turning True; each later generation shows in the status only,
	// so that an edit of a large fleet costs one write per server.
	if r.setConfigCondition(gs, metav1.ConditionTrue, v1alpha1.ReasonApplied, fmt.Sprintf("the server runs generation %d", gen)) {
		r.recorder.Eventf(gs, pod, corev1.EventTypeNormal, "ConfigApplied", "PushConfig", "the server runs generation %d (hash %s)", gen, hash)
	}
	return r.verifyAfter(), nil
}

// adminEndpoint is host:port of the admin API of gs's process in pod.
func adminEndpoint(gs *v1alpha1.GameServer, pod *corev1.Pod) string {
	return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(adminPort(gs))))
}

// recordRunning records what the server reports it runs.
func recordRunning(st *v1alpha1.GameServerNetcodeStatus, cur netcode.ConfigStatus) {
	st.AppliedGeneration, st.AppliedHash, st.InstanceID = cur.Generation, cur.Hash, cur.InstanceID
}

// configFailed records a failed admin call in the ConfigApplied condition and returns when to try
// again: after a jittered, growing backoff, or never for a refused config (a new generation or a
// new process reconciles again).
func (r *GameServerReconciler) configFailed(ctx context.Context, gs *v1alpha1.GameServer, memo *serverMemo, restarts int32, err error) time.Duration {
	pe, ok := errors.AsType[*PushError](err)
	if !ok {
		pe = &PushError{Reason: pushErrOther, Message: err.Error()}
	}
	ctrl.LoggerFrom(ctx).V(1).Info("admin API call failed", "reason", pe.Reason, "status", pe.StatusCode, "error", pe.Message)
	reason, msg := v1alpha1.ReasonUnreachable, pe.Message
	switch pe.Reason {
	case pushErrRefused:
		memo.refusedGen, memo.refusedHash, memo.refusedRestarts = gs.Generation, gs.Spec.Netcode.Hash(), restarts
		// Every refused generation gets its event: each is a config someone has to fix.
		prev := meta.FindStatusCondition(gs.Status.Conditions, v1alpha1.ConditionConfigApplied)
		fresh := prev == nil || prev.Reason != v1alpha1.ReasonRefused || prev.ObservedGeneration != gs.Generation
		if r.setConfigCondition(gs, metav1.ConditionFalse, v1alpha1.ReasonRefused, "the server refused the config: "+msg) || fresh {
			r.recorder.Eventf(gs, nil, corev1.EventTypeWarning, "ConfigRefused", "PushConfig", "the server refused generation %d: %s", gs.Generation, truncate(msg))
		}
		return 0
	case pushErrUnauthorized:
		// The Secret may have been replaced: read it again before the next try.
		r.tokens.forget(gs.Namespace)
		reason, msg = v1alpha1.ReasonRefused, "the server refused the admin token"
	case pushErrConflict:
		reason, msg = v1alpha1.ReasonRefused, fmt.Sprintf("the server runs generation %d, newer than %d: %s", pe.Generation, gs.Generation, msg)
	}
	if r.setConfigCondition(gs, metav1.ConditionFalse, reason, msg) {
		r.recorder.Eventf(gs, nil, corev1.EventTypeWarning, "ConfigNotApplied", "PushConfig", "%s: %s", reason, truncate(msg))
	}
	memo.failures++
	memo.failedRestarts = restarts
	return r.backoff(memo.failures)
}

// setConfigCondition sets ConfigApplied and reports whether its status or reason changed.
func (r *GameServerReconciler) setConfigCondition(gs *v1alpha1.GameServer, status metav1.ConditionStatus, reason, msg string) bool {
	prev := meta.FindStatusCondition(gs.Status.Conditions, v1alpha1.ConditionConfigApplied)
	changed := prev == nil || prev.Status != status || prev.Reason != reason
	meta.SetStatusCondition(&gs.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionConfigApplied, Status: status, Reason: reason,
		Message: truncate(msg), ObservedGeneration: gs.Generation,
	})
	return changed
}

// backoff is the wait before retry n (n >= 1): RetryBase doubled per failure up to RetryMax,
// jittered into [d/2, d) so that servers that failed together do not retry together.
func (r *GameServerReconciler) backoff(n int) time.Duration {
	d := r.opts.RetryMax
	if n < 32 {
		if exp := r.opts.RetryBase << (n - 1); exp > 0 && exp < d {
			d = exp
		}
	}
	return d/2 + rand.N(d/2+1)
}

// verifyAfter is the next check of a server running the desired config, jittered by up to a
// tenth so that the checks of many servers spread out.
func (r *GameServerReconciler) verifyAfter() time.Duration {
	return r.opts.VerifyInterval + rand.N(r.opts.VerifyInterval/10+1)
}

func truncate(s string) string {
	if len(s) <= maxConditionMessage {
		return s
	}
	return s[:maxConditionMessage] + "..."
}

// pushConnectKeys gives the server its fleet's connect-token keys and the address tokens name
// (status.address and status.port), when they differ from what status.netcode.connectKeyIds
// records or always, and records the ids the server then holds.
func (r *GameServerReconciler) pushConnectKeys(ctx context.Context, gs *v1alpha1.GameServer, endpoint, adminToken string, always bool) error {
	keys, err := r.keys.Get(ctx, gs.Namespace, connectKeyGroup(gs))
	if err != nil {
		return err
	}
	st := &gs.Status.Netcode
	if !always && slices.Equal(st.ConnectKeyIDs, keys.IDs()) {
		return nil
	}
	if gs.Status.Address == "" || gs.Status.Port == 0 {
		return &PushError{Reason: pushErrUnreachable, Message: "connect tokens need the server's address and port, which it has not yet"}
	}
	got, err := r.pusher.PushConnectKeys(ctx, endpoint, adminToken, netcode.ConnectKeysPush{
		Keys: keys.All, Server: net.JoinHostPort(gs.Status.Address, strconv.Itoa(int(gs.Status.Port))),
	})
	if err != nil {
		return err
	}
	st.ConnectKeyIDs = st.ConnectKeyIDs[:0]
	for _, id := range got.KeyIDs {
		st.ConnectKeyIDs = append(st.ConnectKeyIDs, int64(id))
	}
	return nil
}

// DeliverAllocation delivers an allocation to the process of gs (PUT /v1/allocation) and returns
// once the game has seen it. It implements AllocationDeliverer.
func (r *GameServerReconciler) DeliverAllocation(ctx context.Context, gs *v1alpha1.GameServer, a netcode.Allocation) error {
	pod := &corev1.Pod{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(gs), pod); err != nil {
		return fmt.Errorf("get pod: %w", err)
	}
	if pod.Status.PodIP == "" {
		return fmt.Errorf("pod %s has no IP", pod.Name)
	}
	token, err := r.tokens.get(ctx, gs.Namespace)
	if err != nil {
		return err
	}
	st, err := r.pusher.Allocate(ctx, adminEndpoint(gs, pod), token, a)
	if pe, ok := errors.AsType[*PushError](err); ok {
		switch {
		case pe.StatusCode == http.StatusGone:
			// Delivered before (a retry after a lost answer), and its match is already over.
			return nil
		case pe.Reason == pushErrUnauthorized:
			r.tokens.forget(gs.Namespace)
		}
	}
	if err != nil {
		return err
	}
	if st.State != netcode.LifecycleAllocated {
		return fmt.Errorf("the process took the allocation but reports state %s", st.State)
	}
	return nil
}
