package botswarm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// Limits of a swarm's configuration.
const (
	// MaxBots bounds the bots of one swarm: each has its own socket and OS thread.
	MaxBots = 4096
	// MaxCommandsHz bounds the COMMAND rate of one bot.
	MaxCommandsHz = 1000
	// MaxDuration bounds a run.
	MaxDuration = time.Hour
	// MaxBotSeconds bounds bots times seconds of a run: every bot keeps a record of a few
	// hundred bytes per second.
	MaxBotSeconds = 1 << 21
	// DefaultConnectTimeout is how long a bot waits for its handshake when Config leaves it 0.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultCommandBytes is the COMMAND payload size when Config leaves it 0.
	DefaultCommandBytes = 16
)

// Class is a group of bots that connect to the same address, reported together.
type Class struct {
	// Name labels the class in reports; letters, digits, '-', '_' and '.'.
	Name string `json:"name"`
	// Count is the number of bots in the class, at least 1.
	Count int `json:"count"`
	// Addr is where the class's bots connect, e.g. a linkem proxy in front of the server;
	// the zero value means Config.Server.
	Addr netip.AddrPort `json:"addr"`
}

// ParseClass parses "name=count" or "name=count@addr", e.g. "lossy=4@127.0.0.1:17777".
func ParseClass(s string) (Class, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok {
		return Class{}, fmt.Errorf("class %q: want name=count[@addr]", s)
	}
	c := Class{Name: name}
	count, addr, hasAddr := strings.Cut(rest, "@")
	n, err := strconv.Atoi(count)
	if err != nil {
		return Class{}, fmt.Errorf("class %q: count: %w", s, err)
	}
	c.Count = n
	if hasAddr {
		if c.Addr, err = netip.ParseAddrPort(addr); err != nil {
			return Class{}, fmt.Errorf("class %q: address: %w", s, err)
		}
	}
	if err := c.validate(); err != nil {
		return Class{}, err
	}
	return c, nil
}

