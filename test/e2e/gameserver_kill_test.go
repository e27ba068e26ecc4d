//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

// rePushLimit is the promise: the operator pushes the current config into a restarted process
// within this long of the new process's admin API answering.
const rePushLimit = 2 * time.Second

// TestGameServerProcessKilled SIGKILLs game-server processes, Ready and Allocated ones, several
// times each (so the pod runner's restart back-off grows as for a crash-looping container). Every
// time, the pod runner starts a new process, the operator notices the new instance and pushes the
// current config within rePushLimit of the new process's admin API answering, and the status
// shows the new process running the current generation (an Allocated server stays Allocated).
// A deleted Pod ends its server, and the Fleet replaces it with a new server and Pod.
func TestGameServerProcessKilled(t *testing.T) {
	ensureOperator(t)
	ns := newNamespace(t, "kill")
	obs := observe(t, ns)
	const fleet = "arena"
	createFleet(t, ns, fleet, 2)
	waitConverged(t, ns, fleet)
	// What the operator must push again is not the first config a process gets.
	updateFleet(t, ns, fleet, func(f *v1alpha1.Fleet) { f.Spec.Template.Spec.Netcode.Congestion.MinSendHz = 15 })
	waitConverged(t, ns, fleet)
	match := allocate(t, ns, fleet)
	var ready string
	for _, s := range waitConverged(t, ns, fleet) {
		if s.gs.Name != match {
			ready = s.gs.Name
		}
	}

	var delays []time.Duration
	for _, name := range []string{ready, match, ready, match, ready} {
		delays = append(delays, killProcess(t, ns, fleet, name))
	}
	// A crash loop: killed as soon as it answers, again and again, the process is restarted after
	// ever longer back-offs (250 ms doubling); the operator's retries meanwhile must not delay
	// the push once a process is back.
	crashLoop(t, ns, fleet, ready, 4)
	waitConverged(t, ns, fleet)
	delays = append(delays, killProcess(t, ns, fleet, ready))

	sorted := slices.Clone(delays)
	slices.Sort(sorted)
	t.Logf("config pushed to the new process after its admin API answered: %v (median %s, max %s)",
		delays, sorted[len(sorted)/2], sorted[len(sorted)-1])
	for i, d := range delays {
		if d > rePushLimit {
			t.Errorf("kill %d: the new process got its config %s after it answered, over %s", i+1, d, rePushLimit)
		}
	}

	// A deleted Pod: the server is over, and the Fleet puts a new server with a new Pod in its place.
	victim := byName(waitConverged(t, ns, fleet))[ready]
	if err := env.k8s.Delete(context.Background(), &victim.pod); err != nil {
		t.Fatal(err)
	}
	servers := waitConverged(t, ns, fleet)
	names := map[string]bool{}
	for _, s := range servers {
		names[s.gs.Name] = true
		if s.gs.Name == ready || s.pod.UID == victim.pod.UID {
			t.Errorf("server %s (pod %s) still counts after its Pod was deleted", s.gs.Name, s.pod.UID)
		}
	}
	if !names[match] || len(names) != 2 {
		t.Errorf("servers after the Pod deletion: %v, want %s and a new one", names, match)
	}
	obs.check(t)
}

