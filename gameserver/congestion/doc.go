// Package congestion owns the per-peer congestion response of the game server: an AIMD
// Controller that turns a peer's link signals into one throttle in [floor, 1] and the two levers
// derived from it (how often the peer is sent a snapshot, and how large that snapshot may be); a
// bottleneck response in the same Controller that, once the path shows a queue building at a
// bottleneck, measures the bottleneck's rate and holds the peer's bytes under it; a loss
// response that tells loss the peer's sending causes from loss it does not; and a LossEstimator
// that measures the peer's application-level snapshot loss and delivery from client ACKs.
//
// It is pure policy: it imports nothing from netfleet (the broadcaster maps the netcode config to
// Params with MakeParams), does no I/O, never reads the clock (time is passed in), and allocates
// nothing in any per-tick method.
//
// # Signals
//
//   - Loss: the fraction of snapshot packets the client did not acknowledge, from LossEstimator.
//     ENet's own packetLoss counts only reliable retransmissions and is a ten-second average,
//     far too slow and blind to the unreliable snapshot stream. A packet is judged by the larger
//     of ENet's RTT and the latest acknowledgement round trip, and only once a packet sent after
//     it has been acknowledged (or AckStallMs more has passed), so the ACKs a growing queue or a
//     longer path delays are late, not lost. The estimator also counts its judgments: packets
//     judged, lost, and the runs the lost ones came in (Delivery).
//   - RTT: ENet's smoothed round-trip time. ENet measures it on its own periodic reliable pings,
//     so it stays fresh whatever our snapshot cadence; keeping that ping interval short is the
//     broadcaster's job. The controller compares it with a running-minimum baseline.
//   - Acknowledgement round trip: the time from sending a snapshot packet to its first ACK
//     (LossEstimator.TakeAckRTT), the smallest of an evaluation interval against its own
//     running-minimum baseline. Every acknowledged packet measures the path as it is, queue
//     included, where ENet smooths its RTT over pings a quarter of a second apart (a queue
//     building on a thin link shows in it within one evaluation, in ENet's RTT only after a
//     second or two). Either delay signal over the margin makes the peer delayed. The samples
//     also show a queue growing: each over the margin and later than the one before.
//   - Backlog: ENet's reliable bytes in flight.
//   - Delivery: the bytes of snapshot packets acknowledged so far, when that count last grew,
//     and when the newest packet it counts was sent (LossEstimator.Delivered). Between two
//     counts the path delivered the bytes over one span and was sent them over another; the
//     delivery rate is the bytes over the longer span. When the delivery span is longer by more
//     than a quarter (over at least 50 ms), the path delivered slower than it was sent to: a
//     queue built at a bottleneck, and the rate is the bottleneck's (link paced).
//
// A zero Sample means "no link stats yet" and reads as healthy.
//
// # Congestion, and what is not
//
// A path the peer congests responds to the peer's sending: it queues what it cannot carry, so
// the round trip rises and keeps rising, or it drops what it cannot carry, so the loss falls
// when the peer is sent less. A path that got longer, or that loses packets at random (a radio
// link, a flaky hop), does neither: its delay and its loss stay what they are whatever the peer
// is sent, and backing the peer off costs it updates for nothing. So the controller backs off
// only for signs that respond to the peer's sending:
//
//   - Delay that is a queue. The evaluation that first finds the peer delayed backs it off once;
//     the next ones hold the throttle while the acknowledgement round trip answers. A queue
//     drains when the peer is sent less, or grows on if that was not enough: the round trip
//     leaves the level it rose to, by more than a quarter of the margin or of the rise, and the
//     delay is a queue, backed off for until it ends. A longer path does neither: after
//     PathChangeEvals evaluations at its level, both baselines step up to it and the back-off
//     is undone (any ceiling its onset set, too). A path that delivered slower than it was sent
//     to over two intervals in a row is a queue at once. Delay that only ENet's RTT shows is
//     taken as a queue, as ENet's smoothing makes any rise a ramp.
//   - Loss that comes with a queue (a delay not found to be a longer path, a path delivering
//     slower than it was sent to, or a backlog).
//   - Loss that falls when the peer is sent less, found by a loss test (below).
//   - Loss over the ceiling (LossCeiling), whatever its cause: the loss window's, over about
//     the last two seconds of judged packets, and by more than chance explains (ceilingZ). After
//     such a back-off the next one waits for packets sent after it, and the throttle does not
//     climb back into the loss before it has a verdict.
//   - A backlog over its threshold.
//
// # The loss test
//
// Loss over the threshold with no sign of a queue may be random or may be a path that drops what
// exceeds a rate (a policer, a shallow queue). Sending less tells them apart: a loss test holds
// the peer under a ceiling of LossTestGain of the rate the path delivered its bytes at lately
// (on a path that drops what exceeds a rate, that is the rate, so the test sends under it) and
// watches the loss of the packets sent under it, by runs of losses (a link that loses in bursts
// loses a burst together). It compares them with the runs of the last second before it (a test
// starts once that held lossTestMinRuns): if the loss were random, the runs of both would fall
// among their packets alike.
//
//   - A second run among the test's packets: the loss is random. It does not back the peer off
//     while it goes on, nor is it tested again before LossRetestTicks; the verdict ends once
//     the loss window shows it stopped.
//   - Fewer runs than chance explains at lossTestAlpha: the loss falls when the peer is sent
//     less. The peer is backed off, and for LossCongestiveMs its loss over the threshold is
//     congestion, as in the reference AIMD.
//   - Neither within LossTestMaxMs: too little to tell; the loss is taken as random.
//
// A test costs the peer a share of its bytes for about a second, and only while it loses. The
// throttle holds during it; a queue ends it.
//
// # The throttle
//
// Every EvalIntervalTicks the controller classifies the peer. Congestion cuts the throttle by
// DecreaseFactor (down to the floor), except delay on a path whose bottleneck is known: the
// bottleneck ceiling is the answer to that, and the throttle holds. A peer with none of the
// signals above gains IncreaseStep (up to 1); one whose delay or loss awaits a verdict holds.
// The throttle is held between evaluations.
//
// # The delay baselines
//
// Both delay signals compare a round trip with a running minimum that drifts up at
// BaselineDriftMsPerSecond, so that a slow rise no sign calls a queue is followed. The baselines
// do not drift for BaselineHoldMs after a delay first shows, nor after any sign of a queue; each
// restarts the hold. A step up that holds level is a longer path and is followed at once (the
// delay episode above); after it, ENet's RTT, which climbs to the longer path over seconds, is
// given up to enetCatchUpMs to reach its raised baseline before it counts again. When the link
// heals, its round trips fall back under the margin (the acknowledgements' at once, ENet's
// smoothed RTT within a second or two) and the baselines follow them down at once.
//
// hack/congestion-sim measures the rules over thousands of simulated links, half losing
// packets at random (independently or in bursts, with or without a step in delay), half
// congested (capped with a queue, capped and lossy, policed, or losing capacity midway).
//
// # The bottleneck response
//
// A path sent more than its bottleneck carries builds a queue, and the throttle's levers alone
// cannot match a thin link: the send interval comes in whole ticks (60, 30, 20, 15 Hz...), so
// the bytes sent either exceed the bottleneck and queue, or fall short, and the AIMD sawtooth
// runs through the queue. So the controller measures the bottleneck and paces the peer under it:
//
//   - Finding it. A queue is seen building when two acknowledgement round trips in a row are
//     over the margin, each at least an eighth of the margin longer than the one before (at
//     once, between evaluations), or when every ACK of two evaluation intervals in a row was
//     over the margin and the second interval's were later by an eighth of the margin (at the
//     evaluation). A path whose delay stepped up rises once and then stays: it is not a queue
//     building. If the delivery since the last evaluation was link paced, the path is the
//     bottleneck and that delivery rate its rate. The peer's demand is what it was sent before
//     any ceiling: the highest rate it was sent at over an evaluation interval lately (falling
//     by demandDecay each evaluation, so a throttle's back-off just before does not hide it),
//     or over the span that showed the queue. A ceiling found again keeps it.
//   - Drain. The ceiling — the peer's byte rate at most — drops to DrainGain of the bottleneck
//     rate until an interval's ACKs come back within the margin, or at most twice the time the
//     queue the ACKs showed takes to drain at that gain.
//   - Cruise. The ceiling is CruiseGain of the bottleneck rate. A queue growing at the cruise
//     (found at an evaluation, as above) shows the bottleneck rate too high, by less than the
//     link-paced test tells over a thin peer's few packets an interval: the bottleneck rate
//     becomes what the path delivered over the interval, and the drain starts again. An
//     interval with no queue and no frame the ceiling cut (the peer wanted no more) releases
//     it — unless the peer is sent less often for its demand (below): a frame that waited two
//     ticks wants about what one that waited one did, so the ceiling's larger frame carrying
//     all of it says nothing of what the peer wants every tick. Only a probe tells.
//   - Probe. After ProbeIntervalEvals cruising evaluations with no queue the ceiling rises to
//     ProbeGain for long enough to send three frames, sent as often as the probe's ceiling
//     affords MinFrameBytes frames (every tick on all but thin paths) so that they ask for what
//     the peer wants every tick, then runs at 2-ProbeGain as long, which drains what the probe
//     queued. The probe is judged by the delivery rate of its own packets:
//     link paced although the peer used all the probe allowed, the bottleneck rate becomes the
//     rate delivered; kept pace with a peer that used it all, faster than the bottleneck by
//     half the probe's gain, the bottleneck rate becomes the rate delivered over CruiseGain and
//     the next probe starts at once; kept pace with a peer that did not use it all, the ceiling
//     is released — unless the probe went out less often than every tick, the path delivered
//     more than the bottleneck rate, and the peer sent every tick would want more than the
//     probe allowed (a frame that waited n ticks wants about what one that waited a tick does,
//     so the rate delivered times n): then the bottleneck rate becomes the rate delivered and
//     the next probe starts at once. Anything else leaves the estimate alone.
//   - Levers. The ceiling (never under one MinFrameBytes frame every MaxIntervalTicks) caps the
//     session's pacing rate (ByteRateCeiling). The send interval is at least the ticks a
//     MinFrameBytes frame takes at the ceiling and, outside a probe, two ticks when a frame of
//     the peer's demand (its demand over the tick rate) takes one and a half ticks or more to
//     cross the bottleneck; a frame is at most the ceiling's bytes over that interval
//     (FrameCeilingBytes), however rarely the throttle sends: a frame crosses the bottleneck
//     at its rate, so a larger one would queue behind itself. A path that carries half of
//     what the peer was sent is thus sent every other tick frames about the size they had,
//     paced just under what it delivers: the rate lever of the reference design, set by the
//     measured bottleneck. Sent every tick, a larger share of such a path would go to headers
//     (ENet's, UDP's and IP's take about 40 bytes a packet: 2.4 kB/s at 60 Hz, against 1.2 at
//     30). The cost is in snapshot age: a frame twice as large takes twice as long to cross
//     the bottleneck, about 30 ms rather than 15 on such a path; the demand never asks for a
//     longer interval, so a frame crosses within about two tick periods.
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
// never turns into loss. Sending less slows the delivery rate but never makes it link paced: the
// span the bytes were sent over stretches as much as the one they were delivered over. And the
// bottleneck rate is only ever lowered by a queue the path builds, or by a probe the peer used in
// full: a peer that sends less than its ceiling proves nothing about its path. The delay episode
// and the loss test send the peer less on purpose and look for the delay or the loss to fall:
// neither can fall because the peer is sent less unless the path responds to the peer's sending,
// which is what they test.
//
// # Healthy equals disabled
//
// A healthy peer, a disabled controller, a zero Controller and the all-zero Sample all hold the
// throttle at exactly 1 and have no ceiling, where SendIntervalTicks is 1 and EffectiveBudget
// returns the static budget unchanged: byte for byte what a server without the controller sends.
// A path that never shows a queue building never gets a bottleneck ceiling, and one that never
// loses more than the threshold is never tested.
package congestion
