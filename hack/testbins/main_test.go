package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// module writes a small module: two packages whose import paths end alike (one passes, one
// fails), one without tests, and one whose test reads a file of its own directory.
func module(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"go.mod":             "module example.com/m\n\ngo 1.24\n",
		"a/x/x.go":           "package x\n\nfunc Two() int { return 2 }\n",
		"a/x/x_test.go":      "package x\n\nimport \"testing\"\n\nfunc TestTwo(t *testing.T) {\n\tif Two() != 2 {\n\t\tt.Fatal(\"not two\")\n\t}\n}\n",
		"b/x/x.go":           "package x\n",
		"b/x/x_test.go":      "package x\n\nimport \"testing\"\n\nfunc TestFails(t *testing.T) { t.Fatal(\"deliberately\") }\n\nfunc TestPasses(t *testing.T) {}\n",
		"c/c.go":             "package c\n",
		"d/d_test.go":        "package d_test\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestOwnDir(t *testing.T) {\n\tif _, err := os.Stat(\"testdata/here\"); err != nil {\n\t\tt.Fatal(err)\n\t}\n}\n",
		"d/testdata/here":    "",
		"e/e_test.go":        "package e\n\nimport (\n\t\"strings\"\n\t\"testing\"\n)\n\nfunc TestLongLine(t *testing.T) { t.Log(strings.Repeat(\"x\", 100000)) }\n",
		"f/broken/b.go":      "package broken\n",
		"f/broken/b_test.go": "package broken\n\nfunc TestNothing(t *testing.T) {}\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

type event struct {
	Action, Package, Test, Output string
}

// runIn runs the runner in dir and returns its exit code and the events it wrote.
func runIn(t *testing.T, dir string, r *runner, pkgs ...string) (int, []event, string) {
	t.Helper()
	t.Chdir(dir)
	var out, stderr bytes.Buffer
	r.out, r.stderr = &out, &stderr
	code := r.run(context.Background(), pkgs)
	var events []event
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("a line that is not a test2json event: %v: %.200q", err, sc.Text())
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return code, events, stderr.String()
}

// outcome returns the package's final action (pass or fail), or "" when it has none.
func outcome(events []event, pkg string) string {
	got := ""
	for _, e := range events {
		if e.Package == pkg && e.Test == "" && (e.Action == "pass" || e.Action == "fail") {
			got = e.Action
		}
	}
	return got
}

func TestRunnerRunsEveryPackageOnce(t *testing.T) {
	root := module(t)
	bins := filepath.Join(root, "_bins")
	r := &runner{dir: bins, parallel: 3, timeout: "1m", buildFlags: toolexec(t, root)}
	code, events, stderr := runIn(t, root, r, "./a/...", "./b/...", "./c", "./d", "./e", "./a/x")
	if code != 1 {
		t.Fatalf("exit code %d, want 1 (b/x fails); stderr:\n%s", code, stderr)
	}
	want := map[string]string{
		"example.com/m/a/x": "pass",
		"example.com/m/b/x": "fail",
		"example.com/m/d":   "pass",
		"example.com/m/e":   "pass",
	}
	for pkg, action := range want {
		if got := outcome(events, pkg); got != action {
			t.Errorf("%s: %q, want %q", pkg, got, action)
		}
	}
	runs := map[string]int{}
	for _, e := range events {
		if e.Action == "start" {
			runs[e.Package]++
		}
		if e.Package == "example.com/m/c" {
			t.Errorf("an event of the package without tests: %+v", e)
		}
	}
	for pkg := range want {
		if runs[pkg] != 1 {
			t.Errorf("%s ran %d times, want once", pkg, runs[pkg])
		}
	}
	if !strings.Contains(stderr, "example.com/m/b/x") {
		t.Errorf("stderr does not name the failed package:\n%s", stderr)
	}
	if got := links(t, root); len(got) != 4 {
		t.Errorf("the first run linked %d binaries, want 4: %q", len(got), got)
	}

	// A second run links nothing; a change to a package relinks its binary alone.
	if code, _, stderr := runIn(t, root, r, "./a/...", "./b/...", "./d", "./e"); code != 1 {
		t.Fatalf("second run: exit code %d, want 1; stderr:\n%s", code, stderr)
	}
	if got := links(t, root); len(got) != 0 {
		t.Errorf("the second run linked %q, want nothing", got)
	}
	if err := os.WriteFile(filepath.Join(root, "a/x/x.go"), []byte("package x\n\nfunc Two() int { return 1 + 1 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, events, stderr := runIn(t, root, r, "./a/x"); code != 0 || outcome(events, "example.com/m/a/x") != "pass" {
		t.Fatalf("after a change: exit code %d; stderr:\n%s", code, stderr)
	}
	if got := links(t, root); len(got) != 1 || filepath.Base(got[0]) != "x.test" {
		t.Errorf("after a change to a/x the runner linked %q, want a/x's binary alone", got)
	}
}

// toolexec returns go build flags that record every test binary linked in root/links.
func toolexec(t *testing.T, root string) []string {
	t.Helper()
	script := filepath.Join(root, "record-links")
	body := "#!/bin/sh\ncase \"$(basename \"$1\") $2\" in 'link -o') echo \"$3\" >>" + filepath.Join(root, "links") + " ;; esac\nexec \"$@\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{"-toolexec", script}
}

// links returns the binaries linked since the last call, as the linker's -o names them.
func links(t *testing.T, root string) []string {
	t.Helper()
	p := filepath.Join(root, "links")
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	_ = os.Remove(p)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			got = append(got, l)
		}
	}
	return got
}

