// Package congestion owns the per-peer congestion response of the game server: an AIMD
// Controller that turns a peer's link signals into one throttle in [floor, 1] and the two levers
// derived from it (how often the peer is sent a snapshot, and how large that snapshot may be), and
// a LossEstimator that measures the peer's application-level snapshot loss from client ACKs.
//
// It is pure policy: it imports nothing from netfleet (the broadcaster maps the netcode config to
// Params with MakeParams), does no I/O, never reads the clock (time is passed in), and allocates
// nothing in any per-tick method.
//
// # Signals
//
//   - Loss: the fraction of snapshot packets the client did not acknowledge, from LossEstimator.
//     ENet's own packetLoss counts only reliable retransmissions and is a ten-second average,
//     far too slow and blind to the unreliable snapshot stream.
//   - RTT: ENet's smoothed round-trip time. ENet measures it on its own periodic reliable pings,
//     so it stays fresh whatever our snapshot cadence; keeping that ping interval short is the
//     broadcaster's job. The controller compares it with a running-minimum baseline.
//   - Acknowledgement round trip: the time from sending a snapshot packet to its first ACK
//     (LossEstimator.TakeAckRTT), the smallest of an evaluation interval against its own
//     running-minimum baseline. Every acknowledged packet measures the path as it is, queue
//     included, where ENet smooths its RTT over pings a quarter of a second apart (a queue
//     building on a thin link shows in it within one evaluation, in ENet's RTT only after a
//     second or two). Either delay signal over the margin makes the peer congested.
//   - Backlog: ENet's reliable bytes in flight.
//
// A zero Sample means "no link stats yet" and reads as healthy.
//
// # The anti-feedback rule
//
// The controller never reads a signal its own decimation pollutes. Sending a peer less must never
// look like a worse link, or each back-off would justify the next and the peer would collapse to
// the floor. So the delay signals are round trips — ENet's pings', and each acknowledged
// packet's from its own send — not the staleness of the client's last acknowledged tick (which
// grows when we send less); sending less yields fewer round-trip samples, not longer ones. The
// loss estimator judges a packet only by wall-clock age against the RTT, and only after the packet
// sent after it has had the same chance to be acknowledged: a slower cadence delays judgment but
// never turns into loss.
//
// # Healthy equals disabled
//
// A healthy peer, a disabled controller, a zero Controller and the all-zero Sample all hold the
// throttle at exactly 1, where SendIntervalTicks is 1 and EffectiveBudget returns the static
// budget unchanged: byte for byte what a server without the controller sends.
package congestion
