package controllers

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

// Defaults of a rolling update, as the CRD defaults them.
var (
	defaultMaxSurge       = intstr.FromString("25%")
	defaultMaxUnavailable = intstr.FromString("25%")
)

// templateHash is the hash of a Fleet's template without spec.netcode: servers whose hash differs
// from the fleet's need replacing; servers whose netcode differs only need a patch.
func templateHash(t *v1alpha1.GameServerTemplateSpec) (string, error) {
	c := t.DeepCopy()
	c.Spec.Netcode = netcode.NetcodeConfig{}
	raw, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("hash fleet template: %w", err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:5]), nil
}

// fleetServer is what the fleet's plan knows of one of its GameServers that has not ended.
type fleetServer struct {
	name  string
	state v1alpha1.GameServerState
	// current: the server was created from the fleet's current template.
	current bool
	created time.Time
}

// up reports whether the server runs: Ready, Reserved or Allocated.
func (s fleetServer) up() bool {
	return s.state == v1alpha1.GameServerStateReady || s.held()
}

// held reports whether the server is kept through scale-downs and rollouts: Allocated (a match
// owns it) or Reserved (its game held it back for one).
func (s fleetServer) held() bool {
	return s.state == v1alpha1.GameServerStateAllocated || s.state == v1alpha1.GameServerStateReserved
}

// fleetPlan is one step of a fleet towards its spec.
type fleetPlan struct {
	// create is how many servers to create from the current template.
	create int
	// remove holds the indexes of the servers to remove, never an Allocated one.
	remove []int
}

// rolloutBounds resolves maxSurge (rounded up) and maxUnavailable (rounded down) against
// replicas. Recreate has no surge and may take every server down. Both zero would stall a
// rollout (the CRD refuses it), so one server may then be unavailable.
func rolloutBounds(s v1alpha1.FleetStrategy, replicas int) (surge, unavailable int, err error) {
	if s.Type == v1alpha1.FleetStrategyRecreate {
		return 0, replicas, nil
	}
	ms, mu := &defaultMaxSurge, &defaultMaxUnavailable
	if ru := s.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			ms = ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			mu = ru.MaxUnavailable
		}
	}
	if surge, err = intstr.GetScaledValueFromIntOrPercent(ms, replicas, true); err != nil {
		return 0, 0, fmt.Errorf("spec.strategy.rollingUpdate.maxSurge: %w", err)
	}
	if unavailable, err = intstr.GetScaledValueFromIntOrPercent(mu, replicas, false); err != nil {
		return 0, 0, fmt.Errorf("spec.strategy.rollingUpdate.maxUnavailable: %w", err)
	}
	if surge <= 0 && unavailable <= 0 {
		unavailable = 1
	}
	return max(surge, 0), min(max(unavailable, 0), replicas), nil
}

// planFleet decides the next step of a fleet of replicas servers, given its servers that have
// not ended. It is pure: the reconciler carries the plan out and calls it again on the next
// change, so every step only needs to be safe, not final.
//
// Allocated servers count towards replicas and are never removed: a server of an older template
// that runs a match stays until its process ends, and only then is its place taken by a current
// one. Current servers beyond what the fleet wants go at once, Ready ones first (scale-down).
// Older servers that are not Allocated are replaced according to the strategy: Recreate removes
// them all before it creates; RollingUpdate creates while the fleet is under replicas+maxSurge
// and removes older servers while at least replicas-maxUnavailable stay up (Ready or Allocated).
func planFleet(replicas int, strategy v1alpha1.FleetStrategy, servers []fleetServer) (fleetPlan, error) {
	surge, unavailable, err := rolloutBounds(strategy, replicas)
	if err != nil {
		return fleetPlan{}, err
	}
	var current, old []int
	oldAllocated := 0
	for i, s := range servers {
		switch {
		case s.current:
			current = append(current, i)
		case s.held():
			oldAllocated++
		default:
			old = append(old, i)
		}
	}
	// The current servers wanted once every older one that is not Allocated is gone.
	want := max(0, replicas-oldAllocated)
	var plan fleetPlan

	// Scale-down of current servers.
	removable := slices.DeleteFunc(slices.Clone(current), func(i int) bool {
		return servers[i].held()
	})
	sortForScaleDown(servers, removable)
	plan.remove = removable[:min(len(removable), max(0, len(current)-want))]
	kept := len(current) - len(plan.remove)

	if strategy.Type == v1alpha1.FleetStrategyRecreate {
		sortForScaleDown(servers, old)
		plan.remove = append(plan.remove, old...)
		if len(old) == 0 {
			plan.create = max(0, want-kept)
		}
		return plan, nil
	}

	total, up, currentDown := 0, 0, 0
	for i, s := range servers {
		if slices.Contains(plan.remove, i) {
			continue
		}
		total++
		if s.up() {
			up++
		} else if s.current {
			currentDown++
		}
	}
	plan.create = max(0, min(want-kept, replicas+surge-total))
	minUp := replicas - unavailable
	// Older servers that are down cost no availability; the budget still keeps the fleet from
	// dropping below minUp once the current servers that are still starting are counted out.
	downBudget := total - minUp - currentDown
	upBudget := up - minUp
	sortForRollout(servers, old)
	for _, i := range old {
		if servers[i].up() {
			if upBudget <= 0 || downBudget <= 0 {
				continue
			}
			upBudget--
		} else if downBudget <= 0 {
			continue
		}
		downBudget--
		plan.remove = append(plan.remove, i)
	}
	return plan, nil
}

// scaleDownRank orders states for removal on scale-down: Ready first, then Starting, then
// Creating.
func scaleDownRank(s v1alpha1.GameServerState) int {
	switch s {
	case v1alpha1.GameServerStateReady:
		return 0
	case v1alpha1.GameServerStateStarting:
		return 1
	default:
		return 2
	}
}

// sortForScaleDown orders idx by removal preference: by state (scaleDownRank), then older
// template before current, then newest first.
func sortForScaleDown(servers []fleetServer, idx []int) {
	slices.SortStableFunc(idx, func(a, b int) int {
		sa, sb := servers[a], servers[b]
		return cmp.Or(
			cmp.Compare(scaleDownRank(sa.state), scaleDownRank(sb.state)),
			boolFirst(!sa.current, !sb.current),
			sb.created.Compare(sa.created),
			cmp.Compare(sa.name, sb.name),
		)
	})
}

// sortForRollout orders older servers for replacement: those that are not up first (they cost
// no availability), then Ready ones, newest first within each.
func sortForRollout(servers []fleetServer, idx []int) {
	slices.SortStableFunc(idx, func(a, b int) int {
		sa, sb := servers[a], servers[b]
		return cmp.Or(
			boolFirst(!sa.up(), !sb.up()),
			sb.created.Compare(sa.created),
			cmp.Compare(sa.name, sb.name),
		)
	})
}

// boolFirst orders true before false.
func boolFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	default:
		return 1
	}
}