// TestRunnerBuildOnly: -build-only links the binaries and runs none; the run after it links
// nothing and runs them.
func TestRunnerBuildOnly(t *testing.T) {
	root := module(t)
	r := &runner{dir: filepath.Join(root, "_bins"), parallel: 2, timeout: "1m", buildFlags: toolexec(t, root), buildOnly: true}
	code, events, stderr := runIn(t, root, r, "./a/x", "./d")
	if code != 0 || len(events) != 0 {
		t.Fatalf("build only: exit code %d, events %+v; stderr:\n%s", code, events, stderr)
	}
	if got := links(t, root); len(got) != 2 {
		t.Errorf("build only linked %q, want the two binaries", got)
	}
	r.buildOnly = false
	code, events, stderr = runIn(t, root, r, "./a/x", "./d")
	if code != 0 || outcome(events, "example.com/m/a/x") != "pass" || outcome(events, "example.com/m/d") != "pass" {
		t.Fatalf("the run after: exit code %d; stderr:\n%s", code, stderr)
	}
	if got := links(t, root); len(got) != 0 {
		t.Errorf("the run after the build linked %q, want nothing", got)
	}
}

// TestRunnerLongestFirst: the packages run longest first by the durations of the last run, those
// it did not time before them in the order given; the run records its own durations.
func TestRunnerLongestFirst(t *testing.T) {
	root := module(t)
	bins := filepath.Join(root, "_bins")
	if err := os.MkdirAll(bins, 0o755); err != nil {
		t.Fatal(err)
	}
	last := "1.5\texample.com/m/a/x\n30.0\texample.com/m/d\nnot a line\n"
	if err := os.WriteFile(filepath.Join(bins, durationsFile), []byte(last), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &runner{dir: bins, parallel: 1, timeout: "1m"}
	code, events, stderr := runIn(t, root, r, "./a/x", "./b/x", "./d", "./e")
	if code != 1 {
		t.Fatalf("exit code %d, want 1 (b/x fails); stderr:\n%s", code, stderr)
	}
	var order []string
	for _, e := range events {
		if e.Action == "start" {
			order = append(order, strings.TrimPrefix(e.Package, "example.com/m/"))
		}
	}
	if got := strings.Join(order, " "); got != "b/x e d a/x" {
		t.Errorf("ran %s, want b/x e (never timed, in the order given), then d a/x (longest first)", got)
	}
	took := r.loadDurations()
	if len(took) != 4 || took["example.com/m/d"] >= 30*time.Second || took["example.com/m/b/x"] <= 0 {
		t.Errorf("durations after the run: %v, want the four packages' own", took)
	}
}

func TestRunnerRefusesABuildFailure(t *testing.T) {
	root := module(t)
	r := &runner{dir: filepath.Join(root, "_bins"), parallel: 2, timeout: "1m"}
	code, events, stderr := runIn(t, root, r, "./a/x", "./f/broken")
	if code != 2 {
		t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr)
	}
	if len(events) != 0 {
		t.Errorf("tests ran although a package did not build: %+v", events)
	}
	if !strings.Contains(stderr, "undefined: testing") {
		t.Errorf("stderr does not carry the compiler's error:\n%s", stderr)
	}
}

// TestParseArgs: go's build flags, which the runner does not know, come after the runner's own
// and a --, and the packages after a second --.
func TestParseArgs(t *testing.T) {
	args := []string{"-dir", "_out/test/race", "-parallel", "3", "-timeout", "20m", "--",
		"-race", "-gcflags=all=-dwarf=false", "-tags", "a,b", "-ldflags=-w", "--", "./...", "./x"}
	r, pkgs, err := parseArgs(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if r.dir != "_out/test/race" || r.parallel != 3 || r.timeout != "20m" || r.buildOnly ||
		strings.Join(r.buildFlags, " ") != "-race -gcflags=all=-dwarf=false -tags a,b -ldflags=-w" ||
		strings.Join(pkgs, " ") != "./... ./x" {
		t.Errorf("parseArgs = %+v, %q", r, pkgs)
	}
	if r, pkgs, err := parseArgs([]string{"-dir", "d", "--", "--", "./..."}, io.Discard); err != nil ||
		len(r.buildFlags) != 0 || strings.Join(pkgs, " ") != "./..." {
		t.Errorf("no build flags: %+v, %q, %v", r, pkgs, err)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"-dir", "d", "-race", "--", "./..."}, "-race"},
		{[]string{"-dir", "d", "--", "-race", "./..."}, "no -- after the go build flags"},
		{[]string{"-dir", "d", "--", "-race", "--"}, "no packages"},
		{[]string{"--", "--", "./..."}, "-dir is required"},
		{[]string{"-dir", "d", "-parallel", "0", "--", "--", "./..."}, "-parallel 0"},
	} {
		var stderr strings.Builder
		if _, _, err := parseArgs(bad.args, &stderr); err == nil || !strings.Contains(err.Error()+stderr.String(), bad.want) {
			t.Errorf("parseArgs(%q): %v (output %q), want an error naming %q", bad.args, err, stderr.String(), bad.want)
		}
	}
}
