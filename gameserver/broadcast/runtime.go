package broadcast

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/session"
)

// Validate judges cfg as Apply would, without installing it. cfg holds netcode's rules (the CRD's:
// netcode.Resolve judged it); Validate checks the invariants of this running server — what the
// transport can change live, that the push log fits the store's state history, that each pool
// holds at least one session. It returns nil or a *netcode.ValidationError naming every refused
// field.
func (b *Broadcaster) Validate(cfg netcode.Resolved) error {
	d := cfg.Config()
	var errs []netcode.FieldError
	rule := func(ok bool, field, format string, args ...any) {
		if !ok {
			errs = append(errs, netcode.FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
		}
	}
	// ENet cannot change these two limits on a live host; the ceiling of what a peer can make the
	// server hold depends on them, so a config that moves them needs a restart.
	created := b.created
	rule(d.Memory.MaxInboundMessageBytes <= int32(created.maxPacket), "memory.maxInboundMessageBytes",
		"memory.maxInboundMessageBytes cannot rise above %d while the server runs (the transport's packet limit); restart the server to raise it",
		created.maxPacket)
	rule(d.Memory.MaxParkedBytesPerConnection == int32(created.maxWaiting), "memory.maxParkedBytesPerConnection",
		"memory.maxParkedBytesPerConnection cannot change while the server runs (the transport holds %d per peer); restart the server to change it",
		created.maxWaiting)
	// The push log is the store's state history: a skipped session's union is replayed as deltas
	// against baselines the history still holds, and the replication state copies a baseline out
	// of it only once it is storeAge ticks old. A longer log would replay past the history.
	history := b.store.HistoryTicks()
	rule(int(d.Backpressure.PushLogTicks) <= history-pushLogMargin, "backpressure.pushLogTicks",
		"backpressure.pushLogTicks must be at most %d: the entity store keeps %d ticks of state history, %d of which a baseline needs before it is stored",
		history-pushLogMargin, history, pushLogMargin)
	rule(d.Memory.StatePoolBudgetBytes >= int64(b.states.BaseBytes()), "memory.statePoolBudgetBytes",
		"memory.statePoolBudgetBytes must hold one session's replication state (%d bytes with this entity store)", b.states.BaseBytes())
	rule(d.Memory.IngressPoolBudgetBytes >= int64(d.Memory.MaxPendingBytesPerConnection), "memory.ingressPoolBudgetBytes",
		"memory.ingressPoolBudgetBytes must hold one session's inbox (memory.maxPendingBytesPerConnection)")
	rule(d.ConnectTokens.Mode == netcode.ConnectTokensDisabled || b.hasKeys.Load(), "connectTokens.mode",
		"connectTokens.mode %s needs the fleet's connect-token keys, and the server holds none yet", d.ConnectTokens.Mode)
	if len(errs) > 0 {
		return &netcode.ValidationError{Fields: errs}
	}
	return nil
}

// pushLogMargin is the age at which the replication state copies a baseline out of the store's
// history (snapshot's storeAge).
const pushLogMargin = 8

// Apply validates cfg (Validate) and installs it at the next tick boundary: every session's
// controller, pacer, budgets and replication settings, the frame pool, the transport's connect
// limit and the tick rate change between two ticks, all at once. It returns once the tick loop
// runs cfg. A refused cfg leaves the running one untouched. If ctx ends before the tick loop takes
// cfg, Apply returns ctx.Err() and cfg is not installed. It implements admin.Runtime.
func (b *Broadcaster) Apply(ctx context.Context, cfg netcode.Resolved) error {
	if err := b.Validate(cfg); err != nil {
		return err
	}
	d := cfg.Config()
	scfg, err := session.NewConfig(cfg, b.radius)
	if err != nil {
		return fmt.Errorf("broadcast: %w", err)
	}
	var ierr error
	if err := b.call(ctx, func() { ierr = b.install(d, scfg) }); err != nil {
		return err
	}
	return ierr
}

// install switches the running config; it runs on the tick loop between two ticks. Every step
// was validated, so none fails half-way.
func (b *Broadcaster) install(d netcode.NetcodeConfig, scfg session.Config) error {
	for _, s := range b.sessions {
		if err := s.SetConfig(scfg); err != nil {
			return fmt.Errorf("broadcast: install config: %w", err)
		}
	}
	b.frames.Configure(d.Memory.FramePoolBudgetBytes, int(d.Backpressure.FrameBytes))
	b.states.Configure(d.Memory.StatePoolBudgetBytes, scfg.Snapshot)
	if err := b.host.SetConnectRate(float64(d.Ingress.ConnectsPerSecondPerHost), int(d.Ingress.ConnectBurstPerHost)); err != nil {
		return fmt.Errorf("broadcast: install config: %w", err)
	}
	b.period = time.Second / time.Duration(d.TickRateHz)
	b.cfg, b.scfg = d, scfg
	b.current.Store(d.DeepCopy())
	b.log.Info("netcode config installed", "hash", d.Hash(), "tick", b.store.Tick())
	return nil
}

// Peers appends a netcode.PeerInfo for every connected peer to dst, as of the last tick; before
// Run and after Stop there are none. It implements admin.Runtime.
func (b *Broadcaster) Peers(dst []netcode.PeerInfo) []netcode.PeerInfo {
	if !b.running.Load() {
		return dst
	}
	_ = b.call(context.Background(), func() {
		for _, s := range b.sessions {
			if s.Active() {
				dst = append(dst, peerInfo(s.Stats(), s.Counters()))
			}
		}
	})
	return dst
}

func peerInfo(st session.Stats, c session.Counters) netcode.PeerInfo {
	return netcode.PeerInfo{
		Slot:                  st.Slot,
		SendRateHz:            st.SendRateHz,
		LossRatio:             st.LossRatio,
		EnetLossRatio:         st.EnetLossRatio,
		RTTMillis:             float64(st.RTTMs),
		BaselineRTTMillis:     float64(st.BaselineRTTMs),
		Throttle:              st.Throttle,
		CongestedBy:           st.Congestion.String(),
		BytesSent:             c.BytesSent,
		FrameBudgetBytes:      st.FrameBudgetBytes,
		PacingRateBytesPerSec: st.RateBytesPerSec,
		CeilingBytesPerSec:    st.CeilingBytesPerSec,
		RateClass:             st.RateClass,
		State:                 st.State.String(),
	}
}

// PeerStat is everything the server knows about one connected peer.
type PeerStat struct {
	Stats    session.Stats
	Counters session.Counters
	Memory   session.MemoryUsage
}

// PeerStats appends a PeerStat for every connected peer to dst, as of the last tick, for metrics
// and load tools.
func (b *Broadcaster) PeerStats(dst []PeerStat) []PeerStat {
	if !b.running.Load() {
		return dst
	}
	_ = b.call(context.Background(), func() {
		for _, s := range b.sessions {
			if s.Active() {
				dst = append(dst, statOf(s))
			}
		}
	})
	return dst
}

// ErrNoPeer is returned for a slot that holds no connected peer.
var ErrNoPeer = errors.New("broadcast: no connected peer in that slot")

// SetPeerBudget sets the byte rate of the peer in slot, overriding budget.sessionBytesPerSecond
// until it disconnects (0 is unlimited, negative restores the config's). A rate too small for
// what the peer has to send moves it up the detail levels; it never loses state.
func (b *Broadcaster) SetPeerBudget(ctx context.Context, slot int, bytesPerSecond int) error {
	return b.onPeer(ctx, slot, func(s *session.Session) { s.SetBytesPerSecond(bytesPerSecond) })
}

// SetPeerRateClass declares the rate class of the peer in slot (1, 2 or 4), as its profile
// would; a peer can also declare one when it connects (session.ConnectDataRateClass).
func (b *Broadcaster) SetPeerRateClass(ctx context.Context, slot int, class int) error {
	return b.onPeer(ctx, slot, func(s *session.Session) { s.SetRateClass(class) })
}

func (b *Broadcaster) onPeer(ctx context.Context, slot int, fn func(*session.Session)) error {
	if slot < 0 || slot >= len(b.sessions) {
		return fmt.Errorf("%w: slot %d", ErrNoPeer, slot)
	}
	found := false
	if err := b.call(ctx, func() {
		if s := b.sessions[slot]; s.Active() {
			fn(s)
			found = true
		}
	}); err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: slot %d", ErrNoPeer, slot)
	}
	return nil
}
