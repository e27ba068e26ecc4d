// Package metrics owns a game server's Prometheus metrics: a Collector that the tick loop feeds
// through broadcast's hooks (Options.OnTick, OnSecond, OnPeerEnd) and that a registry reads at
// scrape time. docs/observability.md lists every series with its labels and the series count.
//
// # Hot path
//
// The tick loop never builds a metric. After every tick it observes the tick duration in a
// histogram (an atomic update); once a second it hands over every connected peer's figures,
// which the Collector copies into a buffer allocated up front, under a mutex, and folds into the
// per-server histograms and totals. Scrapes copy that buffer out under the same mutex and build
// the series from the copy, so a slow scrape never holds the tick loop up. None of the three
// hooks allocates once warm.
//
// # Per-peer series
//
// A peer is named by its slot index (label peer), never by address or player id, so the label's
// values are bounded by the slot count. A peer's series exist while it is connected: a session
// that ends leaves the buffer at once, and a new peer in the same slot starts with fresh
// counters. NetcodeConfig.observability.perPeerMetrics (read live from the running config at
// every scrape) turns the per-peer series off for large fleets; the per-server histograms of
// peer send rate, loss and RTT are always exported. Each of them is observed once a second for
// every connected peer, so it is a distribution over peer-seconds: "the share of peer-seconds
// whose RTT was at most 100 ms".
//
// # Per-server totals
//
// Skips, inbound refusals and the like are counted per session by the session package, and a
// session's counters start again with every peer. The Collector keeps the server's totals: once
// a second, and when a session ends, it adds what each session counted since it last looked.
//
// It imports api/netcode, the Prometheus client and the gameserver packages broadcast (the hook
// types), session, protocol (close codes) and enet (the C heap gauge); it must not import the
// admin API, which serves it as a prometheus.Gatherer.
package metrics
