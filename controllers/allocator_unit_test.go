package controllers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/netfleet/netfleet/api/v1alpha1"
)

// TestReadyIndex feeds the allocator's index informer events and checks the candidates it
// proposes: Ready servers only, of the namespace, matching the selector, packed by node and
// newest first.
func TestReadyIndex(t *testing.T) {
	gs := func(name, node string, state v1alpha1.GameServerState, age int, deleting bool) *v1alpha1.GameServer {
		g := &v1alpha1.GameServer{ObjectMeta: metav1.ObjectMeta{
			Namespace: "games", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"map": "dust"},
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Second)),
		}}
		g.Status.State, g.Status.NodeName = state, node
		if deleting {
			now := metav1.NewTime(t0)
			g.DeletionTimestamp = &now
		}
		return g
	}
	x := newReadyIndex()
	x.synced = func() bool { return true }
	bBusy := gs("b-busy", "b", stReady, 1, false)
	cFree := gs("c-free", "c", stReady, 8, false)
	other := gs("elsewhere", "a", stReady, 1, false)
	other.Namespace = "other"
	mirage := gs("a-mirage", "a", stReady, 9, false)
	mirage.Labels = map[string]string{"map": "mirage"}
	for _, g := range []*v1alpha1.GameServer{
		gs("a-old", "a", stReady, 1, false), gs("a-new", "a", stReady, 5, false), bBusy, gs("b-free", "b", stReady, 2, false),
		gs("c-starting", "c", stStarting, 9, false), gs("c-gone", "c", stReady, 9, true), gs("d-tie-y", "d", stReady, 3, false),
		gs("d-tie-x", "d", stReady, 3, false), cFree, other, mirage,
	} {
		x.OnAdd(g, true)
	}
	// b-busy gets a match: node b now runs one, so its free server goes first.
	busy := bBusy.DeepCopy()
	busy.Status.State = stAllocated
	x.OnUpdate(bBusy, busy)
	// c-free goes away (its tombstone arrives): it is no candidate any more.
	x.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "games/c-free", Obj: cFree})

	sel, err := v1alpha1.GameServerAllocationSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"map": "dust"}}}.LabelSelector()
	if err != nil {
		t.Fatal(err)
	}
	got, err := x.candidates(t.Context(), "games", sel, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for g := got.Next(); g != nil; g = got.Next() {
		names = append(names, g.Name)
	}
	want := []string{"b-free", "a-new", "d-tie-x", "d-tie-y", "a-old"}
	if !slices.Equal(names, want) {
		t.Errorf("candidates %v, want %v", names, want)
	}
	if x.allocated["b"] != 1 || len(x.allocated) != 1 {
		t.Errorf("allocated per node %v", x.allocated)
	}
	// The match ends and the server is deleted: node b runs nothing.
	x.OnDelete(busy)
	if len(x.allocated) != 0 {
		t.Errorf("allocated per node %v after the delete", x.allocated)
	}
}

// TestCandidateQueueOrder: the queue hands out every candidate once, in the ranking's order,
// with many ties on node and age.
func TestCandidateQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 7, 64, 1000} {
		q := &candidateQueue{}
		for i := range n {
			gs := &v1alpha1.GameServer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gs-%03d-%04d", rng.IntN(100), i)}}
			q.h = append(q.h, candidate{gs: gs, packed: rng.IntN(3), created: int64(rng.IntN(4))})
		}
		want := slices.Clone(q.h)
		slices.SortFunc(want, func(c, d candidate) int {
			if c.before(&d) {
				return -1
			}
			return 1
		})
		q.init()
		if q.Len() != n {
			t.Fatalf("n=%d: Len %d", n, q.Len())
		}
		for i := range n {
			if got := q.Next(); got != want[i].gs {
				t.Fatalf("n=%d: candidate %d is %s, want %s", n, i, got.Name, want[i].gs.Name)
			}
		}
		if q.Next() != nil || q.Len() != 0 {
			t.Fatalf("n=%d: candidates left after all were handed out", n)
		}
	}
}

// TestReadyIndexWaitsForSync: no candidates are proposed before the informer has synced.
func TestReadyIndexWaitsForSync(t *testing.T) {
	x := newReadyIndex()
	x.synced = func() bool { return false }
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := x.candidates(ctx, "games", labels.Everything(), 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want the deadline", err)
	}
}

// TestAllocatorServerBeforeToken: until the token is loaded, every request is refused.
func TestAllocatorServerBeforeToken(t *testing.T) {
	s := NewAllocatorServer(nil, nil, nil, AllocatorServerOptions{})
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, AllocatePath, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer ")
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("answered %d, want 503", rec.Code)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/other", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("unknown path answered %d, want 404", rec.Code)
	}
}

// BenchmarkCandidates is the index's share of one allocation: from a request's selector to the
// first server to try, among n Ready servers of one fleet spread over 50 nodes, some of them
// running matches.
func BenchmarkCandidates(b *testing.B) {
	for _, n := range []int{500, 5000} {
		b.Run(fmt.Sprintf("ready=%d", n), func(b *testing.B) {
			x := newReadyIndex()
			x.synced = func() bool { return true }
			for i := range n {
				g := &v1alpha1.GameServer{ObjectMeta: metav1.ObjectMeta{
					Namespace: "games", Name: fmt.Sprintf("arena-%05d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
					Labels:            map[string]string{v1alpha1.LabelFleet: "arena", "mode": "ranked"},
					CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(i%97) * time.Second)),
				}}
				g.Status.State, g.Status.NodeName = stReady, fmt.Sprintf("node-%d", i%50)
				if i%10 == 0 {
					g.Status.State = stAllocated
				}
				x.OnAdd(g, true)
			}
			sel, err := v1alpha1.GameServerAllocationSpec{Fleet: "arena"}.LabelSelector()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				got, err := x.candidates(b.Context(), "games", sel, 0)
				if err != nil || got.Next() == nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestIdempotencyKeys(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"match-7f3a", true},
		{"a", true},
		{"with space and !~", true},
		{strings.Repeat("k", maxIdempotencyKey), true},
		{"", false},
		{strings.Repeat("k", maxIdempotencyKey+1), false},
		{"tab\there", false},
		{"newline\n", false},
		{"é", false},
	} {
		if err := validIdempotencyKey(tc.key); (err == nil) != tc.ok {
			t.Errorf("validIdempotencyKey(%q) = %v, want ok %v", tc.key, err, tc.ok)
		}
	}
	// Record names are valid object names and label values, one per key.
	a, ha := idempotencyRecordName("match-1")
	b, hb := idempotencyRecordName("match-2")
	if a == b || ha == hb {
		t.Errorf("two keys, one record name %s", a)
	}
	if errs := validation.IsDNS1123Subdomain(a); len(errs) > 0 {
		t.Errorf("record name %q: %v", a, errs)
	}
	if errs := validation.IsValidLabelValue(ha); len(errs) > 0 {
		t.Errorf("label value %q: %v", ha, errs)
	}
}
