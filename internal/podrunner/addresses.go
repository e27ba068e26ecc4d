package podrunner

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
)

var loopback = netip.MustParsePrefix("127.0.0.0/8")

// addressPool hands out Pod addresses: loopback addresses from first upward. Linux routes all of
// 127.0.0.0/8 to the loopback interface, so any of them can be bound without set-up.
type addressPool struct {
	first netip.Addr

	mu   sync.Mutex
	used map[netip.Addr]bool
}

func newAddressPool(first netip.Addr) *addressPool {
	return &addressPool{first: first, used: map[netip.Addr]bool{}}
}

// take returns the lowest free address.
func (p *addressPool) take() (netip.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a := p.first; loopback.Contains(a); a = a.Next() {
		if last := a.As4()[3]; last == 0 || last == 255 {
			continue
		}
		if !p.used[a] {
			p.used[a] = true
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no free loopback address from %s up", p.first)
}

// claim takes a, for a Pod already bound to a's node; it reports false when a is taken.
func (p *addressPool) claim(a netip.Addr) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used[a] {
		return false
	}
	p.used[a] = true
	return true
}

func (p *addressPool) release(a netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.used, a)
}

// nodeName names the Node of address a, e.g. netfleet-dev-127-0-0-2.
func nodeName(prefix string, a netip.Addr) string {
	return prefix + "-" + strings.ReplaceAll(a.String(), ".", "-")
}

// nodeAddress is the inverse of nodeName: it reports the address of one of the runner's nodes,
// or false when node is not one of them.
func nodeAddress(prefix, node string) (netip.Addr, bool) {
	rest, ok := strings.CutPrefix(node, prefix+"-")
	if !ok {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(strings.ReplaceAll(rest, "-", "."))
	if err != nil || !a.Is4() || !loopback.Contains(a) || nodeName(prefix, a) != node {
		return netip.Addr{}, false
	}
	return a, true
}