// killProcess SIGKILLs the game-server process of a fleet's server, watches its admin API from
// the moment of the kill, and returns how long after the new process first answered it ran the
// server's current generation. It then waits for the status to show the new process with it.
func killProcess(t *testing.T, ns, fleet, name string) time.Duration {
	t.Helper()
	s, ok := byName(mustServers(t, ns, fleet))[name]
	if !ok {
		t.Fatalf("no server %s", name)
	}
	pid, err := s.pid()
	if err != nil {
		t.Fatal(err)
	}
	oldID, gen := s.gs.Status.Netcode.InstanceID, s.gs.Generation
	want := s.gs.Spec.Netcode.Default().Hash()
	restarts := s.pod.Status.ContainerStatuses[0].RestartCount

	type result struct {
		up, applied time.Time
		id          string
		err         error
	}
	watched := make(chan result, 1)
	go func() {
		// Short timeouts: a dead process refuses at once, a starting one answers in milliseconds.
		c := &http.Client{Timeout: 500 * time.Millisecond}
		var r result
		for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			st, err := getStatus(c, s.admin)
			now := time.Now()
			if err != nil || st.InstanceID == oldID {
				continue
			}
			if r.up.IsZero() {
				r.up, r.id = now, st.InstanceID
			}
			if st.Generation == gen && st.Hash == want {
				r.applied = now
				watched <- r
				return
			}
		}
		r.err = fmt.Errorf("the new process of %s did not run generation %d within %s (first answered at %v)", name, gen, waitLimit, r.up)
		watched <- r
	}()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
	r := <-watched
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantState := v1alpha1.GameServerStateReady
	if s.gs.Status.State == v1alpha1.GameServerStateAllocated {
		wantState = v1alpha1.GameServerStateAllocated
	}
	waitFor(t, "the status showing "+name+"'s new process", waitLimit, func() (bool, error) {
		cur, ok := byName(mustServers(t, ns, fleet))[name]
		if !ok {
			return false, fmt.Errorf("%s is gone", name)
		}
		st, cs := cur.gs.Status, cur.pod.Status.ContainerStatuses[0]
		switch {
		case st.Netcode.InstanceID != r.id || st.Netcode.AppliedGeneration != gen || st.Netcode.AppliedHash != want:
			return false, fmt.Errorf("status.netcode %+v", st.Netcode)
		case st.State != wantState:
			return false, fmt.Errorf("state %q, want %q", st.State, wantState)
		case cs.RestartCount != restarts+1 || !cs.Ready:
			return false, fmt.Errorf("container restarts %d (want %d), ready %v", cs.RestartCount, restarts+1, cs.Ready)
		}
		return true, nil
	})
	return r.applied.Sub(r.up)
}

// crashLoop SIGKILLs a server's process n times, each new one as soon as its admin API answers.
func crashLoop(t *testing.T, ns, fleet, name string, n int) {
	t.Helper()
	s, ok := byName(mustServers(t, ns, fleet))[name]
	if !ok {
		t.Fatalf("no server %s", name)
	}
	pid, err := s.pid()
	if err != nil {
		t.Fatal(err)
	}
	id := s.gs.Status.Netcode.InstanceID
	c := &http.Client{Timeout: 500 * time.Millisecond}
	for i := range n {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", pid, err)
		}
		killed := pid
		waitFor(t, fmt.Sprintf("restart %d of the crash loop", i+1), waitLimit, func() (bool, error) {
			st, err := getStatus(c, s.admin)
			if err != nil || st.InstanceID == id {
				return false, fmt.Errorf("the old process or none answers (%w)", err)
			}
			cur, ok := byName(mustServers(t, ns, fleet))[name]
			if !ok {
				return false, fmt.Errorf("%s is gone", name)
			}
			if pid, err = cur.pid(); err != nil || pid == killed {
				return false, fmt.Errorf("the Pod does not show the new process yet (%w)", err)
			}
			id = st.InstanceID
			return true, nil
		})
	}
}

// mustServers is fleetServers failing the test on error.
func mustServers(t *testing.T, ns, fleet string) []server {
	t.Helper()
	servers, err := fleetServers(context.Background(), ns, fleet)
	if err != nil {
		t.Fatal(err)
	}
	return servers
}

// getStatus is GET /v1/netcode with the given client.
func getStatus(c *http.Client, admin string) (netcode.ConfigStatus, error) {
	var st netcode.ConfigStatus
	resp, err := c.Get("http://" + admin + netcode.PathNetcode)
	if err != nil {
		return st, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET %s: %s", admin, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}
