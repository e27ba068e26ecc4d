package linkem

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The shorthand profile impairs downstream: client -> server is clean, the server echoes, and the
// client sees the echo's one-way delay.
func TestProxyLoss(t *testing.T) {
	tests := []struct {
		name     string
		prof     Profile
		want     float64
		tolerate float64 // three standard deviations of the measured ratio
	}{
		{"bernoulli 5%", Profile{Down: Impairment{Loss: 0.05}}, 0.05, 0.015},
		// Bursts of 4 make losses correlated: the ratio's deviation is sqrt((1+ρ)/(1-ρ)) ≈ 2.5
		// times the Bernoulli one, ρ = 1-p-r = 0.72.
		{"bursty 10%", Profile{Down: Impairment{Loss: 0.10, LossBurst: 4}}, 0.10, 0.035},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n = 4000
			server, cl := newEndpoint(t, true), newEndpoint(t, false)
			p := startProxy(t, server, Config{Seed: 1, Default: tt.prof})
			cl.sendPaced(t, p.Addr(), 0, n, 200, 20, 5*time.Millisecond)
			ds := settle(t, p, 0, downstream, n, cl)
			got := 1 - float64(cl.count())/n
			t.Logf("measured loss %.2f%% (proxy dropped %d of %d)", 100*got, ds.DroppedLoss, n)
			if math.Abs(got-tt.want) > tt.tolerate {
				t.Errorf("loss %.2f%%, want %.1f%% ± %.1f pp", 100*got, 100*tt.want, 100*tt.tolerate)
			}
			if ds.DroppedLoss+ds.PacketsOut != n {
				t.Errorf("dropped %d + sent %d != %d", ds.DroppedLoss, ds.PacketsOut, n)
			}
		})
	}
}

func TestProxyDelayAndJitter(t *testing.T) {
	// Each client's packets are 25 ms apart, further than the jitter window, so ordering never
	// bends the spread; the clients take turns 3 ms apart, so releases rarely coincide.
	// A loaded machine delays some receives by milliseconds, so the checks use the quartiles,
	// which such a tail barely moves, plus the minimum: the proxy never sends early, so no packet
	// may arrive before the profile's shortest delay.
	tests := []struct {
		name              string
		imp               Impairment
		floor, q1, q2, q3 time.Duration
	}{
		{"fixed 80 ms", Impairment{DelayMs: 80}, 80 * time.Millisecond, 80 * time.Millisecond, 80 * time.Millisecond, 80 * time.Millisecond},
		{
			"80 ms ± 10 uniform", Impairment{DelayMs: 80, JitterMs: 10},
			70 * time.Millisecond, 75 * time.Millisecond, 80 * time.Millisecond, 85 * time.Millisecond,
		},
		{
			// Quartiles of a normal distribution lie 0.6745 σ from the mean.
			"40 ms σ 5 normal", Impairment{DelayMs: 40, JitterMs: 5, JitterDist: JitterNormal},
			0, 36627 * time.Microsecond, 40 * time.Millisecond, 43372 * time.Microsecond,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const clients, perClient = 8, 60
			server := newEndpoint(t, true)
			p := startProxy(t, server, Config{Seed: 2, Default: Profile{Down: tt.imp}})
			cls := make([]*endpoint, clients)
			for i := range cls {
				cls[i] = newEndpoint(t, false)
			}
			for k := range perClient {
				for _, cl := range cls {
					cl.send(t, p.Addr(), uint32(k), 100)
					time.Sleep(3 * time.Millisecond)
				}
			}
			var all []arrival
			for i, cl := range cls {
				settle(t, p, i, downstream, perClient, cl)
				all = append(all, cl.arrivals()...)
			}
			d := delaysOf(all)
			q1, q2, q3 := quantile(d, 0.25), quantile(d, 0.5), quantile(d, 0.75)
			t.Logf("%d samples: min %v q1 %v median %v q3 %v p95 %v max %v; proxy release lateness %+v",
				len(d), d[0], q1, q2, q3, quantile(d, 0.95), d[len(d)-1], p.Stats().Release)
			if d[0] < tt.floor {
				t.Errorf("a packet arrived after %v, before the shortest possible delay %v", d[0], tt.floor)
			}
			if diff := q2 - tt.q2; diff < -3*time.Millisecond || diff > 3*time.Millisecond {
				t.Errorf("median delay %v, want %v ± 3ms", q2, tt.q2)
			}
			for _, q := range []struct {
				name      string
				got, want time.Duration
			}{{"first quartile", q1, tt.q1}, {"third quartile", q3, tt.q3}} {
				if diff := q.got - q.want; diff < -1500*time.Microsecond || diff > 2500*time.Microsecond {
					t.Errorf("%s %v, want %v -1.5ms/+2.5ms", q.name, q.got, q.want)
				}
			}
		})
	}
}

