// Command botswarm is netfleet's load harness: it runs many real ENet game clients against a
// game server for a bounded time and reports what each observed — snapshot rate, bytes, snapshot
// age, loss, records applied and how its session ended — per client and per class, with
// per-second series. See internal/botswarm.
//
//	botswarm --server 127.0.0.1:7777 --clients 96 --classes lossy=16@127.0.0.1:17777 \
//	    --duration 60s --commands-hz 10 --json _out/swarm.json
//
// COMMANDs are the demo world's move input by default (the bot's avatar walks to a random point),
// or random bytes.
//
// With --churn it instead opens and closes sessions from one host at a fixed rate and reports the
// cycles achieved, refusals and timeouts:
//
//	botswarm --server 127.0.0.1:7777 --churn 2000 --duration 10s
//
// A progress line goes to stderr every second (rewritten in place on a terminal); the tables go
// to stdout when the run ends.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/netfleet/netfleet/gameserver/demo"
	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/internal/botswarm"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "botswarm:", err)
		os.Exit(1)
	}
}

type options struct {
	server, classes, bind, jsonPath string
	schema                          string
	command                         string
	moveRange                       float64
	clients                         int
	churn                           float64
	churnConnectTimeout             time.Duration
	churnCloseTimeout               time.Duration
	churnPeers                      int
	tokens                          string
	cfg                             botswarm.Config
}

// loadTokens reads connect tokens, one per line in base64; blank lines are skipped.
func loadTokens(path string) ([][]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for i, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		tok, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, tok)
	}
	return out, nil
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("botswarm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	fs.StringVar(&o.server, "server", "127.0.0.1:7777", "the game server's UDP address")
	fs.IntVar(&o.clients, "clients", 0, "bots of class \"direct\", connecting to --server")
	fs.StringVar(&o.classes, "classes", "", "more classes, comma-separated name=count[@addr], e.g. lossy=4@127.0.0.1:17777 (a linkem proxy)")
	fs.DurationVar(&o.cfg.Duration, "duration", 30*time.Second, "how long the run lasts; every bot closes at the end")
	fs.DurationVar(&o.cfg.Ramp, "ramp", 0, "spread the bots' connects over this long")
	fs.DurationVar(&o.cfg.ConnectTimeout, "connect-timeout", botswarm.DefaultConnectTimeout, "how long a bot waits for its handshake")
	fs.Float64Var(&o.cfg.CommandsHz, "commands-hz", 0, "COMMAND messages per second per bot; 0: none")
	fs.StringVar(&o.command, "command", "move", "COMMAND payload: \"move\" (the demo world's input: walk to a random point within --move-range meters) or \"random\" (--command-bytes random bytes)")
	fs.Float64Var(&o.moveRange, "move-range", 500, "move commands pick points within this many meters of the origin on each axis")
	fs.IntVar(&o.cfg.CommandBytes, "command-bytes", botswarm.DefaultCommandBytes, "size of a random COMMAND payload")
	fs.Uint64Var(&o.cfg.Seed, "seed", 1, "seed of the COMMAND payloads and of each bot's PING and COMMAND phase")
	fs.StringVar(&o.bind, "bind", "", "local IPv4 addresses for the bots' sockets, round-robin: a list and ranges, e.g. 127.0.0.2-127.0.0.65 (the server limits connects per source IP); empty: 0.0.0.0")
	fs.StringVar(&o.schema, "schema", "", "the game's schema as JSON (what the game server writes with --write-schema); empty: the schema of a game that declares none, as the demo's")
	fs.StringVar(&o.tokens, "tokens", "", "connect tokens, one per line in base64 (the tokens an allocation with players answers): the i-th bot, in class order, sends the i-th in its HELLO")
	fs.StringVar(&o.jsonPath, "json", "", "write the full report (per client and per class, with per-second series) to this file")
	fs.Float64Var(&o.churn, "churn", 0, "churn mode: connect/close cycles started per second from one host for --duration, instead of bots")
	fs.DurationVar(&o.churnConnectTimeout, "churn-connect-timeout", botswarm.DefaultChurnTimeout, "churn: how long an attempt waits for its handshake")
	fs.DurationVar(&o.churnCloseTimeout, "churn-close-timeout", botswarm.DefaultChurnTimeout, "churn: how long an attempt waits for the server to confirm its close")
	fs.IntVar(&o.churnPeers, "churn-peers", 0, "churn: peer slots of the host, bounding attempts in flight; 0: ENet's maximum")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.schema != "" {
		if o.cfg.Layout, err = loadSchema(o.schema); err != nil {
			return nil, fmt.Errorf("--schema: %w", err)
		}
	}
	if o.tokens != "" {
		if o.cfg.Tokens, err = loadTokens(o.tokens); err != nil {
			return nil, fmt.Errorf("--tokens: %w", err)
		}
	}
	if o.server != "" {
		if o.cfg.Server, err = netip.ParseAddrPort(o.server); err != nil {
			return nil, fmt.Errorf("--server: %w", err)
		}
	}
	if o.churn != 0 {
		if o.clients != 0 || o.classes != "" {
			return nil, errors.New("--churn runs no bots: drop --clients and --classes")
		}
		return o, nil
	}
	if o.clients < 0 {
		return nil, fmt.Errorf("--clients %d is negative", o.clients)
	}
	if o.clients > 0 {
		o.cfg.Classes = append(o.cfg.Classes, botswarm.Class{Name: "direct", Count: o.clients})
	}
	if o.classes != "" {
		more, err := botswarm.ParseClasses(o.classes)
		if err != nil {
			return nil, fmt.Errorf("--classes: %w", err)
		}
		o.cfg.Classes = append(o.cfg.Classes, more...)
	}
	if len(o.cfg.Classes) == 0 {
		return nil, errors.New("no bots: set --clients or --classes (or --churn)")
	}
	switch o.command {
	case "move":
		if !(o.moveRange > 0 && o.moveRange < protocol.WorldHalfExtent) {
			return nil, fmt.Errorf("--move-range %v out of range (0, %d)", o.moveRange, protocol.WorldHalfExtent)
		}
		extent := o.moveRange
		o.cfg.Command = func(r *rand.Rand, dst []byte) []byte {
			return demo.AppendMove(dst, float32((r.Float64()*2-1)*extent), float32((r.Float64()*2-1)*extent))
		}
	case "random":
	default:
		return nil, fmt.Errorf("--command %q: want move or random", o.command)
	}
	if o.bind != "" {
		if o.cfg.Bind, err = botswarm.ParseAddrList(o.bind); err != nil {
			return nil, fmt.Errorf("--bind: %w", err)
		}
	}
	if err := o.cfg.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.churn != 0 {
		return runChurn(ctx, o, stdout, stderr)
	}
	s, err := botswarm.New(o.cfg)
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	done := make(chan *botswarm.Report)
	go func() { done <- s.Wait() }()
	pl := newProgressLine(stderr)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var r *botswarm.Report
	for r == nil {
		select {
		case r = <-done:
		case <-tick.C:
			pl.print(formatProgress(s.Progress()))
		}
	}
	pl.end()
	if err := writeReport(stdout, r); err != nil {
		return err
	}
	return writeJSON(o.jsonPath, r)
}

