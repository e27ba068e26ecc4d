package botswarm

import (
	"math"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseClass(t *testing.T) {
	tests := []struct {
		in      string
		want    Class
		wantErr string
	}{
		{in: "healthy=8", want: Class{Name: "healthy", Count: 8}},
		{in: "lossy=4@127.0.0.1:17777", want: Class{Name: "lossy", Count: 4, Addr: netip.MustParseAddrPort("127.0.0.1:17777")}},
		{in: "a.b-c_d=1", want: Class{Name: "a.b-c_d", Count: 1}},
		{in: "healthy", wantErr: "want name=count"},
		{in: "=3", wantErr: "empty name"},
		{in: "x y=3", wantErr: "name may hold only"},
		{in: "x=three", wantErr: "count"},
		{in: "x=0", wantErr: "out of range"},
		{in: "x=5000", wantErr: "out of range"},
		{in: "x=1@localhost:1", wantErr: "address"},
		{in: "x=1@127.0.0.1:0", wantErr: "no port"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseClass(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseClass(%q) = %+v, %v; want error containing %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseClass(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseClasses(t *testing.T) {
	got, err := ParseClasses("a=1, b=2@127.0.0.1:9")
	want := []Class{{Name: "a", Count: 1}, {Name: "b", Count: 2, Addr: netip.MustParseAddrPort("127.0.0.1:9")}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	if _, err := ParseClasses("a=1,,b=2"); err == nil {
		t.Fatal("empty element accepted")
	}
}

func TestParseAddrList(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "127.0.0.2", want: []string{"127.0.0.2"}},
		{in: "127.0.0.2-127.0.0.4,10.0.0.1", want: []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "10.0.0.1"}},
		{in: "127.0.0.255-127.0.1.0", want: []string{"127.0.0.255", "127.0.1.0"}},
		{in: "127.0.0.4-127.0.0.2", wantErr: true},
		{in: "::1", wantErr: true},
		{in: "127.0.0.1-", wantErr: true},
		{in: "0.0.0.0-0.0.255.255", wantErr: true}, // more than MaxBots
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseAddrList(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseAddrList(%q) = %v, want an error", tc.in, got)
				}
				return
			}
			var s []string
			for _, a := range got {
				s = append(s, a.String())
			}
			if err != nil || !reflect.DeepEqual(s, tc.want) {
				t.Fatalf("ParseAddrList(%q) = %v, %v; want %v", tc.in, s, err, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	server := netip.MustParseAddrPort("127.0.0.1:7777")
	ok := func() Config {
		return Config{Server: server, Classes: []Class{{Name: "a", Count: 2}}, Duration: time.Minute}
	}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{name: "valid", mutate: func(*Config) {}},
		{name: "no classes", mutate: func(c *Config) { c.Classes = nil }, wantErr: "no classes"},
		{name: "duplicate class", mutate: func(c *Config) { c.Classes = append(c.Classes, Class{Name: "a", Count: 1}) }, wantErr: "named twice"},
		{name: "no address", mutate: func(c *Config) { c.Server = netip.AddrPort{} }, wantErr: "no address"},
		{name: "class address only", mutate: func(c *Config) { c.Server = netip.AddrPort{}; c.Classes[0].Addr = server }},
		{name: "server without port", mutate: func(c *Config) { c.Server = netip.MustParseAddrPort("127.0.0.1:0") }, wantErr: "no port"},
		{name: "too many bots", mutate: func(c *Config) { c.Classes = []Class{{Name: "a", Count: MaxBots}, {Name: "b", Count: 1}} }, wantErr: "more than"},
		{name: "too many bot-seconds", mutate: func(c *Config) { c.Classes[0].Count = 1000; c.Duration = time.Hour }, wantErr: "bot-seconds"},
		{name: "zero duration", mutate: func(c *Config) { c.Duration = 0 }, wantErr: "duration"},
		{name: "ramp as long as the run", mutate: func(c *Config) { c.Ramp = c.Duration }, wantErr: "ramp"},
		{name: "negative connect timeout", mutate: func(c *Config) { c.ConnectTimeout = -1 }, wantErr: "connect timeout"},
		{name: "NaN commands", mutate: func(c *Config) { c.CommandsHz = math.NaN() }, wantErr: "commands Hz"},
		{name: "commands too fast", mutate: func(c *Config) { c.CommandsHz = MaxCommandsHz + 1 }, wantErr: "commands Hz"},
		{name: "command too large", mutate: func(c *Config) { c.CommandBytes = 256 }, wantErr: "command bytes"},
		{name: "IPv6 bind", mutate: func(c *Config) { c.Bind = []netip.Addr{netip.MustParseAddr("::1")} }, wantErr: "not IPv4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.mutate(&c)
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate = %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestChurnConfigValidate(t *testing.T) {
	ok := func() ChurnConfig {
		return ChurnConfig{Server: netip.MustParseAddrPort("127.0.0.1:7777"), Rate: 2000, Duration: time.Second}
	}
	tests := []struct {
		name   string
		mutate func(*ChurnConfig)
		valid  bool
	}{
		{name: "valid", mutate: func(*ChurnConfig) {}, valid: true},
		{name: "no server", mutate: func(c *ChurnConfig) { c.Server = netip.AddrPort{} }},
		{name: "zero rate", mutate: func(c *ChurnConfig) { c.Rate = 0 }},
		{name: "NaN rate", mutate: func(c *ChurnConfig) { c.Rate = math.NaN() }},
		{name: "rate too high", mutate: func(c *ChurnConfig) { c.Rate = MaxChurnRate + 1 }},
		{name: "zero duration", mutate: func(c *ChurnConfig) { c.Duration = 0 }},
		{name: "negative timeout", mutate: func(c *ChurnConfig) { c.CloseTimeout = -time.Second }},
		{name: "too many peers", mutate: func(c *ChurnConfig) { c.Peers = 1 << 20 }},
		{name: "IPv6 bind", mutate: func(c *ChurnConfig) { c.Bind = netip.MustParseAddr("::1") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.mutate(&c)
			if err := c.Validate(); (err == nil) != tc.valid {
				t.Fatalf("Validate = %v, want valid %v", err, tc.valid)
			}
		})
	}
}

func TestSeqStep(t *testing.T) {
	tests := []struct {
		last, seq    uint16
		lost         int
		late, resync bool
		name         string
	}{
		{name: "next", last: 10, seq: 11},
		{name: "gap", last: 10, seq: 14, lost: 3},
		{name: "wrap", last: 65534, seq: 1, lost: 2},
		{name: "duplicate", last: 10, seq: 10, late: true},
		{name: "late", last: 10, seq: 8, late: true},
		{name: "late across wrap", last: 1, seq: 65535, late: true},
		{name: "largest gap", last: 0, seq: seqResync, lost: seqResync - 1},
		{name: "restart ahead", last: 0, seq: seqResync + 1, resync: true},
		{name: "restart behind", last: 20000, seq: 0, resync: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lost, late, resync := seqStep(tc.last, tc.seq)
			if lost != tc.lost || late != tc.late || resync != tc.resync {
				t.Fatalf("seqStep(%d, %d) = %d, %v, %v; want %d, %v, %v", tc.last, tc.seq, lost, late, resync, tc.lost, tc.late, tc.resync)
			}
		})
	}
}
