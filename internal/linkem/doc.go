// Package linkem is netfleet's userspace link emulator: a UDP proxy that sits between game clients
// and a game server and impairs each client's path on its own — loss (Bernoulli or bursty
// Gilbert-Elliott), delay, jitter, reordering, duplication, a policer (a token bucket that drops
// what exceeds its rate) and a bandwidth cap with a finite tail-drop queue — so that congestion
// response can be exercised on loopback, where the kernel offers no netem.
//
// A Proxy listens on one UDP address. Every client source address gets its own upstream socket,
// so the server sees one distinct peer per client, and both directions (upstream: client to
// server; downstream: server to client) are impaired independently by the client's Profile.
// Profiles are chosen per client (by index in order of first packet, by source address, by
// class, or the default) and can change while traffic flows: from Go (Proxy.SetProfile), from a
// timed Schedule, or over a small loopback-only HTTP control endpoint.
//
// Every random decision comes from seeded generators private to one client, one direction and one
// kind of decision, so the same seed and the same packet sequence give the same decisions, and
// e.g. the loss pattern does not shift when jitter is changed.
//
// Timing: a packet's model time is the kernel's receive timestamp, so a reader goroutine that
// runs late does not lengthen the emulated delay. Packets are released by a single scheduler
// goroutine on its own thread, holding a timer heap; it sleeps in ppoll(2) (nanosecond timeout,
// where Go timers round to the netpoller's millisecond) until shortly before the next packet is
// due and spins the rest. Config.Realtime puts that thread at SCHED_FIFO priority so a loaded
// machine does not delay releases. Stats.Release reports the lateness actually achieved.
//
// linkem is a test and demo tool: it imports nothing from netfleet, and nothing in the game
// server or the operator may import it outside tests.
package linkem
