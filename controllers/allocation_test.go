package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// allocatorToken returns the allocator endpoint's token from the Secret the operator created.
func allocatorToken(t testing.TB) string {
	t.Helper()
	var tok string
	waitFor(t, waitLong, "the allocator token secret", func() (bool, error) {
		var sec corev1.Secret
		err := k8s.Get(context.Background(), allocatorTokenSecret, &sec)
		tok = string(sec.Data[AllocatorTokenSecretKey])
		return err == nil && tok != "", err
	})
	return tok
}

// postAllocation sends body to the allocator endpoint with the given token and returns the
// answer's status code and body.
//
// A request that went out on a kept-alive connection and found it reset, or closed with no
// answer, is sent once more on a new one: that is a client reusing a connection as it is closed,
// which Go's transport retries by itself only for idempotent requests. A request the server had
// served before the connection went would show as a server Allocated with no answer naming it,
// which TestConcurrentAllocations checks.
func postAllocation(t testing.TB, token string, body []byte) (int, []byte) {
	t.Helper()
	code, _, raw := postAllocationTo(t, allocatorURL, token, nil, body)
	return code, raw
}

// postAllocationTo is postAllocation to the endpoint at url, with the headers hdr added, also
// returning the answer's headers.
func postAllocationTo(t testing.TB, url, token string, hdr http.Header, body []byte) (int, http.Header, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		var conn httptrace.GotConnInfo
		req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) { conn = ci }}))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			dropped := errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
			if conn.Reused && dropped && attempt == 1 {
				t.Logf("kept-alive connection (idle %v) dropped: %v; sending once more", conn.IdleTime, err)
				continue
			}
			t.Fatalf("%v (connection reused: %v, idle %v before)", err, conn.Reused, conn.IdleTime)
		}
		raw, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, raw
	}
}

// allocateHTTP allocates through the allocator endpoint and returns the result.
func allocateHTTP(t testing.TB, ns string, spec v1alpha1.GameServerAllocationSpec) v1alpha1.GameServerAllocationStatus {
	t.Helper()
	body, err := json.Marshal(v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns}, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	code, raw := postAllocation(t, allocatorToken(t), body)
	var out v1alpha1.GameServerAllocation
	if err := json.Unmarshal(raw, &out); err != nil || code != http.StatusOK {
		t.Fatalf("allocator answered %d %s (%v)", code, raw, err)
	}
	return out.Status
}

// waitAllocation waits until a GameServerAllocation has its result.
func waitAllocation(t testing.TB, a *v1alpha1.GameServerAllocation) v1alpha1.GameServerAllocationStatus {
	t.Helper()
	var got v1alpha1.GameServerAllocation
	waitFor(t, waitLong, "allocation "+a.Name, func() (bool, error) {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(a), &got)
		return err == nil && got.Status.State != "", err
	})
	return got.Status
}

