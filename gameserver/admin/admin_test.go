package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netfleet/netfleet/api/netcode"
)

const testToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// fakeRuntime records what it applies; it can refuse configs or never take them.
type fakeRuntime struct {
	mu      sync.Mutex
	applied []netcode.NetcodeConfig
	refuse  error
	stall   bool
	tick    atomic.Uint64
	peers   []netcode.PeerInfo
}

func (f *fakeRuntime) Apply(ctx context.Context, r netcode.Resolved) error {
	cfg := r.Config()
	f.mu.Lock()
	refuse, stall := f.refuse, f.stall
	f.mu.Unlock()
	if stall {
		<-ctx.Done()
		return ctx.Err()
	}
	if refuse != nil {
		return refuse
	}
	f.mu.Lock()
	f.applied = append(f.applied, cfg)
	f.mu.Unlock()
	return nil
}

func (f *fakeRuntime) Peers(dst []netcode.PeerInfo) []netcode.PeerInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append(dst, f.peers...)
}

// set changes the runtime's behaviour between requests.
func (f *fakeRuntime) set(fn func(*fakeRuntime)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeRuntime) Tick() uint64 { return f.tick.Load() }

func (f *fakeRuntime) appliedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.applied)
}

func newTestServer(t *testing.T, rt *fakeRuntime, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	if opts.Token == "" {
		opts.Token = testToken
	}
	s, err := New(rt, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return s, hs
}

func pushBody(t testing.TB, gen int64, cfg netcode.NetcodeConfig) []byte {
	t.Helper()
	raw, err := json.Marshal(netcode.ConfigPush{Generation: gen, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func do(t *testing.T, method, url, token string, body []byte) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw, resp.Header
}

func i32(v int32) *int32 { return &v }

func TestPutNetcode(t *testing.T) {
	tick30 := netcode.NetcodeConfig{TickRateHz: 30}
	tick90 := netcode.NetcodeConfig{TickRateHz: 90}
	badMinSend := netcode.NetcodeConfig{TickRateHz: 30, Congestion: netcode.CongestionConfig{MinSendHz: 40}}
	runtimeInvariant := &netcode.ValidationError{Fields: []netcode.FieldError{{Field: "memory.framePoolBudgetBytes", Detail: "pool too small for the sessions"}}}

	tests := []struct {
		name string
		// running is pushed (generation 5, tick30) before the step under test.
		skipRunning bool
		method      string
		token       string
		body        []byte
		rawReq      func(url string) *http.Request
		refuse      error
		stall       bool
		wantCode    int
		wantField   string
		wantGen     int64 // generation running afterwards
		wantHash    string
		wantApplied int // Apply calls in total
	}{
		{name: "first push applies", skipRunning: true, body: pushBody(t, 1, tick30), wantCode: 200, wantGen: 1, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "newer generation applies", body: pushBody(t, 6, tick90), wantCode: 200, wantGen: 6, wantHash: tick90.Hash(), wantApplied: 2},
		{name: "newer generation same config needs no apply", body: pushBody(t, 6, tick30), wantCode: 200, wantGen: 6, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "same generation same config is idempotent", body: pushBody(t, 5, tick30), wantCode: 200, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "same generation other config conflicts", body: pushBody(t, 5, tick90), wantCode: 409, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "older generation conflicts", body: pushBody(t, 4, tick90), wantCode: 409, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "invalid config refused with field", body: pushBody(t, 6, badMinSend), wantCode: 422, wantField: "congestion.minSendHz", wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "generation zero refused", skipRunning: true, body: pushBody(t, 0, tick30), wantCode: 422, wantField: "generation", wantGen: 0, wantHash: netcode.NetcodeConfig{}.Hash()},
		{name: "runtime refusal keeps old config", body: pushBody(t, 6, tick90), refuse: runtimeInvariant, wantCode: 422, wantField: "memory.framePoolBudgetBytes", wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "runtime plain refusal", body: pushBody(t, 6, tick90), refuse: errors.New("no"), wantCode: 422, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "tick loop too slow", body: pushBody(t, 6, tick90), stall: true, wantCode: 503, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "no token", token: "-", body: pushBody(t, 6, tick90), wantCode: 401, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "wrong token", token: strings.Repeat("f", 64), body: pushBody(t, 6, tick90), wantCode: 401, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "token prefix", token: testToken[:63], body: pushBody(t, 6, tick90), wantCode: 401, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "malformed json", body: []byte(`{"generation": 6, "config": {`), wantCode: 400, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "wrong type", body: []byte(`{"generation": "6"}`), wantCode: 400, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "unknown field", body: []byte(`{"generation": 6, "config": {"tickRate": 30}}`), wantCode: 400, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "trailing data", body: append(pushBody(t, 6, tick90), []byte(`{}`)...), wantCode: 400, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "empty body", body: nil, wantCode: 400, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "oversized body", body: oversized(t), wantCode: 413, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "oversized chunked body", rawReq: func(url string) *http.Request {
			// No Content-Length: the limit must hold while reading.
			req, err := http.NewRequest(http.MethodPut, url, io.MultiReader(bytes.NewReader(oversized(t))))
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = -1
			req.Header.Set("Authorization", "Bearer "+testToken)
			return req
		}, wantCode: 413, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "wrong method", method: http.MethodPost, body: pushBody(t, 6, tick90), wantCode: 405, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
		{name: "delete not allowed", method: http.MethodDelete, wantCode: 405, wantGen: 5, wantHash: tick30.Hash(), wantApplied: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := &fakeRuntime{}
			s, hs := newTestServer(t, rt, Options{ApplyTimeout: 50 * time.Millisecond})
			url := hs.URL + netcode.PathNetcode
			if !tc.skipRunning {
				if code, body, _ := do(t, http.MethodPut, url, testToken, pushBody(t, 5, tick30)); code != 200 {
					t.Fatalf("set-up push: %d %s", code, body)
				}
			}
			rt.set(func(f *fakeRuntime) { f.refuse, f.stall = tc.refuse, tc.stall })
			before := s.Status()

			var code int
			var body []byte
			var hdr http.Header
			if tc.rawReq != nil {
				resp, err := http.DefaultClient.Do(tc.rawReq(url))
				if err != nil {
					t.Fatal(err)
				}
				code, hdr = resp.StatusCode, resp.Header
				body, _ = io.ReadAll(resp.Body)
				_ = resp.Body.Close()
			} else {
				method, token := tc.method, tc.token
				if method == "" {
					method = http.MethodPut
				}
				switch token {
				case "":
					token = testToken
				case "-":
					token = ""
				}
				code, body, hdr = do(t, method, url, token, tc.body)
			}
			if code != tc.wantCode {
				t.Fatalf("status %d, want %d; body %s", code, tc.wantCode, body)
			}
			if got := hdr.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q", got)
			}
			after := s.Status()
			if after.Generation != tc.wantGen || after.Hash != tc.wantHash {
				t.Errorf("running generation %d hash %s, want %d %s", after.Generation, after.Hash, tc.wantGen, tc.wantHash)
			}
			if after.InstanceID != before.InstanceID {
				t.Errorf("instance id changed")
			}
			if n := rt.appliedCount(); n != tc.wantApplied {
				t.Errorf("Apply ran %d times, want %d", n, tc.wantApplied)
			}
			if code == 200 {
				var st netcode.ConfigStatus
				if err := json.Unmarshal(body, &st); err != nil {
					t.Fatal(err)
				}
				if st.Generation != after.Generation || st.Hash != after.Hash || st.InstanceID != after.InstanceID {
					t.Errorf("answer %+v does not match the running status %+v", st, after)
				}
				return
			}
			var er netcode.ErrorResponse
			if err := json.Unmarshal(body, &er); err != nil {
				t.Fatalf("error body %q: %v", body, err)
			}
			if er.Error == "" || er.Field != tc.wantField {
				t.Errorf("error %+v, want field %q", er, tc.wantField)
			}
			if strings.Contains(string(body), testToken) {
				t.Errorf("answer contains the token")
			}
			switch code {
			case 409:
				if er.Generation != before.Generation {
					t.Errorf("409 names generation %d, want %d", er.Generation, before.Generation)
				}
			case 401:
				if hdr.Get("WWW-Authenticate") == "" {
					t.Errorf("401 without WWW-Authenticate")
				}
			case 405:
				if hdr.Get("Allow") != "GET, HEAD, PUT" {
					t.Errorf("Allow %q", hdr.Get("Allow"))
				}
			}
		})
	}
}

func oversized(t testing.TB) []byte {
	t.Helper()
	// A valid push padded with whitespace past the limit.
	b := pushBody(t, 6, netcode.NetcodeConfig{})
	return append(b, bytes.Repeat([]byte(" "), netcode.MaxAdminBodyBytes)...)
}

func TestGetEndpoints(t *testing.T) {
	rt := &fakeRuntime{peers: []netcode.PeerInfo{{Slot: 3, SendRateHz: 30, RateClass: 2, State: "degraded"}}}
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "netfleet_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Inc()
	s, hs := newTestServer(t, rt, Options{Gatherer: reg, Initial: netcode.MustResolve(netcode.NetcodeConfig{TickRateHz: 20})})

	code, body, _ := do(t, http.MethodGet, hs.URL+netcode.PathNetcode, "", nil)
	var st netcode.ConfigStatus
	if err := json.Unmarshal(body, &st); code != 200 || err != nil {
		t.Fatalf("GET netcode: %d %s %v", code, body, err)
	}
	initial := netcode.NetcodeConfig{TickRateHz: 20}.Default()
	if st.Generation != 0 || st.Hash != initial.Hash() || st.Config.TickRateHz != 20 || len(st.InstanceID) != 32 || st.InstanceID != s.InstanceID() {
		t.Errorf("initial status %+v", st)
	}

	code, body, _ = do(t, http.MethodGet, hs.URL+netcode.PathPeers, "", nil)
	var peers netcode.PeersResponse
	if err := json.Unmarshal(body, &peers); code != 200 || err != nil || len(peers.Peers) != 1 || peers.Peers[0].Slot != 3 {
		t.Errorf("GET peers: %d %s %v", code, body, err)
	}
	rt.set(func(f *fakeRuntime) { f.peers = nil })
	if _, body, _ = do(t, http.MethodGet, hs.URL+netcode.PathPeers, "", nil); !strings.Contains(string(body), `"peers":[]`) {
		t.Errorf("no peers must be an empty list: %s", body)
	}

	if code, _, _ = do(t, http.MethodGet, hs.URL+netcode.PathHealthz, "", nil); code != 200 {
		t.Errorf("healthz %d", code)
	}
	code, body, _ = do(t, http.MethodGet, hs.URL+netcode.PathMetrics, "", nil)
	if code != 200 || !strings.Contains(string(body), "netfleet_test_total 1") {
		t.Errorf("metrics: %d %s", code, body)
	}
	if code, _, _ = do(t, http.MethodGet, hs.URL+"/v2/nothing", "", nil); code != 404 {
		t.Errorf("unknown path %d", code)
	}
	code, _, hdr := do(t, http.MethodPut, hs.URL+netcode.PathPeers, testToken, nil)
	if code != 405 || hdr.Get("Allow") != "GET, HEAD" {
		t.Errorf("PUT peers: %d allow %q", code, hdr.Get("Allow"))
	}
	if code, _, _ = do(t, http.MethodHead, hs.URL+netcode.PathHealthz, "", nil); code != 200 {
		t.Errorf("HEAD healthz %d", code)
	}
}

func TestMetricsAbsentWithoutGatherer(t *testing.T) {
	_, hs := newTestServer(t, &fakeRuntime{}, Options{})
	if code, _, _ := do(t, http.MethodGet, hs.URL+netcode.PathMetrics, "", nil); code != 404 {
		t.Errorf("metrics without a gatherer: %d", code)
	}
}

func TestReadyz(t *testing.T) {
	tests := []struct {
		name      string
		ticked    bool
		pushed    bool
		readyInit bool
		want      int
	}{
		{name: "not ticking", pushed: true, want: 503},
		{name: "ticking, no push yet", ticked: true, want: 503},
		{name: "ticking and pushed", ticked: true, pushed: true, want: 200},
		{name: "ticking, initial config allowed", ticked: true, readyInit: true, want: 200},
		{name: "initial config allowed, not ticking", readyInit: true, want: 503},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := &fakeRuntime{}
			_, hs := newTestServer(t, rt, Options{ReadyWithoutPush: tc.readyInit})
			if tc.ticked {
				rt.tick.Store(1)
			}
			if tc.pushed {
				if code, body, _ := do(t, http.MethodPut, hs.URL+netcode.PathNetcode, testToken, pushBody(t, 1, netcode.NetcodeConfig{})); code != 200 {
					t.Fatalf("push %d %s", code, body)
				}
			}
			if code, body, _ := do(t, http.MethodGet, hs.URL+netcode.PathReadyz, "", nil); code != tc.want {
				t.Errorf("readyz %d (%s), want %d", code, body, tc.want)
			}
		})
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	tests := []struct {
		name string
		rt   Runtime
		opts Options
	}{
		{name: "nil runtime", opts: Options{Token: testToken}},
		{name: "no token", rt: &fakeRuntime{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.rt, tc.opts); err == nil {
				t.Error("New accepted it")
			}
		})
	}
}