func TestProxyDuplicateAndReorder(t *testing.T) {
	const n = 4000
	server, cl := newEndpoint(t, true), newEndpoint(t, false)
	prof := Profile{Down: Impairment{DelayMs: 5, Duplicate: 0.10, Reorder: 0.05, ReorderDelayMs: 15}}
	p := startProxy(t, server, Config{Seed: 3, Default: prof})
	// 1 ms apart, so a packet held back 15 ms is overtaken by the next ones.
	cl.sendPaced(t, p.Addr(), 0, n, 200, 2, 2*time.Millisecond)
	ds := settle(t, p, 0, downstream, n, cl)
	seen := make(map[uint32]int)
	late := 0
	var highest uint32
	for i, a := range cl.arrivals() {
		seen[a.seq]++
		if seen[a.seq] == 1 {
			if i > 0 && a.seq < highest {
				late++
			}
			highest = max(highest, a.seq)
		}
	}
	dups := 0
	for _, k := range seen {
		dups += k - 1
	}
	if len(seen) != n {
		t.Fatalf("%d distinct packets arrived, want %d", len(seen), n)
	}
	dupRate, lateRate := float64(dups)/n, float64(late)/n
	t.Logf("duplicated %.2f%% (proxy %d), arrived out of order %.2f%% (proxy held back %d)",
		100*dupRate, ds.Duplicated, 100*lateRate, ds.Reordered)
	if math.Abs(dupRate-0.10) > 0.015 || uint64(dups) != ds.Duplicated {
		t.Errorf("duplicates %.2f%% (%d, proxy %d), want 10%% ± 1.5 pp", 100*dupRate, dups, ds.Duplicated)
	}
	if math.Abs(lateRate-0.05) > 0.015 {
		t.Errorf("out of order %.2f%%, want 5%% ± 1.5 pp", 100*lateRate)
	}
}

func TestProxyBandwidthCap(t *testing.T) {
	// Upstream capped at 100 kB/s with a 100 ms queue; the client offers 200 kB/s for 2 s.
	const rate, size, queueMs = 100_000, 500, 100
	const n = 800
	server, cl := newEndpoint(t, false), newEndpoint(t, false)
	prof := Profile{Up: Impairment{RateBytesPerSec: rate, QueueMs: queueMs}}
	p := startProxy(t, server, Config{Seed: 4, Default: prof})
	cl.sendPaced(t, p.Addr(), 0, n, size, 4, 10*time.Millisecond)
	ds := settle(t, p, 0, upstream, n, server)
	got := server.arrivals()
	slices.SortFunc(got, func(a, b arrival) int { return int(a.at - b.at) })
	span := float64(got[len(got)-1].at-got[0].at) / float64(time.Second)
	throughput := float64((len(got)-1)*size) / span
	d := delaysOf(got)
	t.Logf("throughput %.0f B/s over %.2f s; delivered %d, tail-dropped %d of %d; one-way delay p50 %v p95 %v; proxy queue p50 %v p95 %v",
		throughput, span, len(got), ds.DroppedQueue, n, quantile(d, 0.5), quantile(d, 0.95), ds.QueueDelayP50, ds.QueueDelayP95)
	if math.Abs(throughput-rate)/rate > 0.05 {
		t.Errorf("throughput %.0f B/s, want %d ± 5%%", throughput, rate)
	}
	if ds.DroppedQueue < n/4 || ds.DroppedQueue+ds.PacketsOut != n {
		t.Errorf("tail-dropped %d, sent %d of %d: want the excess dropped", ds.DroppedQueue, ds.PacketsOut, n)
	}
	// Once the queue is full every packet waits about the limit.
	queue := time.Duration(queueMs) * time.Millisecond
	if ds.QueueDelayP95 < queue*9/10 || ds.QueueDelayP95 > queue {
		t.Errorf("proxy queueing delay p95 %v, want within [%v, %v]", ds.QueueDelayP95, queue*9/10, queue)
	}
	if p50 := quantile(d, 0.5); p50 < queue*9/10 || p50 > queue+3*time.Millisecond {
		t.Errorf("measured one-way delay median %v, want within [%v, %v]", p50, queue*9/10, queue+3*time.Millisecond)
	}
}

