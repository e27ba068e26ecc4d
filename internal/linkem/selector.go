package linkem

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// selectorKind says what a Selector picks.
type selectorKind uint8

const (
	selDefault selectorKind = iota + 1
	selClass
	selClients
	selAddr
)

// Selector picks what a profile applies to. Its text forms:
//
//	default          the default profile, for clients no rule or override picks
//	class:NAME       the profile of a class (clients reach a class through a Rule)
//	client:N         the client with index N (0-based, in order of first packet)
//	client:N-M       clients N to M inclusive
//	addr:IP          clients whose source IP is IP
//	addr:IP:PORT     the client with that source address ([IPv6]:PORT for IPv6)
//
// Client and address selectors also pick clients that have not yet sent anything.
type Selector struct {
	kind   selectorKind
	class  string
	lo, hi int
	addr   netip.Addr
	port   uint16 // 0: any port
}

var classNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// DefaultSelector selects the default profile.
func DefaultSelector() Selector { return Selector{kind: selDefault} }

// ClassSelector selects the profile of the named class.
func ClassSelector(name string) Selector { return Selector{kind: selClass, class: name} }

// ClientSelector selects the client with index i.
func ClientSelector(i int) Selector { return Selector{kind: selClients, lo: i, hi: i} }

// ClientRangeSelector selects the clients with index lo to hi inclusive.
func ClientRangeSelector(lo, hi int) Selector { return Selector{kind: selClients, lo: lo, hi: hi} }

// AddrSelector selects the client with source address ap; port 0 selects every port of the IP.
func AddrSelector(ap netip.AddrPort) Selector {
	return Selector{kind: selAddr, addr: ap.Addr().Unmap(), port: ap.Port()}
}

// ParseSelector parses the text form of a Selector.
func ParseSelector(s string) (Selector, error) {
	kind, arg, _ := strings.Cut(s, ":")
	var sel Selector
	switch kind {
	case "default":
		if arg != "" || strings.Contains(s, ":") {
			return Selector{}, fmt.Errorf("selector %q: default takes no argument", s)
		}
		sel = DefaultSelector()
	case "class":
		sel = ClassSelector(arg)
	case "client":
		loS, hiS, isRange := strings.Cut(arg, "-")
		lo, err := parseIndex(loS)
		if err != nil {
			return Selector{}, fmt.Errorf("selector %q: %w", s, err)
		}
		hi := lo
		if isRange {
			if hi, err = parseIndex(hiS); err != nil {
				return Selector{}, fmt.Errorf("selector %q: %w", s, err)
			}
		}
		sel = ClientRangeSelector(lo, hi)
	case "addr":
		if ap, err := netip.ParseAddrPort(arg); err == nil {
			if ap.Port() == 0 {
				return Selector{}, fmt.Errorf("selector %q: port 0; leave the port out to select every port", s)
			}
			sel = AddrSelector(ap)
		} else if a, aerr := netip.ParseAddr(arg); aerr == nil {
			sel = AddrSelector(netip.AddrPortFrom(a, 0))
		} else {
			return Selector{}, fmt.Errorf("selector %q: %q is neither IP nor IP:PORT", s, arg)
		}
	default:
		return Selector{}, fmt.Errorf("selector %q: want default, class:NAME, client:N, client:N-M, addr:IP or addr:IP:PORT", s)
	}
	if err := sel.validate(); err != nil {
		return Selector{}, err
	}
	return sel, nil
}

func parseIndex(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 1<<30 {
		return 0, fmt.Errorf("client index %q is not an integer in [0, 2^30]", s)
	}
	return n, nil
}

func (s Selector) validate() error {
	switch s.kind {
	case selDefault:
		return nil
	case selClass:
		if !classNameRE.MatchString(s.class) {
			return fmt.Errorf("selector %q: class name must match %s", s, classNameRE)
		}
		return nil
	case selClients:
		if s.lo < 0 || s.hi < s.lo {
			return fmt.Errorf("selector %q: want 0 <= N <= M", s)
		}
		return nil
	case selAddr:
		if !s.addr.IsValid() {
			return fmt.Errorf("selector %q: no IP", s)
		}
		return nil
	default:
		return fmt.Errorf("empty selector")
	}
}

// String returns the text form, which ParseSelector reads back.
func (s Selector) String() string {
	switch s.kind {
	case selDefault:
		return "default"
	case selClass:
		return "class:" + s.class
	case selClients:
		if s.lo == s.hi {
			return "client:" + strconv.Itoa(s.lo)
		}
		return "client:" + strconv.Itoa(s.lo) + "-" + strconv.Itoa(s.hi)
	case selAddr:
		if s.port == 0 {
			return "addr:" + s.addr.String()
		}
		return "addr:" + netip.AddrPortFrom(s.addr, s.port).String()
	default:
		return ""
	}
}

// MarshalText implements encoding.TextMarshaler.
func (s Selector) MarshalText() ([]byte, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	return []byte(s.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Selector) UnmarshalText(b []byte) error {
	sel, err := ParseSelector(string(b))
	if err != nil {
		return err
	}
	*s = sel
	return nil
}

// picksClients reports whether s names clients (an index or address) rather than a profile slot.
func (s Selector) picksClients() bool { return s.kind == selClients || s.kind == selAddr }

// matches reports whether client-picking s picks the client with this index and address.
func (s Selector) matches(index int, addr netip.AddrPort) bool {
	switch s.kind {
	case selClients:
		return index >= s.lo && index <= s.hi
	case selAddr:
		return addr.Addr().Unmap() == s.addr && (s.port == 0 || addr.Port() == s.port)
	default:
		return false
	}
}
