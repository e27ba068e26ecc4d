// Command testbins runs the tests of many packages as `go test -json` does, from test binaries it
// keeps between runs: each package's binary is built with `go test -c` into a directory of its
// own, which go relinks only when the package or a dependency changed, where go test links every
// binary again on every run (on netfleet's 36 race-detector test binaries, about a minute of CPU
// per run). The binaries then run -parallel at a time, longest first by how long each took in the
// last run (kept in the directory; packages never run first, in the order given), each in its
// package's directory under test2json, and their events are written to stdout, whole lines at
// a time, for gotestsum (--raw-command) to read.
//
//	testbins -dir _out/test/race -parallel 3 -timeout 20m -- -race -ldflags=-w -- ./...
//
// With -build-only it brings the binaries up to date and runs none, so that their build can be a
// step of its own ahead of the tests. It exits 1 when a test failed, 2 when a package did not
// build or the command is misused.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	r, pkgs, err := parseArgs(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testbins:", err)
		os.Exit(2)
	}
	r.out, r.stderr = os.Stdout, os.Stderr
	os.Exit(r.run(context.Background(), pkgs))
}

const usage = "usage: testbins -dir DIR [-parallel N] [-timeout D] [-build-only] -- [go build flags] -- <package>..."

// parseArgs reads `-dir DIR [-parallel N] [-timeout D] [-build-only] -- [go build flags] --
// <package>...`: the runner's own flags, then go's, each list ended by --, so that go's flags
// are not taken for the runner's.
func parseArgs(args []string, stderr io.Writer) (*runner, []string, error) {
	fs := flag.NewFlagSet("testbins", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "where the test binaries are kept (required)")
	parallel := fs.Int("parallel", 2, "how many test binaries run at once")
	timeout := fs.String("timeout", "10m", "each test binary's -test.timeout")
	buildOnly := fs.Bool("build-only", false, "bring the test binaries up to date and run none (a step that can run ahead of the tests)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	buildFlags, pkgs, err := splitArgs(fs.Args())
	switch {
	case err != nil:
	case *dir == "":
		err = errors.New("-dir is required")
	case *parallel < 1:
		err = fmt.Errorf("-parallel %d: want at least 1", *parallel)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w (%s)", err, usage)
	}
	return &runner{dir: *dir, buildFlags: buildFlags, parallel: *parallel, timeout: *timeout, buildOnly: *buildOnly}, pkgs, nil
}

// splitArgs splits `[go build flags] -- <package>...`, what is left after the runner's flags.
func splitArgs(args []string) (buildFlags, pkgs []string, err error) {
	for i, a := range args {
		if a == "--" {
			if len(args[i+1:]) == 0 {
				return nil, nil, errors.New("no packages after the go build flags' --")
			}
			return args[:i], args[i+1:], nil
		}
	}
	return nil, nil, errors.New("no -- after the go build flags")
}

type runner struct {
	dir        string
	buildFlags []string
	parallel   int
	timeout    string
	buildOnly  bool
	out        io.Writer // test2json events
	stderr     io.Writer // the build's output and the runner's own messages

	mu sync.Mutex // serialises writes to out
}

// testPkg is a package that has tests.
type testPkg struct {
	ImportPath string
	Dir        string
	bin        string // its test binary, once built
}

// run builds and runs the packages' tests and returns the exit code.
func (r *runner) run(ctx context.Context, patterns []string) int {
	pkgs, err := r.list(ctx, patterns)
	if err != nil {
		fmt.Fprintln(r.stderr, "testbins:", err)
		return 2
	}
	if err := r.build(ctx, pkgs); err != nil {
		fmt.Fprintln(r.stderr, "testbins:", err)
		return 2
	}
	if r.buildOnly {
		return 0
	}
	tool, err := goTool(ctx, "test2json")
	if err != nil {
		fmt.Fprintln(r.stderr, "testbins:", err)
		return 2
	}
	took := r.loadDurations()
	longestFirst(pkgs, took)
	var (
		wg     sync.WaitGroup
		slots  = make(chan struct{}, r.parallel)
		mu     sync.Mutex
		failed []string
	)
	for _, p := range pkgs {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			start := time.Now()
			err := r.test(ctx, tool, p)
			mu.Lock()
			defer mu.Unlock()
			took[p.ImportPath] = time.Since(start)
			if err != nil {
				failed = append(failed, p.ImportPath)
			}
		})
	}
	wg.Wait()
	if err := r.saveDurations(took); err != nil {
		fmt.Fprintln(r.stderr, "testbins:", err)
	}
	if len(failed) > 0 {
		fmt.Fprintf(r.stderr, "testbins: %d of %d packages failed: %s\n", len(failed), len(pkgs), strings.Join(failed, " "))
		return 1
	}
	return 0
}

// durationsFile, in the binaries' directory, holds how long each package's tests took when they
// last ran: "<seconds>\t<import path>" lines.
const durationsFile = "durations.tsv"

// loadDurations reads durationsFile; a missing or unreadable one is no durations.
func (r *runner) loadDurations() map[string]time.Duration {
	took := map[string]time.Duration{}
	b, err := os.ReadFile(filepath.Join(r.dir, durationsFile))
	if err != nil {
		return took
	}
	for line := range strings.Lines(string(b)) {
		secs, pkg, ok := strings.Cut(strings.TrimSpace(line), "\t")
		f, err := strconv.ParseFloat(secs, 64)
		if ok && err == nil && f >= 0 && pkg != "" {
			took[pkg] = time.Duration(f * float64(time.Second))
		}
	}
	return took
}

