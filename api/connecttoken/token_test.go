package connecttoken

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

var (
	t0      = time.UnixMilli(1_800_000_000_000)
	server  = netip.MustParseAddrPort("10.0.0.7:7777")
	player1 = netip.MustParseAddrPort("192.0.2.1:50000")
	player2 = netip.MustParseAddrPort("192.0.2.2:50001")
	key1    = Key{ID: 1, Secret: [KeyBytes]byte{1, 2, 3}}
	key2    = Key{ID: 2, Secret: [KeyBytes]byte{9, 8, 7}}
)

func claims(player string) *Claims {
	return &Claims{Server: server, Allocation: "0d6c2a77-3f1b-4bb4-9a43-5b2b0f8a3a10", Player: player, Deadline: t0.Add(30 * time.Second)}
}

func issue(t testing.TB, k *Key, c *Claims) []byte {
	t.Helper()
	tok, err := Issue(nil, k, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func verifier(t testing.TB, keys ...Key) *Verifier {
	t.Helper()
	ks, err := NewKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(0)
	v.SetKeys(ks)
	v.SetServer(server)
	v.SetAllocations(claims("x").Allocation)
	return v
}

func TestIssueVerify(t *testing.T) {
	v := verifier(t, key1)
	tok := issue(t, &key1, claims("player-1"))
	if len(tok) != headerBytes+len("player-1")+MACBytes {
		t.Fatalf("token of %d bytes", len(tok))
	}
	id, why := v.Verify(tok, player1, t0)
	if why != OK || string(id) != "player-1" {
		t.Fatalf("Verify = %q, %v", id, why)
	}
	// The same token from the same address again: a reconnect.
	if _, why := v.Verify(tok, player1, t0.Add(time.Second)); why != OK {
		t.Fatalf("reconnect from the same address: %v", why)
	}
	// An IPv4 server address matches whether the token holds it mapped or not.
	long := strings.Repeat("p", MaxPlayerIDBytes)
	if id, why := v.Verify(issue(t, &key1, claims(long)), player2, t0); why != OK || string(id) != long {
		t.Fatalf("a %d-byte player id: %q, %v", len(long), id, why)
	}
}

func TestRefusals(t *testing.T) {
	good := issue(t, &key1, claims("p"))
	other := func(f func(c *Claims)) []byte {
		c := claims("p")
		f(c)
		return issue(t, &key1, c)
	}
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 1
		return b
	}
	cases := []struct {
		name string
		tok  []byte
		now  time.Time
		want Reason
		code uint32
	}{
		{"missing", nil, t0, Missing, 4005},
		{"truncated", good[:len(good)-1], t0, Malformed, 4006},
		{"trailing byte", append(bytes.Clone(good), 0), t0, Malformed, 4006},
		{"another version", flip(0), t0, Malformed, 4006},
		{"player id length wrong", flip(offIDLen), t0, Malformed, 4006},
		{"a byte of the deadline changed", flip(offDeadline), t0, Forged, 4006},
		{"a byte of the player id changed", flip(headerBytes), t0, Forged, 4006},
		{"a byte of the MAC changed", flip(len(good) - 1), t0, Forged, 4006},
		{"signed with another key", issue(t, &key2, claims("p")), t0, Forged, 4006},
		{"an unknown key id", func() []byte { k := key1; k.ID = 77; return issue(t, &k, claims("p")) }(), t0, Forged, 4006},
		{"expired", good, t0.Add(30*time.Second + time.Millisecond), Expired, 4007},
		{"another server address", other(func(c *Claims) { c.Server = netip.MustParseAddrPort("10.0.0.8:7777") }), t0, WrongServer, 4008},
		{"another server port", other(func(c *Claims) { c.Server = netip.MustParseAddrPort("10.0.0.7:7778") }), t0, WrongServer, 4008},
		{"another allocation", other(func(c *Claims) { c.Allocation = "another" }), t0, WrongAllocation, 4009},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := verifier(t, key1)
			if id, why := v.Verify(tc.tok, player1, tc.now); why != tc.want || id != nil {
				t.Fatalf("Verify = %q, %v; want %v", id, why, tc.want)
			}
			if got := tc.want.CloseCode(); got != tc.code {
				t.Errorf("close code %d, want %d", got, tc.code)
			}
			if tc.want.Message() == "" {
				t.Error("no message")
			}
			if v.Remembered() != 0 {
				t.Errorf("a refused token was remembered")
			}
		})
	}
	// At the deadline itself the token still connects.
	if _, why := verifier(t, key1).Verify(good, player1, t0.Add(30*time.Second)); why != OK {
		t.Errorf("at the deadline: %v", why)
	}
}

