package netcode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

func i32(v int32) *int32 { return &v }

func TestDefaultFillsEveryFieldAndValidates(t *testing.T) {
	d := NetcodeConfig{}.Default()
	if err := d.Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	if d.TickRateHz != DefaultTickRateHz || d.Congestion.MinSendHz != DefaultCongestionMinSendHz ||
		*d.Congestion.BudgetFloorBytes != DefaultCongestionBudgetFloorBytes ||
		*d.Budget.SnapshotBytesPerTick != DefaultBudgetSnapshotBytesPerTick ||
		d.Memory.FramePoolBudgetBytes != DefaultMemoryFramePoolBudgetBytes ||
		!d.Congestion.IsEnabled() || !d.Observability.PerPeerMetricsEnabled() {
		t.Fatalf("defaults not applied: %+v", d)
	}
	if d2 := d.Default(); d2.Hash() != d.Hash() {
		t.Fatal("Default is not idempotent")
	}
}

func TestDefaultKeepsMeaningfulZeros(t *testing.T) {
	off := false
	c := NetcodeConfig{
		Congestion: CongestionConfig{Enabled: &off, BudgetFloorBytes: i32(0)},
		Budget:     BudgetConfig{SessionBytesPerSecond: i32(0), SnapshotBytesPerTick: i32(0)},
	}.Default()
	if c.Congestion.IsEnabled() || *c.Congestion.BudgetFloorBytes != 0 || *c.Budget.SessionBytesPerSecond != 0 ||
		*c.Budget.SnapshotBytesPerTick != 0 {
		t.Fatalf("explicit zero overwritten: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("unlimited budgets refused: %v", err)
	}
}

func TestDefaultDoesNotAliasInput(t *testing.T) {
	floor := int32(100)
	c := NetcodeConfig{Congestion: CongestionConfig{BudgetFloorBytes: &floor}}
	d := c.Default()
	*d.Congestion.BudgetFloorBytes = 7
	if floor != 100 {
		t.Fatal("Default returned a config sharing pointers with its input")
	}
}

func TestHashIgnoresSpelledOutDefaults(t *testing.T) {
	if (NetcodeConfig{}).Hash() != (NetcodeConfig{TickRateHz: 60}).Hash() {
		t.Fatal("spelling out a default changed the hash")
	}
	if (NetcodeConfig{}).Hash() == (NetcodeConfig{TickRateHz: 30}).Hash() {
		t.Fatal("different configs hash the same")
	}
}

// TestValidateRefusesWithField is the Go half of the CRD's rules: each case must be refused and
// name the field. The operator's tests run the same cases against the API server.
func TestValidateRefusesWithField(t *testing.T) {
	cases := []struct {
		name  string
		cfg   NetcodeConfig
		field string
	}{
		{"tick rate too low", NetcodeConfig{TickRateHz: 5}, "tickRateHz"},
		{"tick rate too high", NetcodeConfig{TickRateHz: 500}, "tickRateHz"},
		{"min send above tick", NetcodeConfig{TickRateHz: 30, Congestion: CongestionConfig{MinSendHz: 40}}, "congestion.minSendHz"},
		{"loss threshold over 1000", NetcodeConfig{Congestion: CongestionConfig{LossThresholdPermille: 1001}}, "congestion.lossThresholdPermille"},
		{"negative floor", NetcodeConfig{Congestion: CongestionConfig{BudgetFloorBytes: i32(-1)}}, "congestion.budgetFloorBytes"},
		{"decrease factor too small", NetcodeConfig{Congestion: CongestionConfig{DecreaseFactorPermille: 50}}, "congestion.decreaseFactorPermille"},
		{"decrease factor 1", NetcodeConfig{Congestion: CongestionConfig{DecreaseFactorPermille: 1000}}, "congestion.decreaseFactorPermille"},
		{"eval interval huge", NetcodeConfig{Congestion: CongestionConfig{EvalIntervalTicks: 601}}, "congestion.evalIntervalTicks"},
		{"loss ceiling over 1000", NetcodeConfig{Congestion: CongestionConfig{LossCeilingPermille: 1001}}, "congestion.lossCeilingPermille"},
		{"loss ceiling below the threshold", NetcodeConfig{Congestion: CongestionConfig{LossThresholdPermille: 100, LossCeilingPermille: 50}}, "congestion.lossCeilingPermille"},
		{"loss ceiling below the default threshold", NetcodeConfig{Congestion: CongestionConfig{LossCeilingPermille: 10}}, "congestion.lossCeilingPermille"},
		{"threshold over the default loss ceiling", NetcodeConfig{Congestion: CongestionConfig{LossThresholdPermille: 200}}, "congestion.lossCeilingPermille"},
		{"loss test rate too low", NetcodeConfig{Congestion: CongestionConfig{LossTestRatePermille: 400}}, "congestion.lossTestRatePermille"},
		{"loss test rate too high", NetcodeConfig{Congestion: CongestionConfig{LossTestRatePermille: 960}}, "congestion.lossTestRatePermille"},
		{"loss retest too soon", NetcodeConfig{Congestion: CongestionConfig{LossRetestMs: 500}}, "congestion.lossRetestMs"},
		{"packet over MTU", NetcodeConfig{Budget: BudgetConfig{MaxPacketBytes: 1500}}, "budget.maxPacketBytes"},
		{"snapshot budget below a record", NetcodeConfig{Budget: BudgetConfig{SnapshotBytesPerTick: i32(10)}}, "budget.snapshotBytesPerTick"},
		{"session rate below a packet", NetcodeConfig{Budget: BudgetConfig{SessionBytesPerSecond: i32(500)}}, "budget.sessionBytesPerSecond"},
		{"frame smaller than packet", NetcodeConfig{Backpressure: BackpressureConfig{FrameBytes: 512}}, "backpressure.frameBytes"},
		{"push log zero-length impossible", NetcodeConfig{Backpressure: BackpressureConfig{PushLogTicks: 300}}, "backpressure.pushLogTicks"},
		{"frame pool below two frames", NetcodeConfig{Memory: MemoryConfig{FramePoolBudgetBytes: 300000}}, "memory.framePoolBudgetBytes"},
		{"ingress below one message", NetcodeConfig{Ingress: IngressConfig{BytesPerSecond: 512}}, "ingress.bytesPerSecond"},
		{"pending below one message", NetcodeConfig{Memory: MemoryConfig{MaxPendingBytesPerConnection: 512}}, "memory.maxPendingBytesPerConnection"},
		{"parked below two messages", NetcodeConfig{Memory: MemoryConfig{MaxParkedBytesPerConnection: 1500}}, "memory.maxParkedBytesPerConnection"},
		{"ping timeout too short", NetcodeConfig{Backpressure: BackpressureConfig{PingTimeoutMs: 100}}, "backpressure.pingTimeoutMs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			if got := FirstField(err); got != tc.field {
				t.Fatalf("refused field %q, want %q (%v)", got, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("message does not name %s: %v", tc.field, err)
			}
		})
	}
}

