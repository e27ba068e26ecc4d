package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

func TestLifecycleState(t *testing.T) {
	const (
		ready     = v1alpha1.GameServerStateReady
		reserved  = v1alpha1.GameServerStateReserved
		allocated = v1alpha1.GameServerStateAllocated
		starting  = v1alpha1.GameServerStateStarting
		shutdown  = v1alpha1.GameServerStateShutdown
		errState  = v1alpha1.GameServerStateError
	)
	obs := func(st netcode.LifecycleState, last string) *netcode.LifecycleStatus {
		return &netcode.LifecycleStatus{State: st, LastAllocationUID: last}
	}
	for _, tc := range []struct {
		name string
		next v1alpha1.GameServerState
		obs  *netcode.LifecycleStatus
		by   string
		up   bool
		want v1alpha1.GameServerState
	}{
		{"no answer yet", ready, nil, "", true, ready},
		{"final stays", errState, obs(netcode.LifecycleReady, ""), "", true, errState},
		{"game shut down", allocated, obs(netcode.LifecycleShutdown, "a"), "a", true, shutdown},
		{"game shut down while Ready", ready, obs(netcode.LifecycleShutdown, ""), "", true, shutdown},
		{"match ended", allocated, obs(netcode.LifecycleReady, "a"), "a", true, ready},
		{"match ended, reserved", allocated, obs(netcode.LifecycleReserved, "a"), "a", true, reserved},
		{"match ended, pod not ready", allocated, obs(netcode.LifecycleReady, "a"), "a", false, starting},
		{"not delivered yet", allocated, obs(netcode.LifecycleReady, "older"), "a", true, allocated},
		{"never allocated process", allocated, obs(netcode.LifecycleReady, ""), "a", true, allocated},
		{"restarted process keeps the match", allocated, obs(netcode.LifecycleReady, ""), "", true, allocated},
		{"in its match", allocated, obs(netcode.LifecycleAllocated, "a"), "a", true, allocated},
		{"reserved", ready, obs(netcode.LifecycleReserved, ""), "", true, reserved},
		{"reservation over", ready, obs(netcode.LifecycleReady, ""), "", true, ready},
		{"starting stays starting", starting, obs(netcode.LifecycleReserved, ""), "", false, starting},
	} {
		if got := lifecycleState(tc.next, tc.obs, tc.by, tc.up); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestHealthState(t *testing.T) {
	keep := v1alpha1.GameServerHealth{}
	replace := v1alpha1.GameServerHealth{ReplaceAllocated: true}
	off := v1alpha1.GameServerHealth{Disabled: true}
	for _, tc := range []struct {
		state     v1alpha1.GameServerState
		unhealthy bool
		h         v1alpha1.GameServerHealth
		want      v1alpha1.GameServerState
	}{
		{v1alpha1.GameServerStateReady, false, keep, v1alpha1.GameServerStateReady},
		{v1alpha1.GameServerStateReady, true, keep, v1alpha1.GameServerStateUnhealthy},
		{v1alpha1.GameServerStateStarting, true, keep, v1alpha1.GameServerStateUnhealthy},
		{v1alpha1.GameServerStateReserved, true, keep, v1alpha1.GameServerStateUnhealthy},
		{v1alpha1.GameServerStateAllocated, true, keep, v1alpha1.GameServerStateAllocated},
		{v1alpha1.GameServerStateAllocated, true, replace, v1alpha1.GameServerStateUnhealthy},
		{v1alpha1.GameServerStateReady, true, off, v1alpha1.GameServerStateReady},
		{v1alpha1.GameServerStateShutdown, true, keep, v1alpha1.GameServerStateShutdown},
		{v1alpha1.GameServerStateCreating, true, keep, v1alpha1.GameServerStateCreating},
	} {
		if got := healthState(tc.state, tc.unhealthy, tc.h); got != tc.want {
			t.Errorf("healthState(%s, %v, %+v) = %s, want %s", tc.state, tc.unhealthy, tc.h, got, tc.want)
		}
	}
}

func TestPlayersStatus(t *testing.T) {
	now := time.Now()
	later := metav1.NewTime(now.Add(time.Minute))
	past := metav1.NewTime(now.Add(-time.Second))
	held := &v1alpha1.GameServerPlayers{Connected: 1, Capacity: 10, Pending: 4, PendingUntil: &later}
	for _, tc := range []struct {
		name  string
		prev  *v1alpha1.GameServerPlayers
		obs   *netcode.LifecycleStatus
		ended bool
		want  *v1alpha1.GameServerPlayers
	}{
		{"nothing", nil, nil, false, nil},
		{"first answer", nil, &netcode.LifecycleStatus{Players: 2, Capacity: 8}, false, &v1alpha1.GameServerPlayers{Connected: 2, Capacity: 8}},
		{"arrivals take their room", held, &netcode.LifecycleStatus{Players: 3, Capacity: 10}, false, &v1alpha1.GameServerPlayers{Connected: 3, Capacity: 10, Pending: 2, PendingUntil: &later}},
		{"more arrive than held", held, &netcode.LifecycleStatus{Players: 9, Capacity: 10}, false, &v1alpha1.GameServerPlayers{Connected: 9, Capacity: 10}},
		{"departures free no held room", held, &netcode.LifecycleStatus{Players: 0, Capacity: 10}, false, &v1alpha1.GameServerPlayers{Capacity: 10, Pending: 4, PendingUntil: &later}},
		{"match ended", held, &netcode.LifecycleStatus{Players: 1, Capacity: 10}, true, &v1alpha1.GameServerPlayers{Connected: 1, Capacity: 10}},
		{"held room expired", &v1alpha1.GameServerPlayers{Capacity: 10, Pending: 4, PendingUntil: &past}, nil, false, &v1alpha1.GameServerPlayers{Capacity: 10}},
	} {
		got := playersStatus(tc.prev, tc.obs, tc.ended, now)
		if (got == nil) != (tc.want == nil) || got != nil && (got.Connected != tc.want.Connected || got.Capacity != tc.want.Capacity ||
			got.Pending != tc.want.Pending || (got.PendingUntil == nil) != (tc.want.PendingUntil == nil)) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestEligible(t *testing.T) {
	gs := func(state v1alpha1.GameServerState, p *v1alpha1.GameServerPlayers) *v1alpha1.GameServer {
		return &v1alpha1.GameServer{Status: v1alpha1.GameServerStatus{State: state, Players: p}}
	}
	room := &v1alpha1.GameServerPlayers{Connected: 3, Capacity: 10, Pending: 2} // 5 free
	for _, tc := range []struct {
		name string
		gs   *v1alpha1.GameServer
		want int32 // largest request served, -1 none
	}{
		{"ready, no capacity", gs(v1alpha1.GameServerStateReady, nil), 10000},
		{"ready with room", gs(v1alpha1.GameServerStateReady, room), 5},
		{"allocated with room", gs(v1alpha1.GameServerStateAllocated, room), 5},
		{"allocated, no capacity", gs(v1alpha1.GameServerStateAllocated, nil), -1},
		{"allocated, full", gs(v1alpha1.GameServerStateAllocated, &v1alpha1.GameServerPlayers{Connected: 10, Capacity: 10}), -1},
		{"reserved", gs(v1alpha1.GameServerStateReserved, room), -1},
	} {
		for _, n := range []int32{0, 1, 5, 6, 10000} {
			want := n <= tc.want
			if n == 0 && tc.gs.Status.State == v1alpha1.GameServerStateAllocated {
				want = false // a request without room never takes an Allocated server
			}
			if got := eligible(tc.gs, n); got != want {
				t.Errorf("%s: eligible for %d = %v, want %v", tc.name, n, got, want)
			}
		}
	}
}