// Two proxies with the same seed drop exactly the same packets; another seed drops others.
func TestProxySameSeedSameDrops(t *testing.T) {
	const n = 2000
	prof := Profile{Up: Impairment{Loss: 0.1, LossBurst: 3, Duplicate: 0.05}}
	received := func(seed uint64) []uint32 {
		server, cl := newEndpoint(t, false), newEndpoint(t, false)
		p := startProxy(t, server, Config{Seed: seed, Default: prof})
		cl.sendPaced(t, p.Addr(), 0, n, 100, 20, 5*time.Millisecond)
		settle(t, p, 0, upstream, n, server)
		var seqs []uint32
		for _, a := range server.arrivals() {
			seqs = append(seqs, a.seq)
		}
		slices.Sort(seqs)
		return seqs
	}
	a, b, c := received(77), received(77), received(78)
	if !slices.Equal(a, b) {
		t.Errorf("same seed: %d vs %d packets, patterns differ", len(a), len(b))
	}
	if slices.Equal(a, c) {
		t.Error("different seeds gave the same pattern")
	}
}

func TestProxyDistinctUpstreamPerClient(t *testing.T) {
	server := newEndpoint(t, true)
	p := startProxy(t, server, Config{})
	cls := []*endpoint{newEndpoint(t, false), newEndpoint(t, false), newEndpoint(t, false)}
	for i, cl := range cls {
		cl.send(t, p.Addr(), uint32(i), 50)
		eventually(t, 10*time.Second, "the echo", func() bool { return cl.count() == 1 })
		if a := cl.arrivals()[0]; a.seq != uint32(i) {
			t.Errorf("client %d got the echo of %d", i, a.seq)
		}
	}
	froms := map[netip.AddrPort]int{}
	for _, a := range server.arrivals() {
		froms[a.from] = int(a.seq)
	}
	st := p.Stats()
	if len(froms) != 3 || len(st.Clients) != 3 {
		t.Fatalf("server saw %d sources, proxy has %d clients; want 3", len(froms), len(st.Clients))
	}
	for i, cs := range st.Clients {
		if cs.Index != i || cs.Addr != cls[i].addr() || froms[cs.Upstream] != i || !cs.Active || cs.Source != "default" {
			t.Errorf("client %d: %+v", i, cs)
		}
	}
}

func TestProxyIdleExpiryAndLimits(t *testing.T) {
	server := newEndpoint(t, true)
	p := startProxy(t, server, Config{IdleTimeout: 200 * time.Millisecond, MaxClients: 1})
	a, b := newEndpoint(t, false), newEndpoint(t, false)
	a.send(t, p.Addr(), 1, 50)
	eventually(t, 10*time.Second, "client a's echo", func() bool { return a.count() == 1 })
	b.send(t, p.Addr(), 2, 50)
	eventually(t, 10*time.Second, "client b to be refused", func() bool { return p.Stats().RefusedPackets == 1 })
	eventually(t, 10*time.Second, "client a to expire", func() bool {
		cs, ok := clientStats(p, 0)
		return ok && !cs.Active
	})
	b.send(t, p.Addr(), 3, 50)
	eventually(t, 10*time.Second, "client b's echo", func() bool { return b.count() == 1 })
	cs, ok := clientStats(p, 1)
	if !ok || cs.Addr != b.addr() || !cs.Active || cs.Up.PacketsOut != 1 || cs.Down.PacketsOut != 1 {
		t.Errorf("client b after a expired: %+v", cs)
	}
}

func TestProxyMemoryLimit(t *testing.T) {
	server := newEndpoint(t, false)
	// Room for a few pooled buffers only; a long delay keeps them held.
	p := startProxy(t, server, Config{MaxBufferedBytes: 5 * poolBufSize, Default: Profile{Up: Impairment{DelayMs: 200}}})
	cl := newEndpoint(t, false)
	for i := range 10 {
		cl.send(t, p.Addr(), uint32(i), 100)
	}
	ds := settle(t, p, 0, upstream, 10, server)
	if ds.DroppedLimit == 0 || ds.DroppedLimit+ds.PacketsOut != 10 {
		t.Errorf("dropped for memory %d, sent %d of 10", ds.DroppedLimit, ds.PacketsOut)
	}
}

