package controllers

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

// lifecycleWait is how long one long-poll of a process's lifecycle waits for a change; every
// answer, changed or not, is a health check passed.
const lifecycleWait = 10 * time.Second

// lifecycleView is what the operator last saw of one process's lifecycle.
type lifecycleView struct {
	// status is the last answer; seen reports there was one.
	status netcode.LifecycleStatus
	seen   bool
	// since is when the watch of this process began; healthyAt when an answer last reported a
	// ticking loop.
	since, healthyAt time.Time
}

// healthyUntil is when the process becomes Unhealthy without a passed check, after the grace
// it has from the start of the watch.
func (v lifecycleView) healthyUntil(after time.Duration) time.Time {
	if v.healthyAt.After(v.since) {
		return v.healthyAt.Add(after)
	}
	return v.since.Add(after)
}

// lifecycleWatches follows the lifecycle of every running game-server process with a long-poll
// of its admin API (one goroutine per process), keeps the last answer and wakes the
// GameServer's reconcile when something changed. Nothing of it must survive a restart: a new
// operator starts the watches again and reads the current lifecycle at once.
type lifecycleWatches struct {
	pusher *Pusher
	tokens *tokenStore
	events chan event.GenericEvent
	retry  time.Duration

	mu sync.Mutex
	m  map[types.NamespacedName]*lifecycleWatch
}

type lifecycleWatch struct {
	uid      types.UID
	endpoint string
	cancel   context.CancelFunc
	view     lifecycleView
}

func newLifecycleWatches(p *Pusher, tokens *tokenStore, retry time.Duration) *lifecycleWatches {
	return &lifecycleWatches{
		pusher: p, tokens: tokens, retry: retry,
		events: make(chan event.GenericEvent, 1024),
		m:      map[types.NamespacedName]*lifecycleWatch{},
	}
}

// ensure runs a watch of the process of gs at endpoint, and returns what it saw so far. A watch
// of another endpoint or an earlier GameServer of that name is replaced.
func (w *lifecycleWatches) ensure(ctx context.Context, gs *v1alpha1.GameServer, endpoint string) lifecycleView {
	key := client.ObjectKeyFromObject(gs)
	w.mu.Lock()
	defer w.mu.Unlock()
	if cur, ok := w.m[key]; ok {
		if cur.uid == gs.UID && cur.endpoint == endpoint {
			return cur.view
		}
		cur.cancel()
	}
	// The watch outlives the reconcile that started it, not the operator.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	lw := &lifecycleWatch{uid: gs.UID, endpoint: endpoint, cancel: cancel, view: lifecycleView{since: time.Now()}}
	w.m[key] = lw
	go w.run(wctx, key, gs.DeepCopy(), lw)
	return lw.view
}

// stop ends the watch of key.
func (w *lifecycleWatches) stop(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cur, ok := w.m[key]; ok {
		cur.cancel()
		delete(w.m, key)
	}
}

// stopAll ends every watch (the operator stops).
func (w *lifecycleWatches) stopAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, cur := range w.m {
		cur.cancel()
		delete(w.m, k)
	}
}

func (w *lifecycleWatches) run(ctx context.Context, key types.NamespacedName, gs *v1alpha1.GameServer, lw *lifecycleWatch) {
	var since uint64
	for ctx.Err() == nil {
		token, err := w.tokens.get(ctx, gs.Namespace)
		var st netcode.LifecycleStatus
		if err == nil {
			st, err = w.pusher.Lifecycle(ctx, lw.endpoint, token, since, lifecycleWait)
		}
		if pe, ok := errors.AsType[*PushError](err); ok && pe.Reason == pushErrUnauthorized {
			w.tokens.forget(gs.Namespace)
		}
		if err != nil {
			// The next answer may come from a new process, whose versions start over.
			since = 0
			select {
			case <-ctx.Done():
			case <-time.After(w.retry):
			}
			continue
		}
		changed := w.record(key, lw, st)
		since = st.Version
		if changed {
			select {
			case w.events <- event.GenericEvent{Object: gs}:
			default:
				// A full queue already holds wake-ups; the periodic verify catches up.
			}
		}
	}
}

// record keeps an answer and reports whether the GameServer should be reconciled: the status
// changed, or the process is healthy again after it was not.
func (w *lifecycleWatches) record(key types.NamespacedName, lw *lifecycleWatch, st netcode.LifecycleStatus) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m[key] != lw {
		return false
	}
	prev := lw.view
	lw.view.status, lw.view.seen = st, true
	if st.Healthy {
		lw.view.healthyAt = time.Now()
	}
	return !prev.seen || prev.status.Version != st.Version || prev.status.InstanceID != st.InstanceID ||
		prev.status.Healthy != st.Healthy
}