// TestConcurrentAllocations races 50 allocations for a fleet of 30 Ready servers: exactly 30
// distinct servers are allocated and 20 requests are cleanly UnAllocated — through the resource,
// through the endpoint, and split between the endpoint and a second allocator with its own cache
// (another operator replica).
func TestConcurrentAllocations(t *testing.T) {
	const servers, requests = 30, 50
	tests := []struct {
		name string
		// allocate serves request i of fleet in ns.
		allocate func(t *testing.T, ns string, i int) v1alpha1.GameServerAllocationStatus
	}{
		{name: "resource", allocate: func(t *testing.T, ns string, i int) v1alpha1.GameServerAllocationStatus {
			a := &v1alpha1.GameServerAllocation{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("req-%02d", i)},
				Spec:       v1alpha1.GameServerAllocationSpec{Fleet: "race"},
			}
			if err := k8s.Create(context.Background(), a); err != nil {
				t.Error(err)
				return v1alpha1.GameServerAllocationStatus{}
			}
			return waitAllocation(t, a)
		}},
		{name: "endpoint", allocate: func(t *testing.T, ns string, _ int) v1alpha1.GameServerAllocationStatus {
			return allocateHTTP(t, ns, v1alpha1.GameServerAllocationSpec{Fleet: "race"})
		}},
		{name: "two-replicas", allocate: func(t *testing.T, ns string, i int) v1alpha1.GameServerAllocationStatus {
			if i%2 == 0 {
				return allocateHTTP(t, ns, v1alpha1.GameServerAllocationSpec{Fleet: "race"})
			}
			st, err := secondAllocator(t).Allocate(context.Background(), ns, v1alpha1.GameServerAllocationSpec{Fleet: "race"}, allocSourceHTTP)
			if err != nil {
				t.Error(err)
			}
			return st
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			f := newFleet(ns, "race", servers)
			_, ready := createReadyFleet(t, f)
			if tc.name == "two-replicas" {
				secondAllocator(t)
			}

			results := make([]v1alpha1.GameServerAllocationStatus, requests)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range requests {
				wg.Go(func() {
					<-start
					results[i] = tc.allocate(t, ns, i)
				})
			}
			close(start)
			wg.Wait()

			taken := map[string]int{}
			unallocated := 0
			for i, st := range results {
				switch st.State {
				case v1alpha1.AllocationAllocated:
					taken[st.GameServerName]++
					gs := ready[st.GameServerName]
					if gs == nil || st.Address != gs.Status.Address || st.Port != gs.Status.Port || st.Port == 0 || st.NodeName != testNode {
						t.Errorf("request %d: %+v does not name a Ready server of the fleet", i, st)
					}
				case v1alpha1.AllocationUnAllocated:
					unallocated++
					if st.Reason != v1alpha1.AllocationReasonNoReadyServer || st.GameServerName != "" || st.Message == "" {
						t.Errorf("request %d: %+v", i, st)
					}
				default:
					t.Errorf("request %d: no result %+v", i, st)
				}
			}
			for name, n := range taken {
				if n != 1 {
					t.Errorf("server %s allocated %d times", name, n)
				}
			}
			if len(taken) != servers || unallocated != requests-servers {
				t.Fatalf("%d servers allocated, %d UnAllocated; want %d and %d", len(taken), unallocated, servers, requests-servers)
			}
			// The API server agrees, and the fleet keeps them without adding servers.
			_, after := waitFleet(t, f, fleetCounts{replicas: servers, allocated: servers, updated: servers})
			for name := range taken {
				if after[name] == nil || after[name].Status.State != v1alpha1.GameServerStateAllocated {
					t.Errorf("server %s not Allocated in the API server", name)
				}
			}
		})
	}
}

var (
	secondOnce  sync.Once
	second      *Allocator
	secondError error
)

// secondAllocator is an Allocator with a cache of its own, as another operator replica has.
func secondAllocator(t *testing.T) *Allocator {
	t.Helper()
	secondOnce.Do(func() {
		c, err := cache.New(restCfg, cache.Options{Scheme: testScheme})
		if err != nil {
			secondError = err
			return
		}
		go func() {
			if err := c.Start(suiteCtx); err != nil {
				fmt.Println("second allocator cache:", err)
			}
		}()
		second, secondError = NewAllocator(suiteCtx, c, k8s, k8s)
		if secondError != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			secondError = fmt.Errorf("second allocator cache did not sync")
		}
	})
	if secondError != nil {
		t.Fatal(secondError)
	}
	return second
}

// TestAllocationUnAllocated asks for servers that do not exist or cannot be described: each
// request is UnAllocated with its reason, through the resource and the endpoint.
func TestAllocationUnAllocated(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	f := newFleet(ns, "small", 1)
	createReadyFleet(t, f)
	tests := []struct {
		name   string
		spec   v1alpha1.GameServerAllocationSpec
		reason string
	}{
		{name: "no such fleet", spec: v1alpha1.GameServerAllocationSpec{Fleet: "other"}, reason: v1alpha1.AllocationReasonNoReadyServer},
		{name: "no matching labels", spec: v1alpha1.GameServerAllocationSpec{Fleet: "small", Selector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"mode": "duel"},
		}}, reason: v1alpha1.AllocationReasonNoReadyServer},
		{name: "invalid selector", spec: v1alpha1.GameServerAllocationSpec{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "mode", Operator: metav1.LabelSelectorOpIn}},
		}}, reason: v1alpha1.AllocationReasonInvalid},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("bad-%d", i)}, Spec: tc.spec}
			if err := k8s.Create(ctx, a); err != nil {
				t.Fatal(err)
			}
			if st := waitAllocation(t, a); st.State != v1alpha1.AllocationUnAllocated || st.Reason != tc.reason || st.Message == "" {
				t.Errorf("resource: %+v, want UnAllocated %s", st, tc.reason)
			}
			body, err := json.Marshal(v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns}, Spec: tc.spec})
			if err != nil {
				t.Fatal(err)
			}
			code, raw := postAllocation(t, allocatorToken(t), body)
			var out v1alpha1.GameServerAllocation
			if err := json.Unmarshal(raw, &out); err != nil || out.Status.State != v1alpha1.AllocationUnAllocated || out.Status.Reason != tc.reason {
				t.Errorf("endpoint: %d %s", code, raw)
			}
			if wantCode := map[bool]int{true: http.StatusUnprocessableEntity, false: http.StatusOK}[tc.reason == v1alpha1.AllocationReasonInvalid]; code != wantCode {
				t.Errorf("endpoint answered %d, want %d", code, wantCode)
			}
		})
	}
	// The one server is still Ready: nothing above took it.
	waitFleet(t, f, fleetCounts{replicas: 1, ready: 1, updated: 1})
}

