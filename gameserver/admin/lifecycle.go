package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
)

// tickWatch tells a tick loop that advances from one that has stalled.
type tickWatch struct {
	stallAfter time.Duration

	mu       sync.Mutex
	lastTick uint64
	since    time.Time
}

// stalledFor returns how long the tick loop has shown the same tick, given its tick now.
func (t *tickWatch) stalledFor(tick uint64, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tick != t.lastTick || t.since.IsZero() {
		t.lastTick, t.since = tick, now
		return 0
	}
	return now.Sub(t.since)
}

// Healthy returns nil while the process is healthy: its tick loop has not run yet (it is
// starting) or has ticked within StallAfter.
func (s *Server) Healthy() error {
	tick := s.rt.Tick()
	if tick == 0 {
		return nil
	}
	if d := s.health.stalledFor(tick, time.Now()); d > s.health.stallAfter {
		return fmt.Errorf("the tick loop has not ticked for %v (tick %d)", d.Round(time.Millisecond), tick)
	}
	return nil
}

func (s *Server) lifecycleStatus(st netcode.LifecycleStatus) netcode.LifecycleStatus {
	st.InstanceID = s.InstanceID()
	st.Healthy = s.Healthy() == nil
	return st
}

// getLifecycle answers the lifecycle, at once or, with ?since=V, once it differs from version V
// (a long-poll bounded by ?waitMillis=).
func (s *Server) getLifecycle(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("since") == "" {
		writeJSON(w, http.StatusOK, s.lifecycleStatus(s.lc.Status()))
		return
	}
	since, err := strconv.ParseUint(q.Get("since"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, netcode.ErrorResponse{Error: "since must be a version number", Field: "since"})
		return
	}
	wait := time.Duration(netcode.DefaultLifecycleWaitMillis) * time.Millisecond
	if v := q.Get("waitMillis"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 || ms > netcode.MaxLifecycleWaitMillis {
			writeError(w, http.StatusBadRequest, netcode.ErrorResponse{
				Error: fmt.Sprintf("waitMillis must be in [0, %d]", netcode.MaxLifecycleWaitMillis), Field: "waitMillis"})
			return
		}
		wait = time.Duration(ms) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	// A server that shuts down answers its long-polls at once instead of waiting for them.
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	writeJSON(w, http.StatusOK, s.lifecycleStatus(s.lc.Wait(ctx, since)))
}

// putAllocation delivers an allocation to the game and answers once the game has seen it, with
// the lifecycle that follows.
func (s *Server) putAllocation(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="netfleet-admin"`)
		writeError(w, http.StatusUnauthorized, netcode.ErrorResponse{Error: "missing or wrong bearer token"})
		return
	}
	var a netcode.Allocation
	if code, err := decodeBody(w, r, &a); err != nil {
		writeError(w, code, netcode.ErrorResponse{Error: "malformed allocation: " + err.Error()})
		return
	}
	if err := netcode.ValidateAllocation(a); err != nil {
		writeError(w, http.StatusUnprocessableEntity, netcode.ErrorResponse{Error: err.Error(), Field: netcode.FirstField(err)})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	fresh, err := s.lc.Allocate(ctx, a)
	cancel()
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		s.log.Warn("allocation not delivered: the game did not take it in time", "allocation", a.Name, "uid", a.UID)
		writeError(w, http.StatusServiceUnavailable, netcode.ErrorResponse{Error: "the game did not take the allocation in time"})
		return
	case errors.Is(err, netcode.ErrAllocationEnded):
		writeError(w, http.StatusGone, netcode.ErrorResponse{Error: err.Error()})
		return
	case err != nil:
		s.log.Warn("allocation refused", "allocation", a.Name, "uid", a.UID, "error", err)
		writeError(w, http.StatusConflict, netcode.ErrorResponse{Error: err.Error()})
		return
	}
	if fresh {
		s.log.Info("allocation delivered", "allocation", a.Name, "uid", a.UID, "payloadBytes", len(a.Payload))
	}
	writeJSON(w, http.StatusOK, s.lifecycleStatus(s.lc.Status()))
}
