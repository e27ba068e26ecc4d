package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/connecttoken"
	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

// TestPlanConnectKeys walks a fleet's keys through a rotation, by the policy alone: the first key
// signs at once; a rotation adds a key that signs only after Propagation, the old one signing
// until then; the old key is dropped once no token it signed can be valid; never more than two.
func TestPlanConnectKeys(t *testing.T) {
	o := ConnectKeyOptions{RotationPeriod: 3 * time.Hour, Propagation: time.Minute}
	o.setDefaults()
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	made := 0
	newKey := func(now time.Time) func(uint32) (storedConnectKey, error) {
		return func(id uint32) (storedConnectKey, error) {
			made++
			return storedConnectKey{ConnectKey: netcode.ConnectKey{ID: id, Secret: []byte(strings.Repeat(string(rune('a'+id)), connecttoken.KeyBytes))}, Created: now}, nil
		}
	}
	step := func(keys []storedConnectKey, now time.Time) ([]storedConnectKey, uint32, bool) {
		t.Helper()
		out, signer, changed, err := planConnectKeys(keys, now, o, newKey(now))
		if err != nil {
			t.Fatal(err)
		}
		return out, signer.ID, changed
	}
	ids := func(keys []storedConnectKey) []uint32 {
		var out []uint32
		for _, k := range keys {
			out = append(out, k.ID)
		}
		return out
	}

	keys, signer, changed := step(nil, t0)
	if !changed || signer != 1 || !slices.Equal(ids(keys), []uint32{1}) {
		t.Fatalf("first: %v signed by %d (changed %v)", ids(keys), signer, changed)
	}
	if _, signer, changed = step(keys, t0.Add(179*time.Minute)); changed || signer != 1 {
		t.Fatalf("within the period: signer %d, changed %v", signer, changed)
	}
	// The period is over: key 2 is added, key 1 signs on while key 2 propagates.
	rot := t0.Add(3 * time.Hour)
	keys, signer, changed = step(keys, rot)
	if !changed || signer != 1 || !slices.Equal(ids(keys), []uint32{2, 1}) {
		t.Fatalf("rotation: %v signed by %d (changed %v)", ids(keys), signer, changed)
	}
	if _, signer, _ = step(keys, rot.Add(59*time.Second)); signer != 1 {
		t.Fatalf("while key 2 propagates: signer %d", signer)
	}
	if _, signer, changed = step(keys, rot.Add(time.Minute)); signer != 2 || changed {
		t.Fatalf("after propagation: signer %d, changed %v", signer, changed)
	}
	// Key 1 is kept while a token it signed may still be valid, then dropped.
	if k, _, changed := step(keys, rot.Add(time.Minute+maxTokenTTL+time.Minute-time.Second)); changed || len(k) != 2 {
		t.Fatalf("before the old key's last token expired: %v", ids(k))
	}
	keys, signer, changed = step(keys, rot.Add(time.Minute+maxTokenTTL+time.Minute))
	if !changed || signer != 2 || !slices.Equal(ids(keys), []uint32{2}) {
		t.Fatalf("retired: %v signed by %d", ids(keys), signer)
	}
	// A rotation that comes while two keys are held drops the oldest.
	three, _, _ := step([]storedConnectKey{{ConnectKey: netcode.ConnectKey{ID: 5}, Created: t0}, {ConnectKey: netcode.ConnectKey{ID: 4}, Created: t0.Add(-time.Hour)}}, t0.Add(3*time.Hour))
	if !slices.Equal(ids(three), []uint32{6, 5}) {
		t.Fatalf("a third key: %v", ids(three))
	}
	if made != 3 {
		t.Errorf("%d keys made, want 3", made)
	}
}

// connectKeysOf reads the keys the operator keeps for a fleet.
func connectKeysOf(t *testing.T, ns, fleet string) []netcode.ConnectKey {
	t.Helper()
	var sec corev1.Secret
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: ConnectKeysSecretName}, &sec); err != nil {
		t.Fatal(err)
	}
	var keys []netcode.ConnectKey
	if err := json.Unmarshal(sec.Data["fleet."+fleet], &keys); err != nil {
		t.Fatalf("secret %s: %v", ConnectKeysSecretName, err)
	}
	return keys
}

