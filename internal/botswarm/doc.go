// Package botswarm is netfleet's load harness: it runs many real game clients ("bots") against
// a game server over ENet and measures what each of them observes, and it drives bounded
// connect/close churn from one host.
//
// Each bot has its own ENet client host (its own UDP socket, so a link emulator in front of
// the server can impair it alone) served by one goroutine. A bot decodes every SNAPSHOT with
// gameserver/client, keeping the baselines deltas resolve against; it acknowledges on receipt
// (one ACK after each batch of packets a Service call returns, as the server's loss estimator
// expects), sends a PING every 250 ms and, optionally, COMMANDs at a fixed rate. Bots reach the
// server directly or through a per-class address, e.g. a linkem proxy.
//
// Per bot and per second of the run it records the observed snapshot rate (distinct server
// ticks received), packets, bytes, packets missing from the server's sequence, entity records
// applied and unapplied, and a bounded histogram of snapshot age (receive time minus the
// server's time stamp in the packet). Summarize condenses any window of seconds for any set of
// bots, which is what reports, tests and the congestion benchmark build on. The disconnect code
// of a session the server ends is kept (protocol.Close*).
//
// Second t of every series is [StartTime+t s, StartTime+(t+1) s); only seconds a bot was
// connected for throughout ("full") enter summaries.
//
// botswarm is a test and benchmark tool: the game server must not import it. It imports the
// client side of the game (gameserver/client, gameserver/protocol) and the ENet binding, and
// nothing that runs a server.
package botswarm