// loadSchema reads a schema's JSON form and compiles it.
func loadSchema(path string) (*protocol.Layout, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s protocol.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return s.Compile()
}

func runChurn(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	cfg := botswarm.ChurnConfig{
		Server:         o.cfg.Server,
		Rate:           o.churn,
		Duration:       o.cfg.Duration,
		ConnectTimeout: o.churnConnectTimeout,
		CloseTimeout:   o.churnCloseTimeout,
		Peers:          o.churnPeers,
		Layout:         o.cfg.Layout,
	}
	if o.bind != "" {
		addrs, err := botswarm.ParseAddrList(o.bind)
		if err != nil {
			return fmt.Errorf("--bind: %w", err)
		}
		if len(addrs) != 1 {
			return errors.New("--bind: churn runs from one host: give one address")
		}
		cfg.Bind = addrs[0]
	}
	fmt.Fprintf(stderr, "churn: %v cycles/s to %s for %v\n", cfg.Rate, cfg.Server, cfg.Duration)
	r, err := botswarm.RunChurn(ctx, cfg)
	if err != nil {
		return err
	}
	if err := writeChurn(stdout, r); err != nil {
		return err
	}
	return writeJSON(o.jsonPath, r)
}

// progressLine writes one status line per call: rewritten in place on a terminal, one line
// each otherwise.
type progressLine struct {
	w    io.Writer
	tty  bool
	last int
}