// ParseClasses parses a comma-separated list of classes (see ParseClass).
func ParseClasses(s string) ([]Class, error) {
	var out []Class
	for part := range strings.SplitSeq(s, ",") {
		c, err := ParseClass(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (c Class) validate() error {
	if c.Name == "" {
		return errors.New("class: empty name")
	}
	for _, r := range c.Name {
		ok := r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !ok {
			return fmt.Errorf("class %q: name may hold only letters, digits, '-', '_' and '.'", c.Name)
		}
	}
	if c.Count < 1 || c.Count > MaxBots {
		return fmt.Errorf("class %q: count %d out of range 1..%d", c.Name, c.Count, MaxBots)
	}
	if c.Addr.IsValid() && c.Addr.Port() == 0 {
		return fmt.Errorf("class %q: address %s has no port", c.Name, c.Addr)
	}
	return nil
}

// ParseAddrList parses a comma-separated list of IPv4 addresses and inclusive ranges
// ("127.0.0.2-127.0.0.33"), for Config.Bind.
func ParseAddrList(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := netip.ParseAddr(lo)
		if err != nil {
			return nil, fmt.Errorf("address list: %w", err)
		}
		last := first
		if isRange {
			if last, err = netip.ParseAddr(hi); err != nil {
				return nil, fmt.Errorf("address list: %w", err)
			}
		}
		if !first.Is4() || !last.Is4() || last.Less(first) {
			return nil, fmt.Errorf("address list: %q is not an IPv4 address or ascending IPv4 range", part)
		}
		for a := first; ; a = a.Next() {
			if len(out) == MaxBots {
				return nil, fmt.Errorf("address list: more than %d addresses", MaxBots)
			}
			out = append(out, a)
			if a == last {
				break
			}
		}
	}
	return out, nil
}

// Config describes a swarm.
type Config struct {
	// Server is where bots of a class without an address connect.
	Server netip.AddrPort
	// Classes are the groups of bots; bots are numbered in class order.
	Classes []Class
	// Duration is how long the swarm runs, from Start; every bot closes its session at the end.
	Duration time.Duration
	// Ramp spreads the bots' connects evenly over this long; 0 connects them all at once.
	Ramp time.Duration
	// ConnectTimeout is how long a bot waits for its handshake; DefaultConnectTimeout if 0.
	ConnectTimeout time.Duration
	// CommandsHz is the rate of COMMAND messages each connected bot sends; 0 sends none.
	CommandsHz float64
	// Command appends one COMMAND payload (game input, at most protocol.MaxCommandPayload bytes)
	// to dst, drawing any randomness from r, the bot's own seeded generator. If nil, payloads are
	// CommandBytes random bytes.
	Command func(r *rand.Rand, dst []byte) []byte
	// CommandBytes is the size of a random COMMAND payload; DefaultCommandBytes if 0.
	CommandBytes int
	// Seed seeds the COMMAND payloads and the phase of each bot's PING and COMMAND clocks.
	Seed uint64
	// Bind lists local IPv4 addresses the bots' sockets bind to, round-robin, so the server
	// sees several source hosts (its connect limiter counts per source IP); empty binds every
	// bot to 0.0.0.0.
	Bind []netip.Addr
	// Layout is the game's schema, compiled: the bots name it in their HELLO and decode records
	// with it. nil is the schema of a game that declares none (the demo's).
	Layout *protocol.Layout
	// Tokens are connect tokens (what an allocation with players answers): bot i, numbered in
	// class order, sends Tokens[i] in its HELLO. Bots past the end of the list send none.
	Tokens [][]byte
}

// Bots is the total number of bots.
func (c *Config) Bots() int {
	n := 0
	for _, cl := range c.Classes {
		n += cl.Count
	}
	return n
}

// Validate reports the first invalid setting.
func (c *Config) Validate() error {
	if len(c.Classes) == 0 {
		return errors.New("botswarm: no classes of bots")
	}
	seen := map[string]bool{}
	for _, cl := range c.Classes {
		if err := cl.validate(); err != nil {
			return fmt.Errorf("botswarm: %w", err)
		}
		if seen[cl.Name] {
			return fmt.Errorf("botswarm: class %q named twice", cl.Name)
		}
		seen[cl.Name] = true
		if !cl.Addr.IsValid() && !c.Server.IsValid() {
			return fmt.Errorf("botswarm: class %q has no address and no server is set", cl.Name)
		}
	}
	for i, tok := range c.Tokens {
		if len(tok) > protocol.MaxTokenBytes {
			return fmt.Errorf("botswarm: token %d is %d bytes, over %d", i, len(tok), protocol.MaxTokenBytes)
		}
	}
	if c.Server.IsValid() && c.Server.Port() == 0 {
		return fmt.Errorf("botswarm: server %s has no port", c.Server)
	}
	if n := c.Bots(); n > MaxBots {
		return fmt.Errorf("botswarm: %d bots, more than %d", n, MaxBots)
	}
	if c.Duration <= 0 || c.Duration > MaxDuration {
		return fmt.Errorf("botswarm: duration %v out of range (0, %v]", c.Duration, MaxDuration)
	}
	if secs := int64(c.Duration/time.Second) + 1; int64(c.Bots())*secs > MaxBotSeconds {
		return fmt.Errorf("botswarm: %d bots for %v is more than %d bot-seconds", c.Bots(), c.Duration, MaxBotSeconds)
	}
	if c.Ramp < 0 || c.Ramp >= c.Duration {
		return fmt.Errorf("botswarm: ramp %v must be in [0, duration %v)", c.Ramp, c.Duration)
	}
	if c.ConnectTimeout < 0 {
		return fmt.Errorf("botswarm: connect timeout %v is negative", c.ConnectTimeout)
	}
	if !(c.CommandsHz >= 0 && c.CommandsHz <= MaxCommandsHz) { // also refuses NaN
		return fmt.Errorf("botswarm: commands Hz %v out of range [0, %d]", c.CommandsHz, MaxCommandsHz)
	}
	if c.CommandBytes < 0 || c.CommandBytes > protocol.MaxCommandPayload {
		return fmt.Errorf("botswarm: command bytes %d out of range 0..%d", c.CommandBytes, protocol.MaxCommandPayload)
	}
	for _, a := range c.Bind {
		if !a.Unmap().Is4() {
			return fmt.Errorf("botswarm: bind address %s is not IPv4", a)
		}
	}
	return nil
}

func (c *Config) withDefaults() Config {
	d := *c
	if d.ConnectTimeout == 0 {
		d.ConnectTimeout = DefaultConnectTimeout
	}
	if d.CommandBytes == 0 {
		d.CommandBytes = DefaultCommandBytes
	}
	if d.Command == nil {
		n := d.CommandBytes
		d.Command = func(r *rand.Rand, dst []byte) []byte {
			for range n {
				dst = append(dst, byte(r.Uint32()))
			}
			return dst
		}
	}
	return d
}

// bindAddr is the local address bot i binds to.
func (c *Config) bindAddr(i int) netip.AddrPort {
	if len(c.Bind) == 0 {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	}
	return netip.AddrPortFrom(c.Bind[i%len(c.Bind)].Unmap(), 0)
}

// hostConfig is the ENet host of one bot: one peer, the game's channels.
func hostConfig(bind netip.AddrPort) enet.Config {
	return enet.Config{Address: bind, Peers: 1, Channels: channelCount}
}
