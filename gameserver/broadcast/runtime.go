package broadcast

import (
	"context"
	"fmt"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/session"
)

// Validate judges cfg as Apply would, without installing it: netcode's rules (the CRD's), then
// the invariants of this running server. It returns nil or a *netcode.ValidationError naming
// every refused field.
func (b *Broadcaster) Validate(cfg netcode.NetcodeConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	d := cfg.Default()
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
	if len(errs) > 0 {
		return &netcode.ValidationError{Fields: errs}
	}
	return nil
}

// Apply validates cfg (Validate) and installs it at the next tick boundary: every session's
// controller, pacer, budgets and replication settings, the frame pool, the transport's connect
// limit and the tick rate change between two ticks, all at once. It returns once the tick loop
// runs cfg. A refused cfg leaves the running one untouched. If ctx ends before the tick loop takes
// cfg, Apply returns ctx.Err() and cfg is not installed. It implements admin.Runtime.
func (b *Broadcaster) Apply(ctx context.Context, cfg netcode.NetcodeConfig) error {
	if err := b.Validate(cfg); err != nil {
		return err
	}
	d := cfg.Default()
	scfg, err := session.NewConfig(d, b.radius)
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
	if err := b.host.SetConnectRate(float64(d.Ingress.ConnectsPerSecondPerHost), int(d.Ingress.ConnectBurstPerHost)); err != nil {
		return fmt.Errorf("broadcast: install config: %w", err)
	}
	b.period = time.Second / time.Duration(d.TickRateHz)
	b.cfg, b.scfg = d, scfg
	b.current.Store(d.DeepCopy())
	b.log.Info("netcode config installed", "hash", d.Hash(), "tick", b.world.Tick())
	return nil
}

// Peers appends a netcode.PeerInfo for every connected peer to dst, as of the last tick. It
// implements admin.Runtime.
func (b *Broadcaster) Peers(dst []netcode.PeerInfo) []netcode.PeerInfo {
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
		Slot:             st.Slot,
		SendRateHz:       st.SendRateHz,
		LossRatio:        st.LossRatio,
		EnetLossRatio:    st.EnetLossRatio,
		RTTMillis:        float64(st.RTTMs),
		Throttle:         st.Throttle,
		BytesSent:        c.BytesSent,
		FrameBudgetBytes: st.FrameBudgetBytes,
		RateClass:        st.RateClass,
		State:            st.State.String(),
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
	_ = b.call(context.Background(), func() {
		for _, s := range b.sessions {
			if s.Active() {
				dst = append(dst, PeerStat{Stats: s.Stats(), Counters: s.Counters(), Memory: s.MemoryUsage()})
			}
		}
	})
	return dst
}