// probeSeq numbers the probes of waitDelay, apart from every other test packet.
var probeSeq atomic.Uint32

func init() { probeSeq.Store(1 << 20) }

// waitDelay sends a probe every few milliseconds until the echo of one of them has a delay that
// satisfies ok.
func waitDelay(t *testing.T, cl *endpoint, to netip.AddrPort, what string, ok func(time.Duration) bool) {
	t.Helper()
	first := probeSeq.Add(1)
	eventually(t, 15*time.Second, what, func() bool {
		cl.send(t, to, probeSeq.Add(1), 64)
		for _, a := range cl.arrivals() {
			if a.seq >= first && ok(a.delay) {
				return true
			}
		}
		return false
	})
}

func TestControlEndpoint(t *testing.T) {
	server := newEndpoint(t, true)
	p := startProxy(t, server, Config{ControlAddr: "127.0.0.1:0"})
	base := "http://" + p.ControlAddr()
	cl, other := newEndpoint(t, false), newEndpoint(t, false)
	cl.send(t, p.Addr(), 0, 64)
	other.send(t, p.Addr(), 0, 64)
	eventually(t, 10*time.Second, "both echoes", func() bool { return cl.count() == 1 && other.count() == 1 })

	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := resp.Body.Close(); err != nil {
				t.Error(err)
			}
		}()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}

	code, body := do(http.MethodPut, "/v1/profiles/client:0", `{"delayMs": 60}`)
	if code != http.StatusOK || !strings.Contains(body, `"delayMs": 60`) {
		t.Fatalf("PUT client:0: %d %s", code, body)
	}
	waitDelay(t, cl, p.Addr(), "client 0's delay to reach 60 ms", func(d time.Duration) bool { return d >= 55*time.Millisecond })

	var st Stats
	code, body = do(http.MethodGet, "/v1/stats", "")
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		t.Fatalf("GET stats: %d %v %s", code, err, body)
	}
	if len(st.Clients) != 2 || st.Clients[0].Source != "client:0" || st.Clients[0].Profile.Down.DelayMs != 60 ||
		st.Clients[1].Source != "default" || st.Clients[1].Profile.Down.DelayMs != 0 || st.Release.Packets == 0 {
		t.Errorf("stats after PUT: %s", body)
	}
	other.reset()
	other.send(t, p.Addr(), 1, 64)
	eventually(t, 10*time.Second, "the other client's echo", func() bool { return other.count() == 1 })
	if d := other.arrivals()[0].delay; d > 40*time.Millisecond {
		t.Errorf("client 1 is delayed %v by client 0's profile", d)
	}

	var profs Profiles
	code, body = do(http.MethodGet, "/v1/profiles", "")
	if err := json.Unmarshal([]byte(body), &profs); code != http.StatusOK || err != nil || len(profs.Overrides) != 1 ||
		profs.Overrides[0].Select != ClientSelector(0) {
		t.Errorf("GET profiles: %d %v %s", code, err, body)
	}

	// The default, in YAML shorthand, reaches client 1; client 0 keeps its override.
	if code, body = do(http.MethodPut, "/v1/profiles/default", "delayMs: 30\n"); code != http.StatusOK {
		t.Fatalf("PUT default: %d %s", code, body)
	}
	waitDelay(t, other, p.Addr(), "client 1's delay to reach 30 ms", func(d time.Duration) bool { return d >= 25*time.Millisecond })
	if code, body = do(http.MethodDelete, "/v1/profiles/client:0", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE client:0: %d %s", code, body)
	}
	waitDelay(t, cl, p.Addr(), "client 0 back on the default's 30 ms", func(d time.Duration) bool {
		return d >= 25*time.Millisecond && d < 45*time.Millisecond
	})

	for _, tt := range []struct {
		method, path, body string
		code               int
		msg                string
	}{
		{http.MethodDelete, "/v1/profiles/client:0", "", http.StatusNotFound, "no override"},
		{http.MethodDelete, "/v1/profiles/default", "", http.StatusBadRequest, "only client and address"},
		{http.MethodPut, "/v1/profiles/bogus", `{}`, http.StatusBadRequest, "want default"},
		{http.MethodPut, "/v1/profiles/client:1", `{"loss": 2}`, http.StatusBadRequest, "down.loss"},
		{http.MethodPut, "/v1/profiles/client:1", `{"lose": 0.1}`, http.StatusBadRequest, "unknown field"},
		{http.MethodPut, "/v1/profiles/client:1", `{"loss": 0.1, "down": {}}`, http.StatusBadRequest, "both given"},
		{http.MethodPost, "/v1/profiles/client:1", `{}`, http.StatusMethodNotAllowed, ""},
	} {
		code, body := do(tt.method, tt.path, tt.body)
		if code != tt.code || !strings.Contains(body, tt.msg) {
			t.Errorf("%s %s %s: %d %s, want %d containing %q", tt.method, tt.path, tt.body, code, body, tt.code, tt.msg)
		}
	}
}