// TestAllocationServedBeforeRecorded: a GameServerAllocation whose server was marked Allocated
// but whose result was never recorded — the state an operator that stopped between the two
// writes leaves — is answered with that server, found by status.allocatedBy, not with a second
// one. Allocations through the endpoint without a key have no record and are marked with a UID
// made up for them.
func TestAllocationServedBeforeRecorded(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	f := newFleet(ns, "crash", 3)
	createReadyFleet(t, f)
	a := &v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "match-1"}, Spec: v1alpha1.GameServerAllocationSpec{Fleet: "crash"}}
	if err := k8s.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	first := waitAllocation(t, a)
	if first.State != v1alpha1.AllocationAllocated {
		t.Fatalf("allocation: %+v", first)
	}
	var gs v1alpha1.GameServer
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: first.GameServerName}, &gs); err != nil {
		t.Fatal(err)
	}
	if gs.Status.AllocatedBy != string(a.UID) {
		t.Fatalf("%s: status.allocatedBy %q, want the allocation's UID %q", gs.Name, gs.Status.AllocatedBy, a.UID)
	}
	// The result is lost; the server stays marked.
	if err := k8s.Status().Patch(ctx, a, client.RawPatch(types.MergePatchType, []byte(`{"status":null}`))); err != nil {
		t.Fatal(err)
	}
	if again := waitAllocation(t, a); again != first {
		t.Fatalf("served again as %+v, want the first result %+v", again, first)
	}
	waitFleet(t, f, fleetCounts{replicas: 3, ready: 2, allocated: 1, updated: 3})

	st := allocateHTTP(t, ns, v1alpha1.GameServerAllocationSpec{Fleet: "crash"})
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: st.GameServerName}, &gs); err != nil {
		t.Fatal(err)
	}
	if gs.Status.State != v1alpha1.GameServerStateAllocated || gs.Status.AllocatedBy == "" || gs.Status.AllocatedBy == string(a.UID) {
		t.Fatalf("%s after an allocation without a record: state %s, allocatedBy %q", gs.Name, gs.Status.State, gs.Status.AllocatedBy)
	}
}