// TestConcurrentPushes races pushes of many generations: the running generation only grows and
// ends at the newest, and the runtime sees the configs in generation order.
func TestConcurrentPushes(t *testing.T) {
	rt := &fakeRuntime{}
	s, hs := newTestServer(t, rt, Options{})
	const n = 40
	var wg sync.WaitGroup
	for g := int64(1); g <= n; g++ {
		wg.Go(func() {
			cfg := netcode.NetcodeConfig{TickRateHz: int32(10 + g)}
			req, err := http.NewRequest(http.MethodPut, hs.URL+netcode.PathNetcode, bytes.NewReader(pushBody(t, g, cfg)))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			_ = resp.Body.Close()
			if resp.StatusCode != 200 && resp.StatusCode != 409 {
				t.Errorf("generation %d: status %d", g, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	if st := s.Status(); st.Generation != n || st.Config.TickRateHz != 10+n {
		t.Errorf("running generation %d tick rate %d, want %d", st.Generation, st.Config.TickRateHz, n)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for i := 1; i < len(rt.applied); i++ {
		if rt.applied[i].TickRateHz <= rt.applied[i-1].TickRateHz {
			t.Fatalf("applied out of generation order: %d after %d", rt.applied[i].TickRateHz, rt.applied[i-1].TickRateHz)
		}
	}
}

// TestTokenNeverLogged pushes with the right and a wrong token and refused configs, and greps the
// log.
func TestTokenNeverLogged(t *testing.T) {
	var buf syncBuffer
	rt := &fakeRuntime{}
	_, hs := newTestServer(t, rt, Options{Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	url := hs.URL + netcode.PathNetcode
	do(t, http.MethodPut, url, testToken, pushBody(t, 1, netcode.NetcodeConfig{}))
	do(t, http.MethodPut, url, testToken, pushBody(t, 2, netcode.NetcodeConfig{TickRateHz: 5}))
	do(t, http.MethodPut, url, testToken+"x", pushBody(t, 3, netcode.NetcodeConfig{}))
	rt.set(func(f *fakeRuntime) { f.refuse = errors.New("refused") })
	do(t, http.MethodPut, url, testToken, pushBody(t, 3, netcode.NetcodeConfig{TickRateHz: 30}))
	out := buf.String()
	if !strings.Contains(out, "config applied") || !strings.Contains(out, "refused") {
		t.Fatalf("expected push records in the log:\n%s", out)
	}
	if strings.Contains(out, testToken) || strings.Contains(out, testToken[:16]) {
		t.Errorf("token in the log:\n%s", out)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServeShutsDown(t *testing.T) {
	rt := &fakeRuntime{}
	s, err := New(rt, Options{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	resp, err := http.Get(fmt.Sprintf("http://%s%s", ln.Addr(), netcode.PathHealthz))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

// FuzzPutNetcode feeds arbitrary bodies to PUT /v1/netcode: the handler never panics, answers
// only with the documented codes, and never rolls the running generation back.
func FuzzPutNetcode(f *testing.F) {
	f.Add(pushBody(f, 1, netcode.NetcodeConfig{}))
	f.Add(pushBody(f, 7, netcode.NetcodeConfig{TickRateHz: 30, Congestion: netcode.CongestionConfig{MinSendHz: 40}}))
	f.Add(pushBody(f, 2, netcode.NetcodeConfig{Budget: netcode.BudgetConfig{SnapshotBytesPerTick: i32(10)}}))
	f.Add([]byte(`{"generation":3,"config":{"memory":{"framePoolBudgetBytes":-1}}}`))
	f.Add([]byte(`{"generation":1e99}`))
	f.Add([]byte(`[]`))
	f.Add([]byte{0xff, 0x00})
	rt := &fakeRuntime{}
	s, err := New(rt, Options{Token: testToken})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		before := s.Status().Generation
		req := httptest.NewRequest(http.MethodPut, netcode.PathNetcode, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 400, 409, 413, 422:
		default:
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		if after := s.Status().Generation; after < before {
			t.Fatalf("generation went back from %d to %d", before, after)
		}
	})
}