func TestScheduleTakesEffect(t *testing.T) {
	sched, err := ParseSchedule([]byte(`
classes:
  slow: {}
rules:
  - select: client:0
    class: slow
steps:
  - at: 300ms
    select: class:slow
    profile: {delayMs: 50}
  - at: 3s
    select: client:0
    profile: {up: {loss: 1}}
`))
	if err != nil {
		t.Fatal(err)
	}
	server := newEndpoint(t, true)
	p := startProxy(t, server, Config{Schedule: sched})
	slow, clean := newEndpoint(t, false), newEndpoint(t, false)
	slow.send(t, p.Addr(), 0, 64)
	clean.send(t, p.Addr(), 0, 64)
	eventually(t, 10*time.Second, "first echoes", func() bool { return slow.count() >= 1 && clean.count() == 1 })
	// Step one gives client 0 its class's delay, well before step two cuts its upstream.
	waitDelay(t, slow, p.Addr(), "the class's 50 ms delay", func(d time.Duration) bool {
		return d >= 45*time.Millisecond && d < 90*time.Millisecond
	})
	if cs, _ := clientStats(p, 0); cs.Source != "class:slow" {
		t.Errorf("client 0's profile comes from %q, want class:slow", cs.Source)
	}
	eventually(t, 10*time.Second, "client 0's upstream loss", func() bool {
		cs, ok := clientStats(p, 0)
		return ok && cs.Source == "client:0" && cs.Profile.Up.Loss == 1
	})
	before := server.count()
	slow.send(t, p.Addr(), 99, 64)
	clean.send(t, p.Addr(), 99, 64)
	eventually(t, 10*time.Second, "the clean client's echo", func() bool { return clean.count() == 2 })
	if d := clean.arrivals()[1].delay; d > 30*time.Millisecond {
		t.Errorf("the clean client is delayed %v", d)
	}
	cs, _ := clientStats(p, 0)
	if server.count() != before+1 || cs.Up.DroppedLoss == 0 {
		t.Errorf("server got %d new packets, client 0 lost %d upstream; want only the clean client's", server.count()-before, cs.Up.DroppedLoss)
	}
}

