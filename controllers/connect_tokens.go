package controllers

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/netfleet/netfleet/api/connecttoken"
	"github.com/netfleet/netfleet/api/v1alpha1"
)

// SetConnectKeys makes the allocator issue connect tokens with keys from store; without it, it
// makes a store of its own with the default options.
func (a *Allocator) SetConnectKeys(store *ConnectKeyStore) { a.keys = store }

// WithTokens adds to st, the Allocated answer to spec (allocation uid), one connect token per
// player the spec names, signed with the key of the server's fleet: bound to the server's
// address and port, the allocation and the player, and good for the server's
// netcode.connectTokens.ttlSeconds. An answer that names no players, or is not Allocated, is
// returned as it is.
func (a *Allocator) WithTokens(ctx context.Context, ns string, spec *v1alpha1.GameServerAllocationSpec, uid types.UID, st v1alpha1.GameServerAllocationStatus) (v1alpha1.GameServerAllocationStatus, error) {
	if st.State != v1alpha1.AllocationAllocated || len(spec.Players) == 0 {
		return st, nil
	}
	var gs v1alpha1.GameServer
	if err := a.write.Get(ctx, client.ObjectKey{Namespace: ns, Name: st.GameServerName}, &gs); err != nil {
		return st, fmt.Errorf("read gameserver %s for its connect tokens: %w", st.GameServerName, err)
	}
	server, err := netip.ParseAddrPort(net.JoinHostPort(st.Address, strconv.Itoa(int(st.Port))))
	if err != nil || st.Port == 0 {
		return st, fmt.Errorf("gameserver %s: connect tokens need an IP address and a port, it has %q and %d", gs.Name, st.Address, st.Port)
	}
	keys, err := a.keys.Get(ctx, ns, connectKeyGroup(&gs))
	if err != nil {
		return st, fmt.Errorf("connect keys of gameserver %s: %w", gs.Name, err)
	}
	now := time.Now()
	deadline := now.Add(time.Duration(gs.Spec.Netcode.Default().ConnectTokens.TTLSeconds) * time.Second)
	st.ConnectTokens = make([]v1alpha1.ConnectToken, 0, len(spec.Players))
	for _, p := range spec.Players {
		tok, err := connecttoken.Issue(make([]byte, 0, connecttoken.MaxBytes), &keys.Signer,
			&connecttoken.Claims{Server: server, Allocation: string(uid), Player: p, Deadline: deadline})
		if err != nil {
			return st, fmt.Errorf("connect token of player %q: %w", p, err)
		}
		st.ConnectTokens = append(st.ConnectTokens, v1alpha1.ConnectToken{Player: p, Token: tok})
	}
	expire := metav1.NewTime(deadline.Truncate(time.Second))
	st.ConnectTokensExpire = &expire
	connectTokensIssued.Add(float64(len(spec.Players)))
	return st, nil
}
