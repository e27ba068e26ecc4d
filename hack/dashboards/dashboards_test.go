package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/netfleet/netfleet/internal/testenv"
)

// TestCommittedDashboardsAreCurrent: the JSON in the chart is what the generator writes now.
// (make verify checks the same through git; this catches it in a plain go test.)
func TestCommittedDashboardsAreCurrent(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	all, err := build()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "charts", "netfleet", "dashboards")
	committed, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(committed) != len(all) {
		t.Errorf("%d dashboards in %s, the generator writes %d: run make dashboards", len(committed), dir, len(all))
	}
	for _, d := range all {
		want, err := render(d.board)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, d.file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run make dashboards", d.file)
		}
	}
}