// TestAllocatorEndpointRefuses sends requests the endpoint must refuse before allocating.
func TestAllocatorEndpointRefuses(t *testing.T) {
	token := allocatorToken(t)
	tests := []struct {
		name   string
		method string
		token  string
		body   string
		code   int
		errSub string
	}{
		{name: "no token", method: http.MethodPost, body: `{}`, code: http.StatusUnauthorized},
		{name: "wrong token", method: http.MethodPost, token: token + "x", body: `{}`, code: http.StatusUnauthorized},
		{name: "GET", method: http.MethodGet, token: token, code: http.StatusMethodNotAllowed},
		{name: "not JSON", method: http.MethodPost, token: token, body: `spec: {}`, code: http.StatusBadRequest, errSub: "decode"},
		{name: "unknown field", method: http.MethodPost, token: token, body: `{"spec":{"fleet":"a","selecter":{}}}`, code: http.StatusBadRequest, errSub: "selecter"},
		{name: "wrong kind", method: http.MethodPost, token: token, body: `{"kind":"GameServer"}`, code: http.StatusBadRequest, errSub: "kind"},
		{name: "bad namespace", method: http.MethodPost, token: token, body: `{"metadata":{"namespace":"Not_A_Namespace"}}`, code: http.StatusBadRequest, errSub: "metadata.namespace"},
		{name: "two values", method: http.MethodPost, token: token, body: `{} {}`, code: http.StatusBadRequest, errSub: "more than one"},
		{name: "too big", method: http.MethodPost, token: token, body: `{"metadata":{"name":"` + strings.Repeat("a", maxAllocateBody) + `"}}`, code: http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(context.Background(), tc.method, allocatorURL, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			var body allocatorError
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.code || body.Error == "" || !strings.Contains(body.Error, tc.errSub) {
				t.Errorf("answered %d %q, want %d naming %q", resp.StatusCode, body.Error, tc.code, tc.errSub)
			}
			if strings.Contains(body.Error, token) {
				t.Errorf("the answer holds the token")
			}
		})
	}
}

// invalidFleets are Fleets the API server must refuse, each with the field its error names.
var invalidFleets = []struct {
	name  string
	field string
	edit  func(f *v1alpha1.Fleet)
}{
	{name: "negative replicas", field: "spec.replicas", edit: func(f *v1alpha1.Fleet) { f.Spec.Replicas = -1 }},
	{name: "too many replicas", field: "spec.replicas", edit: func(f *v1alpha1.Fleet) { f.Spec.Replicas = 10001 }},
	{name: "unknown strategy", field: "spec.strategy.type", edit: func(f *v1alpha1.Fleet) { f.Spec.Strategy.Type = "BlueGreen" }},
	{name: "rollingUpdate with Recreate", field: "spec.strategy.rollingUpdate", edit: func(f *v1alpha1.Fleet) {
		f.Spec.Strategy = v1alpha1.FleetStrategy{Type: v1alpha1.FleetStrategyRecreate, RollingUpdate: &v1alpha1.RollingUpdateFleetStrategy{}}
	}},
	{name: "maxSurge not a number", field: "spec.strategy.rollingUpdate.maxSurge", edit: func(f *v1alpha1.Fleet) {
		f.Spec.Strategy.RollingUpdate = &v1alpha1.RollingUpdateFleetStrategy{MaxSurge: ptrIntStr("lots")}
	}},
	{name: "maxUnavailable over 100%", field: "spec.strategy.rollingUpdate.maxUnavailable", edit: func(f *v1alpha1.Fleet) {
		f.Spec.Strategy.RollingUpdate = &v1alpha1.RollingUpdateFleetStrategy{MaxUnavailable: ptrIntStr("150%")}
	}},
	{name: "maxUnavailable negative", field: "spec.strategy.rollingUpdate.maxUnavailable", edit: func(f *v1alpha1.Fleet) {
		f.Spec.Strategy.RollingUpdate = &v1alpha1.RollingUpdateFleetStrategy{MaxUnavailable: ptrIntNum(-1)}
	}},
	{name: "both bounds zero", field: "spec.strategy.rollingUpdate.maxUnavailable", edit: func(f *v1alpha1.Fleet) {
		f.Spec.Strategy.RollingUpdate = &v1alpha1.RollingUpdateFleetStrategy{MaxSurge: ptrIntStr("0%"), MaxUnavailable: ptrIntNum(0)}
	}},
	{name: "name too long for a label", field: "metadata.name", edit: func(f *v1alpha1.Fleet) { f.Name = strings.Repeat("f", 64) }},
	{name: "template without ports", field: "spec.template.spec.ports", edit: func(f *v1alpha1.Fleet) { f.Spec.Template.Spec.Ports = []v1alpha1.GameServerPort{} }},
	{name: "template netcode out of range", field: "spec.template.spec.netcode.tickRateHz", edit: func(f *v1alpha1.Fleet) {
		f.Spec.Template.Spec.Netcode.TickRateHz = 200
	}},
	{name: "template minSendHz above tickRateHz", field: "spec.template.spec.netcode.congestion.minSendHz", edit: func(f *v1alpha1.Fleet) {
		f.Spec.Template.Spec.Netcode.TickRateHz, f.Spec.Template.Spec.Netcode.Congestion.MinSendHz = 30, 40
	}},
}

