package broadcast

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/netfleet/netfleet/api/connecttoken"
)

// ConnectTokens is what the server checks connect tokens with: the fleet's keys (the signing key
// first, and during a rotation the one it replaced), the address and port the server is
// published at, which a token must name, and the uid of the allocation the server runs ("" for
// none).
type ConnectTokens struct {
	Keys       []connecttoken.Key
	Server     netip.AddrPort
	Allocation string
}

// errNoServer refuses connect keys without the server's address.
var errNoServer = errors.New("broadcast: connect tokens need the server's published address and port")

// installTokens installs ct's keys and address into the verifier; on the tick loop, or before Run.
func (b *Broadcaster) installTokens(ct *ConnectTokens) error {
	ks, err := connecttoken.NewKeys(ct.Keys)
	if err != nil {
		return fmt.Errorf("broadcast: %w", err)
	}
	if !ct.Server.IsValid() || ct.Server.Port() == 0 {
		return errNoServer
	}
	b.tokens.SetKeys(ks)
	b.tokens.SetServer(ct.Server)
	b.hasKeys.Store(true)
	return nil
}

// SetConnectKeys replaces the connect-token keys (the signing key first, then during a rotation
// the key it replaced) and the server's published address between two ticks. Sessions that joined
// keep running; the tokens admitted so far stay remembered, so a replay is refused across a
// rotation too. It refuses an empty key set, more than connecttoken.MaxKeys keys, duplicate ids and a
// missing address, and then changes nothing. It implements admin.ConnectKeyRuntime.
func (b *Broadcaster) SetConnectKeys(ctx context.Context, keys []connecttoken.Key, server netip.AddrPort) error {
	ct := ConnectTokens{Keys: keys, Server: server}
	if _, err := connecttoken.NewKeys(ct.Keys); err != nil {
		return fmt.Errorf("broadcast: %w", err)
	}
	if !ct.Server.IsValid() || ct.Server.Port() == 0 {
		return errNoServer
	}
	var ierr error
	if err := b.call(ctx, func() { ierr = b.installTokens(&ct) }); err != nil {
		return err
	}
	return ierr
}

// SetAllocations sets, between two ticks, the uids of the allocations of the match the server
// runs (the first, then those that backfilled it): a token for any other allocation is refused.
// None clears them. A server with a lifecycle (Options.Lifecycle) takes its match's allocations
// from the lifecycle instead, as the operator delivers them, at every token it checks.
func (b *Broadcaster) SetAllocations(ctx context.Context, uids ...string) error {
	uids = slices.Clone(uids)
	return b.call(ctx, func() { b.tokens.SetAllocations(uids...) })
}

// ConnectKeys returns the ids of the connect-token keys the server holds, the signing key's
// first (nil before any), and the address tokens must name. It is served by the tick loop. It
// implements admin.ConnectKeyRuntime.
func (b *Broadcaster) ConnectKeys(ctx context.Context) ([]uint32, netip.AddrPort, error) {
	var ids []uint32
	var server netip.AddrPort
	err := b.call(ctx, func() {
		if ks := b.tokens.Keys(); ks != nil {
			ids = ks.IDs()
		}
		server = b.tokens.Server()
	})
	return ids, server, err
}