// TestScheduleStepAtZeroFromFirstPacket: a step at 0s is in force before the proxy reads its
// first packet, so a client's very first packet already takes it.
func TestScheduleStepAtZeroFromFirstPacket(t *testing.T) {
	sched, err := ParseSchedule([]byte("steps:\n- {at: 0s, select: client:0, profile: {up: {duplicate: 1}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		server := newEndpoint(t, true)
		p := startProxy(t, server, Config{Schedule: sched})
		c := newEndpoint(t, false)
		c.send(t, p.Addr(), 0, 64)
		eventually(t, 10*time.Second, "the duplicated first packet's two echoes", func() bool { return c.count() == 2 })
		if cs, _ := clientStats(p, 0); cs.Source != "client:0" || cs.Up.Duplicated != 1 {
			t.Fatalf("client 0: profile from %q, %d duplicated upstream; want client:0's, 1", cs.Source, cs.Up.Duplicated)
		}
	}
}

func TestNewErrors(t *testing.T) {
	server := newEndpoint(t, false)
	up := server.addr().String()
	tests := []struct {
		name string
		cfg  Config
		msg  string
	}{
		{"no listen", Config{Upstream: up}, "Listen is required"},
		{"no upstream", Config{Listen: "127.0.0.1:0"}, "Upstream is required"},
		{"bad upstream", Config{Listen: "127.0.0.1:0", Upstream: "nowhere"}, "upstream"},
		{"bad listen", Config{Listen: "127.0.0.1:99999", Upstream: up}, "listen"},
		{"bad profile", Config{Listen: "127.0.0.1:0", Upstream: up, Default: Profile{Up: Impairment{Duplicate: -1}}}, "up.duplicate"},
		{"public control", Config{Listen: "127.0.0.1:0", Upstream: up, ControlAddr: "0.0.0.0:0"}, "loopback"},
		{"negative", Config{Listen: "127.0.0.1:0", Upstream: up, MaxClients: -1}, "negative"},
		{"rule to unknown class", Config{Listen: "127.0.0.1:0", Upstream: up, Schedule: Schedule{
			Rules: []Rule{{Select: ClientSelector(0), Class: "x"}},
		}}, "not in classes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.cfg)
			if err == nil {
				t.Fatal(errors.Join(fmt.Errorf("New succeeded"), p.Close()))
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not mention %q", err, tt.msg)
			}
		})
	}
}

func TestSetProfileErrors(t *testing.T) {
	server := newEndpoint(t, false)
	p := startProxy(t, server, Config{})
	if err := p.SetProfile(Selector{}, Profile{}); err == nil {
		t.Error("empty selector accepted")
	}
	if err := p.SetProfile(ClassSelector("no spaces"), Profile{}); err == nil {
		t.Error("bad class name accepted")
	}
	if err := p.SetProfile(DefaultSelector(), Profile{Down: Impairment{QueueMs: 5}}); err == nil ||
		!strings.Contains(err.Error(), "needs rateBytesPerSec") {
		t.Errorf("queue without rate: %v", err)
	}
	if err := p.ResetProfile(AddrSelector(netip.MustParseAddrPort("127.0.0.1:9"))); !errors.Is(err, ErrNoOverride) {
		t.Errorf("reset without override: %v", err)
	}
	if err := p.SetProfile(ClassSelector("new"), Profile{}); err != nil {
		t.Error(err)
	}
	if _, ok := p.Profiles().Classes["new"]; !ok {
		t.Error("class not created")
	}
}

// BenchmarkRelease reports how late the scheduler releases packets against their due times — the
// precision of the timing core — with 1 ms of delay and a packet every 250 µs, and the process's
// CPU time per packet (sender and receiver included). The realtime case needs root.
func BenchmarkRelease(b *testing.B) {
	for _, rt := range []bool{false, true} {
		b.Run(fmt.Sprintf("realtime=%v", rt), func(b *testing.B) {
			server, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				b.Fatal(err)
			}
			defer server.Close()
			go func() {
				buf := make([]byte, maxDatagram)
				for {
					if _, err := server.Read(buf); err != nil {
						return
					}
				}
			}()
			p, err := New(Config{
				Listen: "127.0.0.1:0", Upstream: server.LocalAddr().String(), Realtime: rt,
				Default: Profile{Up: Impairment{DelayMs: 1}},
			})
			if err != nil {
				b.Skip(err)
			}
			defer p.Close()
			cl, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(p.Addr()))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			msg := bytes.Repeat([]byte{1}, 200)
			var before, after syscall.Rusage
			if err := syscall.Getrusage(syscall.RUSAGE_SELF, &before); err != nil {
				b.Fatal(err)
			}
			next := time.Now()
			for b.Loop() {
				if _, err := cl.Write(msg); err != nil {
					b.Fatal(err)
				}
				next = next.Add(250 * time.Microsecond)
				time.Sleep(time.Until(next))
			}
			time.Sleep(5 * time.Millisecond)
			if err := syscall.Getrusage(syscall.RUSAGE_SELF, &after); err != nil {
				b.Fatal(err)
			}
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			r := p.Stats().Release
			b.ReportMetric(float64(r.P50)/1e3, "late-p50-µs")
			b.ReportMetric(float64(r.P99)/1e3, "late-p99-µs")
			b.ReportMetric(float64(r.Max)/1e3, "late-max-µs")
			b.ReportMetric(float64(cpu)/1e3/float64(b.N), "cpu-µs/pkt")
		})
	}
}
