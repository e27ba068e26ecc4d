//go:build linux

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/internal/botswarm"
)

// apiServerDown is how long the API server and etcd stay down in TestControlPlaneRestart.
const apiServerDown = time.Second

// TestControlPlaneRestart stops kube-apiserver and etcd while a Fleet serves ENet bots, keeps them
// down for apiServerDown and starts them again on the same data. The operator process and the
// game-server processes live through it (same pids, same instance ids); the bots keep receiving
// snapshots every second of it; a netcode edit made after the restart reaches every server.
func TestControlPlaneRestart(t *testing.T) {
	operator := ensureOperator(t)
	ns := newNamespace(t, "restart")
	obs := observe(t, ns)
	const fleet = "arena"
	createFleet(t, ns, fleet, 2)
	before := waitConverged(t, ns, fleet)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	swarm, err := botswarm.New(botswarm.Config{
		Server:   before[0].game,
		Classes:  []botswarm.Class{{Name: "players", Count: 2}},
		Duration: 5 * time.Minute, // ended by cancel
		Seed:     1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := swarm.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bots connected", waitLimit, func() (bool, error) {
		p := swarm.Progress()
		return p.States[botswarm.StateConnected] == 2, fmt.Errorf("bot states %v", p.States)
	})
	// A full second of play before the restart.
	time.Sleep(1500 * time.Millisecond)

	down := time.Now()
	restartCtx, cancelRestart := context.WithTimeout(ctx, waitLimit)
	defer cancelRestart()
	if err := env.plane.restart(restartCtx, apiServerDown, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Logf("API server and etcd back after %s", time.Since(down).Round(time.Millisecond))

	updateFleet(t, ns, fleet, func(f *v1alpha1.Fleet) { f.Spec.Template.Spec.Netcode.Congestion.MinSendHz = 20 })
	after := waitConverged(t, ns, fleet)
	converged := time.Now()
	t.Logf("the edit made after the restart runs on every server %s after the restart began", converged.Sub(down).Round(time.Millisecond))

	cancel()
	report := swarm.Wait()
	if proc, _ := env.operator.current(); proc != operator || operator.exited() {
		t.Errorf("the operator process did not live through the restart (%v)", operator.err)
	}
	was := byName(before)
	for _, s := range after {
		old, ok := was[s.gs.Name]
		switch {
		case !ok:
			t.Errorf("server %s is new: the fleet replaced a server", s.gs.Name)
		case s.pod.UID != old.pod.UID || s.gs.Status.Netcode.InstanceID != old.gs.Status.Netcode.InstanceID:
			t.Errorf("server %s has a new Pod or process", s.gs.Name)
		case s.gs.Spec.Netcode.Congestion.MinSendHz != 20:
			t.Errorf("server %s runs minSendHz %d", s.gs.Name, s.gs.Spec.Netcode.Congestion.MinSendHz)
		}
	}
	// Every second from the one before the restart to convergence had snapshots.
	start := report.Start
	from, to := int(down.Sub(start)/time.Second)-1, int(converged.Sub(start)/time.Second)
	for _, c := range report.Clients {
		if c.State != botswarm.StateDone {
			t.Errorf("bot %d ended %s (close code %d)", c.ID, c.State, c.CloseCode)
		}
		// Its first full second at the earliest: the one after the second it connected in (a
		// handshake finished within the run's first millisecond still leaves second 0 partial).
		for sec := max(from, int(c.ConnectedMs/1000)+1); sec < to && sec < len(c.Series); sec++ {
			if s := c.Series[sec]; !s.Full || s.Hz == 0 {
				t.Errorf("bot %d: second %d of the run (the restart began at %.1f s): %d snapshots, full %v",
					c.ID, sec, down.Sub(start).Seconds(), s.Hz, s.Full)
			}
		}
	}
	summary := botswarm.Summarize(report.Clients, from, to)
	t.Logf("bots across the restart (seconds %d-%d): median %.0f Hz, min %d Hz", from, to, summary.HzMedian, summary.HzMin)
	obs.check(t)
}
