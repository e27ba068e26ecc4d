package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/internal/botswarm"
)

func TestParseFlagsErrors(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{args: nil, wantErr: "no bots"},
		{args: []string{"--clients", "-1"}, wantErr: "negative"},
		{args: []string{"--clients", "1", "--server", "nowhere"}, wantErr: "--server"},
		{args: []string{"--classes", "a"}, wantErr: "--classes"},
		{args: []string{"--clients", "1", "--bind", "::1"}, wantErr: "--bind"},
		{args: []string{"--clients", "1", "--duration", "0s"}, wantErr: "duration"},
		{args: []string{"--churn", "10", "--clients", "1"}, wantErr: "runs no bots"},
		{args: []string{"--clients", "1", "extra"}, wantErr: "unexpected arguments"},
		{args: []string{"--clients", "1", "--command", "jump"}, wantErr: "want move or random"},
		{args: []string{"--clients", "1", "--move-range", "0"}, wantErr: "--move-range"},
		{args: []string{"--clients", "1", "--schema", "/nonexistent/schema.json"}, wantErr: "--schema"},
		{args: []string{"--clients", "1", "--schema", writeFile(t, `{"kinds": [{"id": 0, "name": "x", "parts": [], "fields": []}]}`)}, wantErr: `--schema: schema: kind "x": id 0`},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseFlags(tc.args, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("parseFlags(%q) = %v, want error containing %q", tc.args, err, tc.wantErr)
			}
		})
	}
}

// writeFile writes content to a file of the test's and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestParseSchema: --schema loads a game's schema as the game server writes it, and the bots
// name it in their HELLO.
func TestParseSchema(t *testing.T) {
	s := protocol.Schema{Kinds: []protocol.KindSchema{{ID: 3, Name: "ship", Parts: protocol.Transform, Fields: []protocol.Field{protocol.Bool("boost")}}}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"--clients", "1", "--schema", writeFile(t, string(b))}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.cfg.Layout == nil || o.cfg.Layout.Hash() != s.Hash() {
		t.Fatalf("--schema gave layout %v, want the schema of hash %016x", o.cfg.Layout, s.Hash())
	}
}

// acceptor is an ENet server that accepts sessions and sends nothing.
func acceptor(t *testing.T) netip.AddrPort {
	t.Helper()
	h, err := enet.NewHost(enet.Config{Address: netip.MustParseAddrPort("127.0.0.1:0"), Peers: 64, Channels: 2})
	if err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var ev enet.Event
		defer ev.Packet.Destroy()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := h.Service(&ev, 5*time.Millisecond); err != nil {
				panic(err)
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		h.Destroy()
	})
	return h.Address()
}

func TestRun(t *testing.T) {
	addr := acceptor(t)
	dir := t.TempDir()
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, stdout string, file []byte)
	}{
		{
			name: "bots",
			args: []string{"--clients", "2", "--classes", "other=1@" + addr.String(), "--duration", "1500ms", "--commands-hz", "5"},
			check: func(t *testing.T, stdout string, file []byte) {
				var r botswarm.Report
				if err := json.Unmarshal(file, &r); err != nil {
					t.Fatal(err)
				}
				if len(r.Clients) != 3 || len(r.Classes) != 2 || r.Classes[0].States[botswarm.StateDone] != 2 {
					t.Fatalf("report: %d clients, classes %+v", len(r.Clients), r.Classes)
				}
				for _, want := range []string{"CLASS", "direct", "other", "done"} {
					if !strings.Contains(stdout, want) {
						t.Errorf("table lacks %q:\n%s", want, stdout)
					}
				}
			},
		},
		{
			name: "churn",
			args: []string{"--churn", "50", "--duration", "500ms", "--churn-peers", "64"},
			check: func(t *testing.T, stdout string, file []byte) {
				var r botswarm.ChurnReport
				if err := json.Unmarshal(file, &r); err != nil {
					t.Fatal(err)
				}
				if r.Attempts != 25 || r.Cycles+r.Timeouts+r.Refused+r.NoSlot+r.ClosedByServer+r.CloseTimeouts+r.Unfinished != 25 {
					t.Fatalf("churn report %+v", r)
				}
				if !strings.Contains(stdout, "CYCLES/S") {
					t.Errorf("table:\n%s", stdout)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name, "report.json")
			var stdout, stderr bytes.Buffer
			args := append([]string{"--server", addr.String(), "--json", path}, tc.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := run(ctx, args, &stdout, &stderr); err != nil {
				t.Fatalf("run: %v\n%s", err, stderr.String())
			}
			file, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, stdout.String(), file)
		})
	}
}