// TestFleetCRDValidation creates each invalid Fleet on the real API server: each is refused with
// the offending field named. A valid Fleet may change what a GameServer may not (its ports), and
// a GameServerAllocation cannot change at all.
func TestFleetCRDValidation(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	for i, tc := range invalidFleets {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(ns, fmt.Sprintf("bad-%d", i), 0)
			tc.edit(f)
			err := k8s.Create(ctx, f)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("got %v, want Invalid naming %s", err, tc.field)
			}
		})
	}

	f := newFleet(ns, "editable", 0)
	if err := k8s.Create(ctx, f); err != nil {
		t.Fatal(err)
	}
	got := getFleet(t, f)
	if got.Spec.Strategy.Type != v1alpha1.FleetStrategyRollingUpdate {
		t.Errorf("strategy not defaulted: %+v", got.Spec.Strategy)
	}
	editFleet(t, f, func(f *v1alpha1.Fleet) {
		f.Spec.Template.Spec.Ports[0].ContainerPort = 7000
		f.Spec.Template.Spec.AdminPort = 9100
	})

	a := &v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fixed"}, Spec: v1alpha1.GameServerAllocationSpec{Fleet: "editable"}}
	if err := k8s.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
			return err
		}
		a.Spec.Fleet = "other"
		return k8s.Update(ctx, a)
	})
	if err == nil || !strings.Contains(err.Error(), "spec is immutable") {
		t.Errorf("allocation spec edit: %v", err)
	}
	bad := &v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-fleet"}, Spec: v1alpha1.GameServerAllocationSpec{Fleet: "Not_A_Name"}}
	if err := k8s.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "spec.fleet") {
		t.Errorf("allocation with a bad fleet name: %v", err)
	}
}

func ptrIntStr(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }

func ptrIntNum(n int32) *intstr.IntOrString { v := intstr.FromInt32(n); return &v }

// postKeyed sends an allocation request with an Idempotency-Key and returns the answer.
func postKeyed(t *testing.T, url, token, key string, body []byte) (int, http.Header, v1alpha1.GameServerAllocation, []byte) {
	t.Helper()
	code, hdr, raw := postAllocationTo(t, url, token, http.Header{IdempotencyKeyHeader: {key}}, body)
	var out v1alpha1.GameServerAllocation
	if code == http.StatusOK {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("answer %s: %v", raw, err)
		}
	}
	return code, hdr, out, raw
}

