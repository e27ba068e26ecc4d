// Command linkem is netfleet's userspace link emulator: a UDP proxy between game clients and a
// game server that impairs each client's path — loss, delay, jitter, reordering, duplication and a
// bandwidth cap with a tail-drop queue — per client and per direction, changeable while it runs
// through a schedule file or a loopback HTTP control endpoint. See internal/linkem.
//
//	linkem --listen 127.0.0.1:17777 --upstream 127.0.0.1:7777 --seed 1 \
//	    --profile '{"loss": 0.05, "delayMs": 80}' --schedule plan.yaml --control 127.0.0.1:17780
//
// It prints a stats line every --stats-interval and a per-client table when it exits on SIGINT or
// SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/netfleet/netfleet/internal/linkem"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "linkem:", err)
		os.Exit(1)
	}
}

// run parses args, relays until ctx ends, and prints the final table to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("linkem", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg                   linkem.Config
		profile, schedulePath string
		statsInterval         time.Duration
	)
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:17777", "UDP address clients send to")
	fs.StringVar(&cfg.Upstream, "upstream", "127.0.0.1:7777", "the game server's UDP address")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of every random decision; same seed and packets, same decisions")
	fs.StringVar(&profile, "profile", "{}", "default profile, JSON or YAML inline or @file; top-level fields impair downstream only, e.g. '{\"loss\":0.05,\"delayMs\":80}' or '{\"up\":{...},\"down\":{...}}'")
	fs.StringVar(&schedulePath, "schedule", "", "YAML or JSON file of classes, rules and timed profile changes")
	fs.StringVar(&cfg.ControlAddr, "control", "", "loopback address of the HTTP control endpoint (GET /v1/profiles, /v1/stats; PUT/DELETE /v1/profiles/{selector}); empty: off")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", linkem.DefaultIdleTimeout, "expire a client mapping idle this long")
	fs.IntVar(&cfg.MaxClients, "max-clients", linkem.DefaultMaxClients, "most concurrent client mappings")
	fs.BoolVar(&cfg.Realtime, "realtime", false, "release packets from a SCHED_FIFO thread (root or CAP_SYS_NICE) for precise timing on a loaded machine")
	fs.DurationVar(&statsInterval, "stats-interval", 5*time.Second, "how often to print a stats line; 0: never")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if cfg.Default, err = loadProfile(profile); err != nil {
		return fmt.Errorf("--profile: %w", err)
	}
	if schedulePath != "" {
		if cfg.Schedule, err = linkem.LoadSchedule(schedulePath); err != nil {
			return fmt.Errorf("--schedule: %w", err)
		}
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))

	p, err := linkem.New(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "linkem: listening on %s, upstream %s", p.Addr(), cfg.Upstream)
	if a := p.ControlAddr(); a != "" {
		fmt.Fprintf(stdout, ", control http://%s", a)
	}
	fmt.Fprintln(stdout)

	var tick <-chan time.Time
	if statsInterval > 0 {
		t := time.NewTicker(statsInterval)
		defer t.Stop()
		tick = t.C
	}
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick:
			fmt.Fprintln(stdout, statsLine(p.Stats()))
		}
	}
	closeErr := p.Close()
	return errors.Join(closeErr, writeTable(stdout, p.Stats()))
}

// loadProfile reads an inline profile or, with a leading @, a profile file.
func loadProfile(s string) (linkem.Profile, error) {
	data := []byte(s)
	if path, ok := strings.CutPrefix(s, "@"); ok {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return linkem.Profile{}, fmt.Errorf("read profile: %w", err)
		}
	}
	return linkem.ParseProfile(data)
}

// statsLine sums every client per direction.
func statsLine(st linkem.Stats) string {
	var up, down linkem.DirStats
	active := 0
	for _, c := range st.Clients {
		if c.Active {
			active++
		}
		add(&up, c.Up)
		add(&down, c.Down)
	}
	return fmt.Sprintf("t=%s clients=%d  up: %s  down: %s  release late p50 %v p99 %v",
		st.Uptime.Round(time.Second), active, dirLine(up), dirLine(down),
		st.Release.P50.Round(time.Microsecond), st.Release.P99.Round(time.Microsecond))
}

func add(sum *linkem.DirStats, d linkem.DirStats) {
	sum.PacketsIn += d.PacketsIn
	sum.PacketsOut += d.PacketsOut
	sum.DroppedLoss += d.DroppedLoss
	sum.DroppedQueue += d.DroppedQueue
	sum.DroppedLimit += d.DroppedLimit
	sum.Duplicated += d.Duplicated
	sum.Reordered += d.Reordered
}

func dirLine(d linkem.DirStats) string {
	return fmt.Sprintf("in %d out %d lost %d qdrop %d limit %d dup %d reord %d",
		d.PacketsIn, d.PacketsOut, d.DroppedLoss, d.DroppedQueue, d.DroppedLimit, d.Duplicated, d.Reordered)
}

// writeTable prints one row per client and direction.
func writeTable(w io.Writer, st linkem.Stats) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CLIENT\tADDR\tUPSTREAM\tPROFILE\tDIR\tPKTS-IN\tPKTS-OUT\tBYTES-IN\tBYTES-OUT\tLOST\tQDROP\tLIMIT\tDUP\tREORD\tSENDERR\tQDELAY-P50\tQDELAY-P95\t")
	for _, c := range st.Clients {
		for _, r := range []struct {
			dir string
			d   linkem.DirStats
		}{{"up", c.Up}, {"down", c.Down}} {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t%v\t\n",
				c.Index, c.Addr, c.Upstream, c.Source, r.dir,
				r.d.PacketsIn, r.d.PacketsOut, r.d.BytesIn, r.d.BytesOut, r.d.DroppedLoss, r.d.DroppedQueue,
				r.d.DroppedLimit, r.d.Duplicated, r.d.Reordered, r.d.SendErrors,
				r.d.QueueDelayP50.Round(time.Microsecond), r.d.QueueDelayP95.Round(time.Microsecond))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	_, err := fmt.Fprintf(w, "refused packets %d; release lateness over %d packets: p50 %v p99 %v max %v\n",
		st.RefusedPackets, st.Release.Packets, st.Release.P50, st.Release.P99, st.Release.Max)
	if err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}
