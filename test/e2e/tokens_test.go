//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/api/v1alpha1"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// TestConnectTokens runs the arena Fleet with connect tokens required, with the real operator and
// real game-server processes: an allocation naming two players answers their tokens; both join
// the allocated server with them; a client without a token is refused with 4005, one with a
// player's token from another address with 4010, and one with a token of the match on another
// server of the fleet with 4008.
func TestConnectTokens(t *testing.T) {
	ns := newNamespace(t, "tokens")
	f := arenaFleet(t, ns)
	f.Spec.Replicas = 2
	f.Spec.Template.Spec.Netcode.ConnectTokens = netcode.ConnectTokensConfig{Mode: netcode.ConnectTokensRequired}
	if err := env.k8s.Create(t.Context(), f); err != nil {
		t.Fatal(err)
	}
	servers := waitConverged(t, ns, f.Name)
	for _, s := range servers {
		if len(s.gs.Status.Netcode.ConnectKeyIDs) != 1 {
			t.Fatalf("%s holds keys %v", s.gs.Name, s.gs.Status.Netcode.ConnectKeyIDs)
		}
	}

	ctx := context.Background()
	gsa := &v1alpha1.GameServerAllocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "match-1"},
		Spec:       v1alpha1.GameServerAllocationSpec{Fleet: f.Name, Players: []string{"alice", "bob"}},
	}
	if err := env.k8s.Create(ctx, gsa); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "allocation match-1", waitLimit, func() (bool, error) {
		if err := env.k8s.Get(ctx, client.ObjectKeyFromObject(gsa), gsa); err != nil {
			return false, err
		}
		return gsa.Status.State != "", fmt.Errorf("no result yet")
	})
	st := gsa.Status
	if st.State != v1alpha1.AllocationAllocated || len(st.ConnectTokens) != 2 {
		t.Fatalf("allocation: %+v", st)
	}
	addr := netip.MustParseAddrPort(fmt.Sprintf("%s:%d", st.Address, st.Port))
	var other netip.AddrPort
	for _, s := range servers {
		if s.gs.Name != st.GameServerName {
			other = s.game
		}
	}
	withToken := func(target netip.AddrPort, tok []byte) *player {
		p := newPlayer(t, target)
		if err := p.cl.SetToken(tok); err != nil {
			t.Fatal(err)
		}
		return p
	}
	alice, bob := withToken(addr, st.ConnectTokens[0].Token), withToken(addr, st.ConnectTokens[1].Token)
	service := func(what string, ps []*player, cond func() error) {
		t.Helper()
		waitFor(t, what, waitLimit, func() (bool, error) {
			for range 20 {
				for _, p := range ps {
					p.service(t)
				}
				time.Sleep(time.Millisecond)
			}
			err := cond()
			return err == nil, err
		})
	}
	service("alice and bob joined with their tokens", []*player{alice, bob}, func() error {
		for _, p := range []*player{alice, bob} {
			if p.down != 0 {
				return fmt.Errorf("a player with a token was refused with %d", p.down)
			}
			if p.cl.Len() < 2 {
				return fmt.Errorf("%d entities in view", p.cl.Len())
			}
		}
		return nil
	})

	stranger := newPlayer(t, addr)
	thief := withToken(addr, st.ConnectTokens[1].Token)      // bob's token, from another address
	elsewhere := withToken(other, st.ConnectTokens[0].Token) // alice's, at the fleet's other server
	refused := []*player{stranger, thief, elsewhere}
	service("the refusals", append([]*player{alice, bob}, refused...), func() error {
		for _, p := range refused {
			if p.down == 0 {
				return fmt.Errorf("a client without a valid token is still connected")
			}
		}
		return nil
	})
	for name, c := range map[string]struct {
		p    *player
		code uint32
	}{
		"no token":                  {stranger, protocol.CloseTokenMissing},
		"a token replayed":          {thief, protocol.CloseTokenReplayed},
		"a token of another server": {elsewhere, protocol.CloseTokenWrongServer},
	} {
		closed, ok := c.p.cl.Closed()
		if c.p.down != c.code || !ok || closed.Code != c.code || c.p.cl.Len() != 0 {
			t.Errorf("%s: disconnected with %d, CLOSE %+v, %d entities; want %d", name, c.p.down, closed, c.p.cl.Len(), c.code)
		}
	}
	if alice.down != 0 || bob.down != 0 {
		t.Errorf("the players were disconnected: %d, %d", alice.down, bob.down)
	}
}
