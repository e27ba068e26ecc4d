package metrics

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/admin"
	"github.com/netfleet/netfleet/gameserver/broadcast"
	"github.com/netfleet/netfleet/gameserver/demo"
	"github.com/netfleet/netfleet/internal/botswarm"
)

// Series counts, as docs/observability.md states them.
const (
	// serverSeries are the netfleet_ series of a game server whatever its peers: four histograms
	// (tick 10 buckets, send rate 12, loss 9, RTT 11; each plus +Inf, _sum and _count: 13 + 15 +
	// 12 + 14 = 54) and 50 single series (connected 1, sessions 3, skips 3, closes 7,
	// disconnects 1, inbound refusals 4, pool bytes 3 and budgets 3, connect refusals 1, malformed
	// datagrams 1, peer refusals 1, game join refusals 1 and errors 1, handshake refusals 2,
	// connect tokens accepted 1 and refused 8, transport 4, C heap 1, overloaded 1, overload
	// spans 1, config generation 1 and info 1).
	serverSeries = 104
	// perPeerSeries are the series of one connected peer while perPeerMetrics is on.
	perPeerSeries = 8
	// scrapePeers is the peer count the series are measured with.
	scrapePeers = 64
)

// TestScrapeWithPeers scrapes a real game server (broadcaster, admin API) with 64 real ENet
// clients connected: the exposition passes promtool check metrics, has the documented series
// count with per-peer series on and, after a live config push, off; once the clients leave,
// every per-peer series is gone and every session end is counted.
func TestScrapeWithPeers(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool (Debian package prometheus, make deps): %v", err)
	}
	initial := netcode.NetcodeConfig{}
	// All bots connect from one address at once: the per-source connect limit must admit them.
	initial.Ingress.ConnectsPerSecondPerHost = 1000
	initial.Ingress.ConnectBurstPerHost = 1000
	// The test counts series of peers that stay connected: on a machine loaded enough that the
	// bots (in this process, under the race detector) fall behind, a stalled or silent session
	// is kept rather than closed. Closes are tested in gameserver/session and broadcast.
	initial.Backpressure.CloseStalledAfterMs = 600000
	initial.Backpressure.PingTimeoutMs = 600000

	var srv *admin.Server
	col := New(Options{Slots: scrapePeers, Status: func() netcode.ConfigStatus { return srv.Status() }})
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), col)
	g, err := demo.NewGame(demo.GameConfig{World: demo.Config{Seed: 3, Population: 100, HalfExtent: 300}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broadcast.New(broadcast.Options{
		Address:   netip.MustParseAddrPort("127.0.0.1:0"),
		MaxPeers:  scrapePeers,
		Game:      g,
		Store:     g.Store(),
		Netcode:   netcode.MustResolve(initial),
		OnTick:    col.ObserveTick,
		OnSecond:  col.ObserveSecond,
		OnPeerEnd: col.ObservePeerEnd,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err = admin.New(b, admin.Options{Token: "t0ken", Initial: netcode.MustResolve(initial), Gatherer: reg, ReadyWithoutPush: true})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- b.Run() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := b.Stop(ctx); err != nil {
			t.Error(err)
		}
		if err := <-runErr; err != nil {
			t.Error(err)
		}
	})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	swarm, err := botswarm.New(botswarm.Config{
		Server:   b.Address(),
		Classes:  []botswarm.Class{{Name: "bots", Count: scrapePeers}},
		Duration: 50 * time.Second,
		Ramp:     time.Second,
		Seed:     1,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := swarm.Start(ctx); err != nil {
		t.Fatal(err)
	}
	swarmDone := make(chan struct{})
	go func() { swarm.Wait(); close(swarmDone) }()

	// Every peer's series once every bot is connected and a second was published with them all.
	raw := pollScrape(t, hs.URL, "all peers' series", func(s scrape) bool { return s.perPeer == scrapePeers })
	s := parseScrape(raw)
	t.Logf("perPeerMetrics on, %d peers: %d netfleet_ series (%d per-peer), %d series in all", scrapePeers, s.netfleet, s.perPeer*perPeerSeries, s.total)
	if want := serverSeries + perPeerSeries*scrapePeers; s.netfleet != want {
		t.Errorf("perPeerMetrics on: %d netfleet_ series, want %d + %d * %d = %d", s.netfleet, serverSeries, perPeerSeries, scrapePeers, want)
	}
	checkMetrics(t, promtool, raw)

	// The switch is live: a pushed config turns per-peer series off, the histograms stay.
	off := false
	cfg := initial
	cfg.Observability.PerPeerMetrics = &off
	push(t, hs.URL, netcode.ConfigPush{Generation: 2, Config: cfg})
	raw = scrapeOnce(t, hs.URL)
	s = parseScrape(raw)
	t.Logf("perPeerMetrics off, %d peers: %d netfleet_ series, %d series in all", scrapePeers, s.netfleet, s.total)
	if s.netfleet != serverSeries || s.perPeer != 0 {
		t.Errorf("perPeerMetrics off: %d netfleet_ series (%d peers' send rates), want %d", s.netfleet, s.perPeer, serverSeries)
	}
	if !strings.Contains(string(raw), "netfleet_gameserver_config_generation 2\n") {
		t.Error("the pushed generation 2 is not exported")
	}
	checkMetrics(t, promtool, raw)

	// The bots leave; with per-peer series back on, none is left, and every end is counted.
	cfg.Observability.PerPeerMetrics = nil
	push(t, hs.URL, netcode.ConfigPush{Generation: 3, Config: cfg})
	cancel()
	<-swarmDone
	raw = pollScrape(t, hs.URL, "every session ended", func(s scrape) bool { return s.ended == scrapePeers })
	s = parseScrape(raw)
	if s.perPeer != 0 || s.netfleet != serverSeries {
		t.Errorf("after the peers left: %d peers' send rates, %d netfleet_ series, want 0 and %d", s.perPeer, s.netfleet, serverSeries)
	}
}

// scrape is what a test reads off an exposition.
type scrape struct {
	total, netfleet int
	// perPeer counts the peers with series; ended the sessions ended (closed or disconnected).
	perPeer int
	ended   float64
}

func parseScrape(raw []byte) scrape {
	var s scrape
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s.total++
		if strings.HasPrefix(line, "netfleet_") {
			s.netfleet++
		}
		if strings.HasPrefix(line, "netfleet_gameserver_peer_send_rate_hertz{") {
			s.perPeer++
		}
		if strings.HasPrefix(line, "netfleet_gameserver_session_closes_total{") || strings.HasPrefix(line, "netfleet_gameserver_peer_disconnects_total ") {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				s.ended += v
			}
		}
	}
	return s
}

func scrapeOnce(t *testing.T, base string) []byte {
	t.Helper()
	resp, err := http.Get(base + netcode.PathMetrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %v, status %d: %s", err, resp.StatusCode, raw)
	}
	return raw
}

// pollScrape scrapes until ok holds, bounded by a deadline generous for a loaded machine.
func pollScrape(t *testing.T, base, what string, ok func(scrape) bool) []byte {
	t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	for {
		raw := scrapeOnce(t, base)
		s := parseScrape(raw)
		if ok(s) {
			return raw
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: last scrape %+v", what, s)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func push(t *testing.T, base string, p netcode.ConfigPush) {
	t.Helper()
	body, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPut, base+netcode.PathNetcode, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer t0ken")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("push generation %d: %d %s", p.Generation, resp.StatusCode, msg)
	}
}

// checkMetrics runs promtool check metrics on an exposition.
func checkMetrics(t *testing.T, promtool string, raw []byte) {
	t.Helper()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(raw)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