// verifierFor is a token verifier with keys, the server at st's address and the allocation uid.
func verifierFor(t *testing.T, keys []netcode.ConnectKey, st v1alpha1.GameServerAllocationStatus, uid string) *connecttoken.Verifier {
	t.Helper()
	var tks []connecttoken.Key
	for _, k := range keys {
		tks = append(tks, connecttoken.Key{ID: k.ID, Secret: [connecttoken.KeyBytes]byte(k.Secret)})
	}
	ks, err := connecttoken.NewKeys(tks)
	if err != nil {
		t.Fatal(err)
	}
	v := connecttoken.NewVerifier(0)
	v.SetKeys(ks)
	v.SetServer(netip.MustParseAddrPort(net.JoinHostPort(st.Address, strconv.Itoa(int(st.Port)))))
	v.SetAllocations(uid)
	return v
}

// TestConnectTokensAtAllocation: a fleet that requires connect tokens gets its keys (made by the
// operator in the namespace's Secret) pushed to each server before its config, which the status
// records; an allocation naming players answers one token per player, bound to the server's
// address and port, the allocation's uid and the player, good for the fleet's ttlSeconds — through
// the resource and through the allocator endpoint alike; and the API server refuses a players
// list that is not one, naming the field.
func TestConnectTokensAtAllocation(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	f := newFleet(ns, "tokens", 2)
	f.Spec.Template.Spec.Netcode.ConnectTokens = netcode.ConnectTokensConfig{Mode: netcode.ConnectTokensRequired, TTLSeconds: 45}
	_, servers := createReadyFleet(t, f)
	for _, gs := range servers {
		if got := gs.Status.Netcode.ConnectKeyIDs; !slices.Equal(got, []int64{1}) {
			t.Errorf("%s: status.netcode.connectKeyIds %v, want [1]", gs.Name, got)
		}
	}
	keys := connectKeysOf(t, ns, "tokens")
	if len(keys) != 1 || keys[0].ID != 1 || len(keys[0].Secret) != connecttoken.KeyBytes {
		t.Fatalf("the fleet's keys: %+v", keys)
	}

	a := &v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "match-1"},
		Spec: v1alpha1.GameServerAllocationSpec{Fleet: "tokens", Players: []string{"alice", "bob"}}}
	if err := k8s.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	st := waitAllocation(t, a)
	if st.State != v1alpha1.AllocationAllocated || len(st.ConnectTokens) != 2 || st.ConnectTokensExpire == nil {
		t.Fatalf("allocation: %+v", st)
	}
	if exp := st.ConnectTokensExpire.Time; exp.Before(before.Add(40*time.Second)) || exp.After(time.Now().Add(46*time.Second)) {
		t.Errorf("tokens expire at %v, want about 45 s after %v", exp, before)
	}
	v := verifierFor(t, keys, st, string(a.UID))
	from := netip.MustParseAddrPort("192.0.2.10:40000")
	for i, want := range []string{"alice", "bob"} {
		ct := st.ConnectTokens[i]
		id, why := v.Verify(ct.Token, from, time.Now())
		if ct.Player != want || why != connecttoken.OK || string(id) != want {
			t.Errorf("token %d: player %q, verified %v as %q", i, ct.Player, why, id)
		}
	}
	// The same tokens are refused by a server of another allocation.
	if _, why := verifierFor(t, keys, st, "another").Verify(st.ConnectTokens[0].Token, from, time.Now()); why != connecttoken.WrongAllocation {
		t.Errorf("a token checked by another allocation's server: %v", why)
	}

	// The allocator endpoint: the allocation's uid is made there and answered in metadata.uid,
	// and the server is marked with it.
	body, err := json.Marshal(v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns},
		Spec: v1alpha1.GameServerAllocationSpec{Fleet: "tokens", Players: []string{"carol"}}})
	if err != nil {
		t.Fatal(err)
	}
	code, raw := postAllocation(t, allocatorToken(t), body)
	var out v1alpha1.GameServerAllocation
	if err := json.Unmarshal(raw, &out); err != nil || code != http.StatusOK || out.UID == "" || len(out.Status.ConnectTokens) != 1 {
		t.Fatalf("endpoint: %d %s", code, raw)
	}
	if id, why := verifierFor(t, keys, out.Status, string(out.UID)).Verify(out.Status.ConnectTokens[0].Token, from, time.Now()); why != connecttoken.OK || string(id) != "carol" {
		t.Errorf("the endpoint's token: %v %q", why, id)
	}
	var gs v1alpha1.GameServer
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: out.Status.GameServerName}, &gs); err != nil || gs.Status.AllocatedBy != string(out.UID) {
		t.Errorf("%s: status.allocatedBy %q, want the answer's uid %q (%v)", gs.Name, gs.Status.AllocatedBy, out.UID, err)
	}

	many := make([]string, 257)
	for i := range many {
		many[i] = fmt.Sprint("p", i)
	}
	for name, players := range map[string][]string{
		"257 players":    many,
		"a player twice": {"dave", "dave"},
		"an empty id":    {""},
		"a 65-byte id":   {strings.Repeat("x", 65)},
	} {
		bad := &v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "bad-"},
			Spec: v1alpha1.GameServerAllocationSpec{Fleet: "tokens", Players: players}}
		err := k8s.Create(ctx, bad)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.players") {
			t.Errorf("%s: %v, want Invalid naming spec.players", name, err)
		}
		// The endpoint, which the API server does not see, refuses the same with 422.
		body, err := json.Marshal(v1alpha1.GameServerAllocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns}, Spec: bad.Spec})
		if err != nil {
			t.Fatal(err)
		}
		code, raw := postAllocation(t, allocatorToken(t), body)
		var out v1alpha1.GameServerAllocation
		if err := json.Unmarshal(raw, &out); err != nil || code != http.StatusUnprocessableEntity ||
			out.Status.Reason != v1alpha1.AllocationReasonInvalid || !strings.Contains(out.Status.Message, "spec.players") {
			t.Errorf("%s at the endpoint: %d %s", name, code, raw)
		}
	}
}