func TestNoKeysNoServerNoAllocation(t *testing.T) {
	tok := issue(t, &key1, claims("p"))
	v := NewVerifier(0)
	if _, why := v.Verify(tok, player1, t0); why != Forged {
		t.Errorf("without keys: %v", why)
	}
	ks, _ := NewKeys([]Key{key1})
	v.SetKeys(ks)
	if _, why := v.Verify(tok, player1, t0); why != WrongServer {
		t.Errorf("without the server's address: %v", why)
	}
	v.SetServer(server)
	if _, why := v.Verify(tok, player1, t0); why != WrongAllocation {
		t.Errorf("without an allocation: %v", why)
	}
	v.SetAllocations(claims("p").Allocation)
	if _, why := v.Verify(tok, player1, t0); why != OK {
		t.Errorf("with all three: %v", why)
	}
	v.SetAllocations()
	if _, why := v.Verify(tok, player1, t0); why != WrongAllocation {
		t.Errorf("after the allocation was cleared: %v", why)
	}
	// A match backfilled by a second allocation admits the tokens of both.
	backfill := claims("q")
	backfill.Allocation = "backfill-uid"
	v.SetAllocations(claims("p").Allocation, backfill.Allocation)
	if _, why := v.Verify(tok, player1, t0); why != OK {
		t.Errorf("the first allocation of a backfilled match: %v", why)
	}
	if _, why := v.Verify(issue(t, &key1, backfill), player2, t0); why != OK {
		t.Errorf("the backfill allocation: %v", why)
	}
}

func TestReplay(t *testing.T) {
	v := verifier(t, key1)
	tok := issue(t, &key1, claims("p"))
	if _, why := v.Verify(tok, player1, t0); why != OK {
		t.Fatal(why)
	}
	if _, why := v.Verify(tok, player2, t0); why != Replayed || why.CloseCode() != 4010 {
		t.Fatalf("the token from another address: %v", why)
	}
	// Another port of the same host is another address, as netcode.io judges it.
	if _, why := v.Verify(tok, netip.AddrPortFrom(player1.Addr(), player1.Port()+1), t0); why != Replayed {
		t.Fatalf("the token from another port: %v", why)
	}
	// The first address keeps it.
	if _, why := v.Verify(tok, player1, t0); why != OK {
		t.Fatalf("the first address again: %v", why)
	}
}

func TestRotation(t *testing.T) {
	// Before the rotation: key 1 signs; tokens of key 2 are not yet known.
	v := verifier(t, key1)
	old := issue(t, &key1, claims("old"))
	next := issue(t, &key2, claims("new"))
	if _, why := v.Verify(next, player2, t0); why != Forged {
		t.Fatalf("a token of the next key before the rotation: %v", why)
	}
	// During the rotation the server holds the new key and the one it replaced: tokens of both.
	ks, err := NewKeys([]Key{key2, key1})
	if err != nil {
		t.Fatal(err)
	}
	v.SetKeys(ks)
	if got := ks.IDs(); len(got) != 2 || got[0] != 2 || got[1] != 1 {
		t.Fatalf("IDs = %v", got)
	}
	if _, why := v.Verify(old, player1, t0); why != OK {
		t.Fatalf("a token of the old key during the rotation: %v", why)
	}
	if _, why := v.Verify(next, player2, t0); why != OK {
		t.Fatalf("a token of the new key during the rotation: %v", why)
	}
	// After it, the old key is gone and its tokens are refused (the used ones stay remembered).
	ks, _ = NewKeys([]Key{key2})
	v.SetKeys(ks)
	if _, why := v.Verify(issue(t, &key1, claims("late")), player1, t0); why != Forged {
		t.Fatalf("a token of the retired key: %v", why)
	}
	if _, why := v.Verify(next, player1, t0); why != Replayed {
		t.Fatalf("a used token from another address after the rotation: %v", why)
	}
}

