// Command dashboards generates netfleet's Grafana dashboards — Fleet overview, Game-server
// drill-down and Operator — from typed Go code (github.com/grafana/grafana-foundation-sdk) into
// the Helm chart's dashboards/ directory, one JSON file per dashboard:
//
//	go run ./hack/dashboards -out charts/netfleet/dashboards
//
// `make dashboards` runs it and `make verify` fails when the committed JSON is stale. Every
// panel's query is run against a real Prometheus scraping real processes by this package's test.
// The metrics and the label contract the queries rely on are described in docs/observability.md.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "charts/netfleet/dashboards", "directory the dashboard JSON files are written to")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "dashboards:", err)
		os.Exit(1)
	}
}

// write renders every dashboard into dir as <file>.json.
func write(dir string) error {
	all, err := build()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	// The directory holds generated files only: a dashboard no longer generated is removed.
	stale, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, path := range stale {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("remove %s: %w", path, err)
		}
	}
	for _, d := range all {
		raw, err := render(d.board)
		if err != nil {
			return fmt.Errorf("%s: %w", d.file, err)
		}
		if err := os.WriteFile(filepath.Join(dir, d.file), raw, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", d.file, err)
		}
	}
	return nil
}

// render is the dashboard's JSON as it is committed: indented, HTML characters unescaped so
// PromQL's comparison operators stay readable, one trailing newline.
func render(board any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(board); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return buf.Bytes(), nil
}