// saveDurations writes took to durationsFile, whole or not at all.
func (r *runner) saveDurations(took map[string]time.Duration) error {
	var b strings.Builder
	for _, pkg := range slices.Sorted(maps.Keys(took)) {
		fmt.Fprintf(&b, "%.3f\t%s\n", took[pkg].Seconds(), pkg)
	}
	tmp := filepath.Join(r.dir, durationsFile+".tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("save durations: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(r.dir, durationsFile)); err != nil {
		return fmt.Errorf("save durations: %w", err)
	}
	return nil
}

// longestFirst orders the packages so that the longest start first, by how long they took when
// they last ran, and none of them starts late and ends alone: those never run first (they may be
// long), in the order given, then the others, longest first.
func longestFirst(pkgs []testPkg, took map[string]time.Duration) {
	slices.SortStableFunc(pkgs, func(a, b testPkg) int {
		da, oka := took[a.ImportPath]
		db, okb := took[b.ImportPath]
		switch {
		case oka == okb:
			return cmp.Compare(db, da) // both untimed: 0, the order given
		case oka:
			return 1
		default:
			return -1
		}
	})
}

// list resolves the patterns to the packages that have test files, in the order given (the first
// mention of a package counts).
func (r *runner) list(ctx context.Context, patterns []string) ([]testPkg, error) {
	args := append([]string{"list", "-e", "-json=ImportPath,Dir,TestGoFiles,XTestGoFiles,Error"}, r.buildFlags...)
	out, err := goOutput(ctx, append(args, patterns...)...)
	if err != nil {
		return nil, err
	}
	var (
		pkgs []testPkg
		seen = map[string]bool{}
	)
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath, Dir           string
			TestGoFiles, XTestGoFiles []string
			Error                     *struct{ Err string }
		}
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		if seen[p.ImportPath] || len(p.TestGoFiles)+len(p.XTestGoFiles) == 0 {
			continue
		}
		seen[p.ImportPath] = true
		pkgs = append(pkgs, testPkg{ImportPath: p.ImportPath, Dir: p.Dir})
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("no package with tests in %s", strings.Join(patterns, " "))
	}
	return pkgs, nil
}

// build brings every package's test binary up to date. go test -c writes the binaries of many
// packages into one directory, each named after the last element of its import path, and keeps one
// that is up to date where it finds it (it compares the build with the file's build ID); packages
// whose import paths end alike are built in rounds, each into a directory of its own.
func (r *runner) build(ctx context.Context, pkgs []testPkg) error {
	var rounds [][]*testPkg
	for i := range pkgs {
		p := &pkgs[i]
		n := 0
		for n < len(rounds) && hasName(rounds[n], path.Base(p.ImportPath)) {
			n++
		}
		if n == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[n] = append(rounds[n], p)
		p.bin = filepath.Join(r.dir, strconv.Itoa(n), path.Base(p.ImportPath)+".test")
	}
	for n, round := range rounds {
		out := filepath.Join(r.dir, strconv.Itoa(n))
		if err := os.MkdirAll(out, 0o755); err != nil {
			return fmt.Errorf("test binaries: %w", err)
		}
		args := append([]string{"test", "-c", "-o", out + string(filepath.Separator)}, r.buildFlags...)
		for _, p := range round {
			args = append(args, p.ImportPath)
		}
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Stdout, cmd.Stderr = r.stderr, r.stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go test -c (%d packages): %w", len(round), err)
		}
		for _, p := range round {
			if _, err := os.Stat(p.bin); err != nil {
				return fmt.Errorf("go test -c wrote no binary for %s: %w", p.ImportPath, err)
			}
		}
	}
	return nil
}

func hasName(pkgs []*testPkg, name string) bool {
	for _, p := range pkgs {
		if path.Base(p.ImportPath) == name {
			return true
		}
	}
	return false
}

// test runs one package's binary in its directory under test2json, as go test -json does, and
// writes its events to out. It returns an error when the package failed.
func (r *runner) test(ctx context.Context, test2json string, p testPkg) error {
	bin, err := filepath.Abs(p.bin)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, test2json, "-t", "-p", p.ImportPath, bin,
		"-test.v=test2json", "-test.paniconexit0", "-test.timeout="+r.timeout)
	cmd.Dir = p.Dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		r.event(p.ImportPath, "output", fmt.Sprintf("testbins: %v\n", err))
		r.event(p.ImportPath, "fail", "")
		return err
	}
	br := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			r.mu.Lock()
			_, _ = r.out.Write(line)
			r.mu.Unlock()
		}
		if err != nil {
			break
		}
	}
	return cmd.Wait()
}

// event writes a test2json event of the runner's own about a package.
func (r *runner) event(pkg, action, output string) {
	e := struct {
		Action  string
		Package string
		Output  string `json:",omitempty"`
	}{action, pkg, output}
	b, _ := json.Marshal(e)
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.out.Write(append(b, '\n'))
}

// goTool returns the path of one of go's tools, which go builds if it has not yet.
func goTool(ctx context.Context, name string) (string, error) {
	out, err := goOutput(ctx, "tool", "-n", name)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func goOutput(ctx context.Context, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w: %s", args[0], err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}
