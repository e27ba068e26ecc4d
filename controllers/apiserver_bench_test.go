package controllers

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/netfleet/netfleet/internal/testenv"
)

// apiRequests are the API server's request counts (apiserver_request_total summed over codes and
// scopes), keyed "verb resource" or "verb resource/subresource". The difference of two readings
// is what a benchmark run cost the API server in requests.
type apiRequests map[string]float64

// readAPIRequests scrapes the test API server's /metrics.
func readAPIRequests(b *testing.B) apiRequests {
	b.Helper()
	raw := apiServerGet(b, "/metrics")
	out := apiRequests{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if end < 0 || err != nil {
			b.Fatalf("parse %q", line)
		}
		labels := metricLabels(line[len("apiserver_request_total{"):end])
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += v
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

// metricLabels parses the labels of one exposition line (values hold no escaped quotes here).
func metricLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			break
		}
		name := s[:eq]
		rest := s[eq+2:]
		q := strings.IndexByte(rest, '"')
		if q < 0 {
			break
		}
		out[name] = rest[:q]
		s = strings.TrimPrefix(rest[q+1:], ",")
	}
	return out
}

// per formats the requests made since before, divided by units (edits, servers, allocations),
// as "verb resource=n.nn" sorted by count; watches and requests under 0.05 per unit are left out.
func (after apiRequests) per(before apiRequests, units int) string {
	type entry struct {
		key string
		n   float64
	}
	var es []entry
	total := 0.0
	for k, v := range after {
		n := (v - before[k]) / float64(units)
		if strings.HasPrefix(k, "WATCH") || n < 0.05 {
			continue
		}
		es = append(es, entry{k, n})
		total += n
	}
	slices.SortFunc(es, func(a, b entry) int { return int((b.n - a.n) * 1000) })
	parts := []string{fmt.Sprintf("total=%.2f", total)}
	for _, e := range es {
		parts = append(parts, fmt.Sprintf("%s=%.2f", e.key, e.n))
	}
	return strings.Join(parts, " ")
}

// apiServerProfile starts a CPU profile of the test's API server when NETFLEET_BENCH_APISERVER_PROFILE
// holds a duration (e.g. 10s), written to _out/bench/apiserver-<name>.pprof for `go tool pprof`.
// The returned function waits for it.
func apiServerProfile(b *testing.B, name string) func() {
	b.Helper()
	v := os.Getenv("NETFLEET_BENCH_APISERVER_PROFILE")
	if v == "" {
		return func() {}
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("NETFLEET_BENCH_APISERVER_PROFILE: %v", err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(root, "_out", "bench", "apiserver-"+strings.NewReplacer("/", "-", "=", "").Replace(name)+".pprof")
	done := make(chan []byte)
	go func() {
		done <- apiServerGet(b, fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())))
	}()
	return func() {
		raw := <-done
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(file, raw, 0o644); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("API server CPU profile: %s\n", file)
	}
}

// apiServerGet reads a path of the test API server as its admin user.
func apiServerGet(b *testing.B, path string) []byte {
	hc, err := rest.HTTPClientFor(restCfg)
	if err != nil {
		b.Error(err)
		return nil
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, strings.TrimSuffix(restCfg.Host, "/")+path, nil)
	if err != nil {
		b.Error(err)
		return nil
	}
	resp, err := hc.Do(req)
	if err != nil {
		b.Error(err)
		return nil
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Errorf("GET %s: HTTP %d: %v %s", path, resp.StatusCode, err, raw)
		return nil
	}
	return raw
}