// TestAllocationIdempotencyKey: requests with one Idempotency-Key allocate one server however
// often and however concurrently they are sent, and all get its answer; the key cannot be reused
// for another request; its record expires after the TTL, and the key then allocates anew.
func TestAllocationIdempotencyKey(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	f := newFleet(ns, "keyed", 3)
	createReadyFleet(t, f)
	token := allocatorToken(t)
	body, err := json.Marshal(v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns}, Spec: v1alpha1.GameServerAllocationSpec{Fleet: f.Name}})
	if err != nil {
		t.Fatal(err)
	}

	replays0 := counterValue(t, allocationReplays)
	code, hdr, first, raw := postKeyed(t, allocatorURL, token, "match-1", body)
	if code != http.StatusOK || first.Status.State != v1alpha1.AllocationAllocated || hdr.Get(IdempotentReplayedHeader) != "" {
		t.Fatalf("first request: %d %s %v", code, raw, hdr)
	}
	code, hdr, again, raw := postKeyed(t, allocatorURL, token, "match-1", body)
	if code != http.StatusOK || again.Status != first.Status || hdr.Get(IdempotentReplayedHeader) != "true" {
		t.Fatalf("the same key again: %d %s %v, want the first answer %+v, replayed", code, raw, hdr, first.Status)
	}

	// The record of a key is a GameServerAllocation named after it, until the TTL.
	name, hash := idempotencyRecordName("match-1")
	rec := &v1alpha1.GameServerAllocation{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rec); err != nil {
		t.Fatal(err)
	}
	if rec.Labels[v1alpha1.LabelIdempotencyKey] != hash || rec.Annotations[v1alpha1.AnnotationIdempotencyKey] != "match-1" || rec.Status != first.Status {
		t.Errorf("record %s: labels %v annotations %v status %+v", name, rec.Labels, rec.Annotations, rec.Status)
	}
	if first.Name != name || first.UID != rec.UID || len(first.ManagedFields) != 0 {
		t.Errorf("the answer names record %s (uid %s, %d managed fields), want %s (uid %s) without managed fields",
			first.Name, first.UID, len(first.ManagedFields), name, rec.UID)
	}

	// Eight at once with a new key, as a matchmaker retrying over several connections would, half
	// of them to the endpoint of a second operator replica with its own allocator and cache.
	second := secondEndpoint(t)
	var wg sync.WaitGroup
	var answers [8]v1alpha1.GameServerAllocationStatus
	for i := range answers {
		url := map[bool]string{true: allocatorURL, false: second}[i%2 == 0]
		wg.Go(func() {
			if code, _, out, raw := postKeyed(t, url, token, "match-2", body); code != http.StatusOK {
				t.Errorf("concurrent request %d: %d %s", i, code, raw)
			} else {
				answers[i] = out.Status
			}
		})
	}
	wg.Wait()
	got := answers[0]
	for i, a := range answers {
		if a != got || a.State != v1alpha1.AllocationAllocated {
			t.Fatalf("concurrent answers differ: %d is %+v, 0 is %+v", i, a, got)
		}
	}
	if got.GameServerName == first.Status.GameServerName {
		t.Fatalf("two keys were given the same server %s", got.GameServerName)
	}
	// One repeat of match-1, seven of match-2 (the test's requests only: the suite runs one test
	// at a time).
	if n := counterValue(t, allocationReplays) - replays0; n != 8 {
		t.Errorf("netfleet_operator_allocation_replays_total rose by %v, want 8", n)
	}

	// A key names one request: another spec with it is refused, and a key must be printable.
	other, err := json.Marshal(v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns},
		Spec: v1alpha1.GameServerAllocationSpec{Fleet: f.Name, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"mode": "arena"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if code, _, _, raw := postKeyed(t, allocatorURL, token, "match-2", other); code != http.StatusUnprocessableEntity || !strings.Contains(string(raw), IdempotencyKeyHeader) {
		t.Errorf("the key with another spec: %d %s, want 422 naming the key", code, raw)
	}
	for _, bad := range []string{"", strings.Repeat("k", maxIdempotencyKey+1), "tab\there"} {
		if code, _, _, raw := postKeyed(t, allocatorURL, token, bad, body); code != http.StatusBadRequest || !strings.Contains(string(raw), IdempotencyKeyHeader) {
			t.Errorf("key %q: %d %s, want 400", bad, code, raw)
		}
	}
	waitFleet(t, f, fleetCounts{replicas: 3, ready: 1, allocated: 2, updated: 3})

	// After the TTL the record is gone, and the key allocates anew.
	waitFor(t, 4*testIdempotencyTTL, "the record of match-1 to expire", func() (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rec)
		return apierrors.IsNotFound(err), err
	})
	code, hdr, third, raw := postKeyed(t, allocatorURL, token, "match-1", body)
	if code != http.StatusOK || third.Status.State != v1alpha1.AllocationAllocated || hdr.Get(IdempotentReplayedHeader) != "" ||
		third.Status.GameServerName == first.Status.GameServerName || third.Status.GameServerName == got.GameServerName {
		t.Fatalf("the key after its record expired: %d %s %v, want a new server", code, raw, hdr)
	}
	waitFleet(t, f, fleetCounts{replicas: 3, allocated: 3, updated: 3})
}

// secondEndpoint serves the allocator endpoint of a second operator replica — secondAllocator,
// with its own cache — on a loopback port until the test ends, and returns its URL once it has
// loaded its token.
func secondEndpoint(t *testing.T) string {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewAllocatorServer(secondAllocator(t), k8s, k8s, AllocatorServerOptions{TokenSecret: allocatorTokenSecret})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("second endpoint: %v", err)
		}
	})
	url := "http://" + ln.Addr().String() + AllocatePath
	waitFor(t, waitLong, "the second endpoint to load its token", func() (bool, error) {
		resp, err := http.Post(url, "application/json", nil)
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusUnauthorized, fmt.Errorf("answered %d", resp.StatusCode)
	})
	return url
}
