package botswarm

import (
	"context"
	"testing"
	"time"

	"github.com/netfleet/netfleet/gameserver/enet"
)

func TestChurn(t *testing.T) {
	tests := []struct {
		name  string
		limit enet.ConnectRate
		cfg   ChurnConfig
		check func(t *testing.T, r *ChurnReport)
	}{
		{
			name: "every cycle completes against an open server",
			cfg:  ChurnConfig{Rate: 200, Duration: time.Second, ConnectTimeout: testDeadline, CloseTimeout: testDeadline, Peers: 512},
			check: func(t *testing.T, r *ChurnReport) {
				if r.Cycles != 200 || r.Connected != 200 || r.Timeouts+r.Refused+r.NoSlot+r.ClosedByServer+r.CloseTimeouts+r.Unfinished != 0 {
					t.Errorf("want 200 clean cycles: %+v", r)
				}
				if r.CyclesPerSec <= 0 || r.ConnectMsP50 < 0 || r.ConnectMsP95 < r.ConnectMsP50 {
					t.Errorf("rates and handshake times: %+v", r)
				}
			},
		},
		{
			// The server's limiter admits a burst of 5 and 5 per second from 127.0.0.1; the
			// dropped CONNECTs time out.
			name:  "a connect limiter turns the excess into timeouts",
			limit: enet.ConnectRate{PerSecond: 5, Burst: 5},
			cfg:   ChurnConfig{Rate: 100, Duration: time.Second, ConnectTimeout: 300 * time.Millisecond, CloseTimeout: testDeadline, Peers: 512},
			check: func(t *testing.T, r *ChurnReport) {
				// Admitted at most: the burst plus the refill over the run and its drain.
				if r.Connected > 5+5*3 || r.Timeouts < 100-(5+5*3) || r.Cycles != r.Connected {
					t.Errorf("want at most 20 connected, the rest timed out: %+v", r)
				}
			},
		},
		{
			name: "a full host counts attempts without a slot",
			cfg:  ChurnConfig{Rate: 100, Duration: 500 * time.Millisecond, ConnectTimeout: 2 * time.Second, CloseTimeout: testDeadline, Peers: 1},
			// Only one attempt can be in flight; the limiter below keeps it from finishing fast.
			limit: enet.ConnectRate{PerSecond: 1e-6, Burst: 1},
			check: func(t *testing.T, r *ChurnReport) {
				if r.NoSlot == 0 || r.Connected != 1 {
					t.Errorf("want one connect and attempts without a slot: %+v", r)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := startSource(t, sourceConfig{connectRate: tc.limit})
			cfg := tc.cfg
			cfg.Server = src.addr()
			ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
			defer cancel()
			r, err := RunChurn(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			want := uint64(cfg.Rate * cfg.Duration.Seconds())
			if r.Attempts != want {
				t.Errorf("attempts %d, want %d", r.Attempts, want)
			}
			ends := r.NoSlot + r.Refused + r.Timeouts + r.ClosedByServer + r.CloseTimeouts + r.Cycles + r.Unfinished
			if ends != r.Attempts {
				t.Errorf("outcomes add up to %d, attempts %d: %+v", ends, r.Attempts, r)
			}
			var attempts, cycles, timeouts int
			for _, s := range r.Series {
				attempts += s.Attempts
				cycles += s.Cycles
				timeouts += s.Timeouts
			}
			if attempts != int(r.Attempts) || cycles != int(r.Cycles) || timeouts != int(r.Timeouts) {
				t.Errorf("series sum to %d attempts, %d cycles, %d timeouts: %+v", attempts, cycles, timeouts, r)
			}
			tc.check(t, r)
		})
	}
}
