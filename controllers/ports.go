package controllers

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// PortRange is an inclusive range of host ports for Dynamic game ports.
type PortRange struct {
	Min, Max int32
}

// ParsePortRange parses "min-max", e.g. "7000-8000".
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		return PortRange{}, fmt.Errorf("port range %q: want min-max", s)
	}
	minPort, err := strconv.ParseInt(strings.TrimSpace(lo), 10, 32)
	if err != nil {
		return PortRange{}, fmt.Errorf("port range %q: %w", s, err)
	}
	maxPort, err := strconv.ParseInt(strings.TrimSpace(hi), 10, 32)
	if err != nil {
		return PortRange{}, fmt.Errorf("port range %q: %w", s, err)
	}
	r := PortRange{Min: int32(minPort), Max: int32(maxPort)}
	if r.Min < 1 || r.Max > 65535 || r.Min > r.Max {
		return PortRange{}, fmt.Errorf("port range %q: want 1 <= min <= max <= 65535", s)
	}
	return r, nil
}

func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.Min, r.Max) }

// pendingPortTTL is how long a handed-out port stays reserved while its Pod is not yet in the
// cache.
const pendingPortTTL = time.Minute

// hostPortPicker hands out host ports for Dynamic game ports. It is best-effort: it avoids the
// ports of every game-server Pod it knows of, and of ports it handed out recently whose Pods the
// cache may not show yet; a remaining clash on one node is caught by the scheduler's host-port
// check, which places the Pod elsewhere.
type hostPortPicker struct {
	rng PortRange

	mu      sync.Mutex
	pending map[int32]time.Time
}

func newHostPortPicker(r PortRange) *hostPortPicker {
	return &hostPortPicker{rng: r, pending: map[int32]time.Time{}}
}

// pick returns n distinct free ports; used holds the host ports of existing Pods.
func (h *hostPortPicker) pick(used map[int32]bool, n int, now time.Time) ([]int32, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p, at := range h.pending {
		if used[p] || now.Sub(at) > pendingPortTTL {
			delete(h.pending, p)
		}
	}
	size := int(h.rng.Max-h.rng.Min) + 1
	// A random starting point spreads servers over the range, so two operators' picks (e.g.
	// during a leader hand-over) rarely collide.
	start := rand.IntN(size)
	out := make([]int32, 0, n)
	for i := 0; i < size && len(out) < n; i++ {
		p := h.rng.Min + int32((start+i)%size)
		if _, held := h.pending[p]; used[p] || held {
			continue
		}
		out = append(out, p)
	}
	if len(out) < n {
		return nil, fmt.Errorf("no free host port in range %s", h.rng)
	}
	for _, p := range out {
		h.pending[p] = now
	}
	return out, nil
}