func newProgressLine(w io.Writer) *progressLine {
	pl := &progressLine{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			pl.tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	return pl
}

func (pl *progressLine) print(s string) {
	if !pl.tty {
		fmt.Fprintln(pl.w, s)
		return
	}
	pad := max(pl.last-len(s), 0)
	fmt.Fprintf(pl.w, "\r%s%s", s, strings.Repeat(" ", pad))
	pl.last = len(s)
}

func (pl *progressLine) end() {
	if pl.tty && pl.last > 0 {
		fmt.Fprintln(pl.w)
	}
}

func formatProgress(p botswarm.Progress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "t=%ds", int(p.Elapsed/time.Second))
	states := make([]string, 0, len(p.States))
	for st, n := range p.States {
		states = append(states, fmt.Sprintf("%s=%d", st, n))
	}
	sort.Strings(states)
	fmt.Fprintf(&b, " [%s]", strings.Join(states, " "))
	for _, c := range p.Classes {
		if c.Clients == 0 {
			fmt.Fprintf(&b, "  %s: -", c.Name)
			continue
		}
		fmt.Fprintf(&b, "  %s: %.0f Hz (min %d) %.1f kB/s age p95 %.0f ms", c.Name, c.HzMedian, c.HzMin, c.KBps, c.AgeP95Ms)
	}
	return b.String()
}

func writeReport(w io.Writer, r *botswarm.Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// Each class's target is in its row; the default server may be one no class used.
	fmt.Fprintf(tw, "run of %.1f s, seed %d\n", float64(r.ElapsedMs)/1000, r.Seed)
	fmt.Fprintln(tw, "CLASS\tTARGET\tCLIENTS\tSTATES\tHZ-MEDIAN\tHZ-MIN\tHZ-MAX\tKB/S\tAGE-P50\tAGE-P95\tAPPLIED/S\tLOSS%\tUNAPPLIED\tCLOSE-CODES\t")
	for _, c := range r.Classes {
		s := c.Summary
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.1f\t%d\t%d\t%.1f\t%s\t%s\t%.0f\t%.2f\t%d\t%s\t\n",
			c.Name, c.Target, total(c.States), counts(c.States), s.HzMedian, s.HzMin, s.HzMax, s.KBps,
			ms(s.AgeP50Ms), ms(s.AgeP95Ms), s.AppliedPerSec, s.LossPct, s.Unapplied, codes(c.CloseCodes))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "ID\tCLASS\tLOCAL\tSTATE\tCODE\tCONNECT-MS\tHZ-MEDIAN\tHZ-MIN\tKB/S\tAGE-P50\tAGE-P95\tAPPLIED/S\tLOST\tUNAPPLIED\tACKS\tPINGS\tCMDS\t")
	for _, c := range r.Clients {
		s := c.Summary
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%.1f\t%d\t%.1f\t%s\t%s\t%.0f\t%d\t%d\t%d\t%d\t%d\t\n",
			c.ID, c.Class, c.Local, c.State, c.CloseCode, c.ConnectedMs, s.HzMedian, s.HzMin, s.KBps,
			ms(s.AgeP50Ms), ms(s.AgeP95Ms), s.AppliedPerSec, c.Totals.PacketsLost, c.Totals.RecordsUnapplied,
			c.Totals.AcksSent, c.Totals.PingsSent, c.Totals.CommandsSent)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

func writeChurn(w io.Writer, r *botswarm.ChurnReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SERVER\tRATE\tATTEMPTS\tATTEMPTS/S\tCONNECTED\tCYCLES\tCYCLES/S\tREFUSED\tTIMEOUTS\tNO-SLOT\tSERVER-CLOSED\tCLOSE-TIMEOUTS\tUNFINISHED\tCONNECT-P50\tCONNECT-P95\tCODES\t")
	fmt.Fprintf(tw, "%s\t%.0f\t%d\t%.0f\t%d\t%d\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n",
		r.Server, r.Rate, r.Attempts, r.AttemptsPerSec, r.Connected, r.Cycles, r.CyclesPerSec, r.Refused,
		r.Timeouts, r.NoSlot, r.ClosedByServer, r.CloseTimeouts, r.Unfinished, ms(r.ConnectMsP50), ms(r.ConnectMsP95),
		codes(r.CloseCodes))
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

func ms(v float64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", v)
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func counts(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func codes[N int | uint64](m map[uint32]N) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%d x%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
