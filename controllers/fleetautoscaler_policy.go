package controllers

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// fleetLoad is what an autoscaler sees of its fleet: spec.replicas and its servers that have not
// ended, by state.
type fleetLoad struct {
	replicas  int32
	current   int32
	ready     int32
	allocated int32
}

// scaleDecision is the replicas a policy wants for a fleet.
type scaleDecision struct {
	// replicas is what the fleet gets, limits applied; wanted, what the policy asked before them.
	replicas, wanted int32
	// limit is ReasonAtMaxReplicas or ReasonAtMinReplicas when a limit changed wanted, else
	// ReasonWithinLimits.
	limit string
	// why says how the policy came to wanted, for the status and events.
	why string
}

// decideBuffer is the Buffer policy: the fleet's Allocated servers plus the buffer, within
// [minReplicas, maxReplicas]. A count buffer adds its count; a percentage p asks for the fewest
// replicas of which at least p% are free, and at least one free. It is pure.
func decideBuffer(p v1alpha1.BufferPolicy, allocated int32) (scaleDecision, error) {
	var d scaleDecision
	switch p.BufferSize.Type {
	case intstr.Int:
		n := p.BufferSize.IntVal
		if n < 1 {
			return d, fmt.Errorf("spec.policy.buffer.bufferSize %d: must be at least 1", n)
		}
		d.wanted = clampReplicas(int64(allocated) + int64(n))
		d.why = fmt.Sprintf("%d Allocated and a buffer of %d", allocated, n)
	default:
		pct, err := bufferPercent(p.BufferSize.StrVal)
		if err != nil {
			return d, err
		}
		// The fewest replicas r with r - allocated >= r * pct / 100.
		free := int64(100 - pct)
		r := max((int64(allocated)*100+free-1)/free, int64(allocated)+1)
		d.wanted = clampReplicas(r)
		d.why = fmt.Sprintf("%d Allocated and a buffer of %d%% (%d free)", allocated, pct, d.wanted-allocated)
	}
	d.replicas, d.limit = d.wanted, v1alpha1.ReasonWithinLimits
	switch {
	case d.wanted > p.MaxReplicas:
		d.replicas, d.limit = p.MaxReplicas, v1alpha1.ReasonAtMaxReplicas
	case d.wanted < p.MinReplicas:
		d.replicas, d.limit = p.MinReplicas, v1alpha1.ReasonAtMinReplicas
	}
	return d, nil
}

// bufferPercent parses a percentage bufferSize, "1%" to "99%".
func bufferPercent(s string) (int, error) {
	digits, ok := strings.CutSuffix(s, "%")
	pct, err := strconv.Atoi(digits)
	if !ok || err != nil || pct < 1 || pct > 99 {
		return 0, fmt.Errorf("spec.policy.buffer.bufferSize %q: want a count or a percentage from 1%% to 99%%", s)
	}
	return pct, nil
}

// clampReplicas bounds r to what a Fleet takes.
func clampReplicas(r int64) int32 {
	return int32(min(max(r, 0), v1alpha1.MaxFleetReplicas))
}

// retryDelay is the back-off before the next call of a webhook that failed failures times in a
// row (at least once): base doubled per failure, at most maxDelay, within ±10% jitter so that
// autoscalers failing together do not call together.
func retryDelay(failures int, base, maxDelay time.Duration) time.Duration {
	d := base
	for i := 1; i < failures && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	return d + time.Duration((rand.Float64()*0.2-0.1)*float64(d))
}
