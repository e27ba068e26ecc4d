package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/lifecycle"
)

func putAllocation(t *testing.T, url, token string, body []byte) (int, netcode.LifecycleStatus, netcode.ErrorResponse) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url+netcode.PathAllocation, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var st netcode.LifecycleStatus
	var er netcode.ErrorResponse
	if resp.StatusCode == http.StatusOK {
		err = json.NewDecoder(resp.Body).Decode(&st)
	} else {
		err = json.NewDecoder(resp.Body).Decode(&er)
	}
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, st, er
}

func getLifecycle(t *testing.T, url string) netcode.LifecycleStatus {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	var st netcode.LifecycleStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestAllocationDelivery(t *testing.T) {
	lc := lifecycle.New()
	var seen []netcode.Allocation
	lc.SetDeliver(func(_ context.Context, a netcode.Allocation) error { seen = append(seen, a); return nil })
	rt := &fakeRuntime{}
	rt.tick.Store(1)
	srv, ts := newTestServer(t, rt, Options{Lifecycle: lc})

	good, _ := json.Marshal(netcode.Allocation{Name: "match-1", UID: "u1", Labels: map[string]string{"mode": "ctf"}, Payload: `{"map":"dust"}`})
	if code, _, _ := putAllocation(t, ts.URL, "", good); code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", code)
	}
	code, st, er := putAllocation(t, ts.URL, testToken, good)
	if code != http.StatusOK || st.State != netcode.LifecycleAllocated || st.Allocation == nil || st.Allocation.UID != "u1" || st.InstanceID != srv.InstanceID() {
		t.Fatalf("deliver: %d %+v %+v", code, st, er)
	}
	if len(seen) != 1 || seen[0].Payload != `{"map":"dust"}` || seen[0].Labels["mode"] != "ctf" {
		t.Fatalf("the game saw %+v", seen)
	}
	// A retried delivery is acknowledged without a second event.
	if code, _, _ := putAllocation(t, ts.URL, testToken, good); code != http.StatusOK || len(seen) != 1 {
		t.Fatalf("redelivery: %d, %d events", code, len(seen))
	}

	for _, tc := range []struct {
		name  string
		body  []byte
		code  int
		field string
	}{
		{"payload over the limit", must(json.Marshal(netcode.Allocation{UID: "u2", Payload: strings.Repeat("x", netcode.MaxAllocationPayloadBytes+1)})), http.StatusUnprocessableEntity, "payload"},
		{"no uid", must(json.Marshal(netcode.Allocation{Name: "x"})), http.StatusUnprocessableEntity, "uid"},
		{"bad label", must(json.Marshal(netcode.Allocation{UID: "u2", Labels: map[string]string{"a b": "c"}})), http.StatusUnprocessableEntity, "labels"},
		{"unknown field", []byte(`{"uid":"u2","extra":1}`), http.StatusBadRequest, ""},
		{"two objects", []byte(`{"uid":"u2"}{}`), http.StatusBadRequest, ""},
	} {
		code, _, er := putAllocation(t, ts.URL, testToken, tc.body)
		if code != tc.code || er.Field != tc.field {
			t.Errorf("%s: %d field %q (%s), want %d field %q", tc.name, code, er.Field, er.Error, tc.code, tc.field)
		}
	}
	if len(seen) != 1 {
		t.Fatalf("a refused allocation reached the game: %+v", seen)
	}

	if err := lc.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if code, _, er := putAllocation(t, ts.URL, testToken, must(json.Marshal(netcode.Allocation{UID: "u3"}))); code != http.StatusConflict {
		t.Fatalf("after shutdown: %d %s", code, er.Error)
	}
	// The ended match's allocation, delivered again (an operator's retry), is gone.
	if code, _, er := putAllocation(t, ts.URL, testToken, good); code != http.StatusGone || len(seen) != 1 {
		t.Fatalf("redelivery after the match: %d %s, %d events", code, er.Error, len(seen))
	}
}

func TestAllocationNotTakenInTime(t *testing.T) {
	lc := lifecycle.New()
	lc.SetDeliver(func(ctx context.Context, _ netcode.Allocation) error { <-ctx.Done(); return ctx.Err() })
	rt := &fakeRuntime{}
	_, ts := newTestServer(t, rt, Options{Lifecycle: lc, ApplyTimeout: 20 * time.Millisecond})
	code, _, _ := putAllocation(t, ts.URL, testToken, must(json.Marshal(netcode.Allocation{UID: "u1"})))
	if code != http.StatusServiceUnavailable {
		t.Fatalf("code %d", code)
	}
	if st := lc.Status(); st.State != netcode.LifecycleReady {
		t.Fatalf("state %s", st.State)
	}
}

func TestLifecycleLongPoll(t *testing.T) {
	lc := lifecycle.New()
	rt := &fakeRuntime{}
	rt.tick.Store(1)
	_, ts := newTestServer(t, rt, Options{Lifecycle: lc})
	st := getLifecycle(t, ts.URL+netcode.PathLifecycle)
	if st.State != netcode.LifecycleReady || !st.Healthy {
		t.Fatalf("%+v", st)
	}
	// Unchanged: the poll answers after waitMillis with the same version.
	if again := getLifecycle(t, ts.URL+netcode.PathLifecycle+"?since="+u64(st.Version)+"&waitMillis=20"); again.Version != st.Version {
		t.Fatalf("version moved without a change: %d -> %d", st.Version, again.Version)
	}
	done := make(chan netcode.LifecycleStatus, 1)
	go func() {
		done <- getLifecycle(t, ts.URL+netcode.PathLifecycle+"?since="+u64(st.Version)+"&waitMillis=30000")
	}()
	time.Sleep(20 * time.Millisecond)
	if err := lc.SetCapacity(8); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if got.Capacity != 8 || got.Version == st.Version {
			t.Fatalf("%+v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll did not answer the change")
	}
	for _, q := range []string{"?since=x", "?since=1&waitMillis=-1", "?since=1&waitMillis=600000"} {
		resp, err := http.Get(ts.URL + netcode.PathLifecycle + q)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %s", q, resp.Status)
		}
	}
}

func TestHealthFailsWhenTheTickLoopStalls(t *testing.T) {
	rt := &fakeRuntime{}
	srv, _ := newTestServer(t, rt, Options{Lifecycle: lifecycle.New(), StallAfter: 20 * time.Millisecond})
	if err := srv.Healthy(); err != nil {
		t.Fatal("a starting server is unhealthy:", err)
	}
	rt.tick.Store(5)
	if err := srv.Healthy(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(40 * time.Millisecond)
	if err := srv.Healthy(); err == nil {
		t.Fatal("a stalled tick loop is healthy")
	}
	rt.tick.Store(6)
	if err := srv.Healthy(); err != nil {
		t.Fatal("an advancing tick loop is unhealthy:", err)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func u64(v uint64) string { return strings.TrimSpace(string(must(json.Marshal(v)))) }