func TestConfigJSONRoundTrip(t *testing.T) {
	in := NetcodeConfig{TickRateHz: 30, Budget: BudgetConfig{SnapshotBytesPerTick: i32(0)}}.Default()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out NetcodeConfig
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if out.Hash() != in.Hash() || *out.Budget.SnapshotBytesPerTick != 0 {
		t.Fatalf("round trip changed the config: %s", raw)
	}
}

// TestCELFallbacksAreTheDefaults: the CRD's CEL rules read an absent field as a literal; each
// literal must be the field's default, or the API server would judge a config differently from
// Validate.
func TestCELFallbacksAreTheDefaults(t *testing.T) {
	src, err := os.ReadFile("config.go")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(NetcodeConfig{}.Default())
	if err != nil {
		t.Fatal(err)
	}
	var defaults map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&defaults); err != nil {
		t.Fatal(err)
	}
	fallback := regexp.MustCompile(`\? self\.([\w.]+) : (\d+)\)`)
	found := 0
	for _, m := range fallback.FindAllStringSubmatch(string(src), -1) {
		found++
		var v any = defaults
		for _, k := range strings.Split(m[1], ".") {
			v = v.(map[string]any)[k]
		}
		if got := fmt.Sprint(v); got != m[2] {
			t.Errorf("CEL reads an absent %s as %s, its default is %s", m[1], m[2], got)
		}
	}
	if found < 8 {
		t.Fatalf("found %d CEL fallbacks, want at least 8", found)
	}
}