// TestConnectKeyStoreRotation runs the store against the API server on a clock of the test's: it
// creates the namespace's Secret with a fleet's first key, adds the next key when the period is
// over while the old one still signs, signs with the new one after propagation, drops the old
// one once its tokens cannot be valid, and keeps each fleet's keys apart.
func TestConnectKeyStoreRotation(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	s := NewConnectKeyStore(k8s, k8s, ConnectKeyOptions{RotationPeriod: 2 * time.Hour, Propagation: time.Minute, CacheTTL: time.Nanosecond})
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	get := func(group string) ConnectKeys {
		t.Helper()
		k, err := s.Get(ctx, ns, group)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	stored := func() []int64 {
		t.Helper()
		keys := ConnectKeys{All: connectKeysOf(t, ns, "a")}
		return keys.IDs()
	}
	first := get("fleet.a")
	if !slices.Equal(first.IDs(), []int64{1}) || first.Signer.ID != 1 || !slices.Equal(stored(), []int64{1}) {
		t.Fatalf("first: %v signed by %d, stored %v", first.IDs(), first.Signer.ID, stored())
	}
	if other := get("fleet.b"); other.Signer.Secret == first.Signer.Secret {
		t.Fatal("two fleets share a key")
	}
	now = now.Add(2 * time.Hour)
	rot := get("fleet.a")
	if !slices.Equal(rot.IDs(), []int64{2, 1}) || rot.Signer.ID != 1 || !slices.Equal(stored(), []int64{2, 1}) {
		t.Fatalf("rotation: %v signed by %d, stored %v", rot.IDs(), rot.Signer.ID, stored())
	}
	now = now.Add(time.Minute)
	if k := get("fleet.a"); k.Signer.ID != 2 || k.Signer.Secret == first.Signer.Secret {
		t.Fatalf("after propagation: signed by %d", k.Signer.ID)
	}
	now = now.Add(maxTokenTTL + time.Minute)
	if k := get("fleet.a"); !slices.Equal(k.IDs(), []int64{2}) || !slices.Equal(stored(), []int64{2}) {
		t.Fatalf("retired: %v, stored %v", k.IDs(), stored())
	}
}