func TestFull(t *testing.T) {
	ks, _ := NewKeys([]Key{key1})
	v := NewVerifier(2)
	v.SetKeys(ks)
	v.SetServer(server)
	v.SetAllocations(claims("p").Allocation)
	short := func(p string, deadline time.Time) []byte {
		c := claims(p)
		c.Deadline = deadline
		return issue(t, &key1, c)
	}
	for _, p := range []string{"a", "b"} {
		if _, why := v.Verify(short(p, t0.Add(time.Second)), player1, t0); why != OK {
			t.Fatal(why)
		}
	}
	if _, why := v.Verify(short("c", t0.Add(time.Minute)), player1, t0); why != Full || why.CloseCode() != 1013 {
		t.Fatalf("a third token with room for two: %v", why)
	}
	// Once the first two expire, their room is free again.
	later := t0.Add(2 * time.Second)
	if _, why := v.Verify(short("c", t0.Add(time.Minute)), player1, later); why != OK || v.Remembered() != 1 {
		t.Fatalf("after the first two expired: %v, %d remembered", why, v.Remembered())
	}
}

func TestIssueRefusesBadClaims(t *testing.T) {
	for name, f := range map[string]func(c *Claims){
		"no player":           func(c *Claims) { c.Player = "" },
		"player id too long":  func(c *Claims) { c.Player = strings.Repeat("x", MaxPlayerIDBytes+1) },
		"player id not UTF-8": func(c *Claims) { c.Player = "\xff" },
		"no server":           func(c *Claims) { c.Server = netip.AddrPort{} },
		"no port":             func(c *Claims) { c.Server = netip.AddrPortFrom(server.Addr(), 0) },
		"no allocation":       func(c *Claims) { c.Allocation = "" },
	} {
		c := claims("p")
		f(c)
		if out, err := Issue([]byte("x"), &key1, c); !errors.Is(err, ErrClaims) || string(out) != "x" {
			t.Errorf("%s: %q, %v", name, out, err)
		}
	}
}

func TestNewKeysRefuses(t *testing.T) {
	for name, keys := range map[string][]Key{
		"none":         nil,
		"three":        {key1, key2, {ID: 3, Secret: [KeyBytes]byte{3}}},
		"duplicate id": {key1, {ID: 1, Secret: [KeyBytes]byte{4}}},
		"all-zero key": {{ID: 5}},
	} {
		if _, err := NewKeys(keys); !errors.Is(err, ErrKeys) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestVerifyAllocatesNothing(t *testing.T) {
	v := verifier(t, key2, key1)
	good := issue(t, &key1, claims("p"))
	forged := bytes.Clone(good)
	forged[len(forged)-1] ^= 1
	v.Verify(good, player1, t0)
	if n := testing.AllocsPerRun(1000, func() {
		v.Verify(good, player1, t0)
		v.Verify(forged, player2, t0)
	}); n != 0 {
		t.Fatalf("Verify allocates %.1f times", n)
	}
}

func FuzzVerify(f *testing.F) {
	good, _ := Issue(nil, &key1, claims("player"))
	f.Add(good)
	f.Add(good[:MinBytes])
	f.Add([]byte{Version})
	f.Fuzz(func(t *testing.T, b []byte) {
		v := verifier(t, key1)
		id, why := v.Verify(b, player1, t0)
		if why >= NumReasons || (why == OK) != (id != nil) {
			t.Fatalf("Verify(% x) = %q, %v", b, id, why)
		}
		if why == OK && !bytes.Equal(b, good) {
			t.Fatalf("a token that is not the issued one verified: % x", b)
		}
	})
}

// BenchmarkVerify is the cost of checking one connect attempt's token: a valid one (the MAC, the
// claims and the replay cache) and a forged one (the MAC alone).
func BenchmarkVerify(b *testing.B) {
	b.Run("valid", func(b *testing.B) {
		v := verifier(b, key1)
		tok := issue(b, &key1, claims(strings.Repeat("p", 16)))
		b.ReportAllocs()
		for b.Loop() {
			if _, why := v.Verify(tok, player1, t0); why != OK {
				b.Fatal(why)
			}
		}
	})
	b.Run("forged", func(b *testing.B) {
		v := verifier(b, key1)
		tok := issue(b, &key1, claims(strings.Repeat("p", 16)))
		tok[len(tok)-1] ^= 1
		b.ReportAllocs()
		for b.Loop() {
			if _, why := v.Verify(tok, player1, t0); why != Forged {
				b.Fatal(why)
			}
		}
	})
	b.Run("issue", func(b *testing.B) {
		c := claims(strings.Repeat("p", 16))
		buf := make([]byte, 0, MaxBytes)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Issue(buf[:0], &key1, c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
