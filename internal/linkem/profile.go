package linkem

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"sigs.k8s.io/yaml"
)

// Defaults filled in when a profile leaves them unset.
const (
	// DefaultReorderDelayMs is how long a reordered packet is held back when Reorder is set and
	// ReorderDelayMs is not: longer than a 60 Hz client's packet spacing, so the next packet
	// really overtakes it.
	DefaultReorderDelayMs = 20
	// DefaultQueueMs is the bottleneck queue limit when a rate is set and neither QueueMs nor
	// QueueBytes is: a typical access-router buffer.
	DefaultQueueMs = 100
	// DefaultPolicerBurstMs is a policer's bucket when PolicerBytesPerSec is set and
	// PolicerBurstBytes is not: this long at the policed rate, and at least
	// minPolicerBurstBytes (one full-size packet and a bit).
	DefaultPolicerBurstMs = 50
	minPolicerBurstBytes  = 1500
	// maxMs bounds every millisecond field, so a typo cannot park packets for hours.
	maxMs = 60_000
	// maxRate and maxQueueBytes keep the bottleneck arithmetic far from overflow.
	maxRate       = 1e11
	maxQueueBytes = 1 << 40
)

// Jitter distributions.
const (
	// JitterUniform spreads a packet's delay uniformly over [delay-jitter, delay+jitter], like
	// netem without a distribution table.
	JitterUniform = "uniform"
	// JitterNormal draws the delay from a normal distribution with mean delay and standard
	// deviation jitter.
	JitterNormal = "normal"
)

// Impairment is what happens to one direction of one client's path. The zero value is a clean
// link. Order of effects: loss, then the policer, then the bandwidth bottleneck and its queue,
// then propagation delay and jitter, then reordering; a duplicate follows its original through
// the same steps.
type Impairment struct {
	// Loss is the packet loss ratio in [0, 1].
	Loss float64 `json:"loss,omitempty"`
	// LossBurst, when above 1, makes loss bursty: a two-state Gilbert model whose bad state loses
	// every packet, with mean burst length LossBurst packets and long-run loss ratio Loss.
	LossBurst float64 `json:"lossBurst,omitempty"`
	// GilbertElliott sets the four-parameter bursty loss model directly; it excludes Loss and
	// LossBurst.
	GilbertElliott *GilbertElliott `json:"gilbertElliott,omitempty"`
	// DelayMs is the added one-way delay in milliseconds.
	DelayMs float64 `json:"delayMs,omitempty"`
	// JitterMs varies the delay per packet (see JitterDist). The sum is never below zero, and
	// jitter never reorders: a packet leaves no earlier than the one before it (a real path's
	// variable queueing keeps order); only Reorder reorders.
	JitterMs float64 `json:"jitterMs,omitempty"`
	// JitterDist is JitterUniform (the default) or JitterNormal.
	JitterDist string `json:"jitterDist,omitempty"`
	// Reorder is the probability in [0, 1] that a packet is held back an extra ReorderDelayMs,
	// letting later packets overtake it.
	Reorder float64 `json:"reorder,omitempty"`
	// ReorderDelayMs is the extra hold of a reordered packet; DefaultReorderDelayMs if unset.
	ReorderDelayMs float64 `json:"reorderDelayMs,omitempty"`
	// Duplicate is the probability in [0, 1] that a packet is sent twice.
	Duplicate float64 `json:"duplicate,omitempty"`
	// RateBytesPerSec caps the direction's throughput (UDP payload bytes); 0 is unlimited. Each
	// packet occupies the bottleneck for size/rate, so over-sending builds queueing delay.
	RateBytesPerSec int64 `json:"rateBytesPerSec,omitempty"`
	// QueueMs is the longest a packet may spend in the bottleneck queue, its own serialization
	// included; a packet that would exceed it is dropped at the tail. DefaultQueueMs if a rate is
	// set and neither QueueMs nor QueueBytes is.
	QueueMs float64 `json:"queueMs,omitempty"`
	// QueueBytes limits the bottleneck backlog, the arriving packet included, in bytes; 0 is no
	// byte limit. With both limits set the tighter one applies.
	QueueBytes int64 `json:"queueBytes,omitempty"`
	// PolicerBytesPerSec polices the direction (UDP payload bytes); 0 is no policer. A token
	// bucket of PolicerBurstBytes, filled at this rate, passes a packet it holds the bytes for
	// and drops one it does not, queueing nothing: sending over the rate loses the excess, and
	// adds no delay. PolicerBurstBytes defaults to DefaultPolicerBurstMs of the rate.
	PolicerBytesPerSec int64 `json:"policerBytesPerSec,omitempty"`
	PolicerBurstBytes  int64 `json:"policerBurstBytes,omitempty"`
}

// GilbertElliott is the two-state bursty loss model: per packet, the link loses with LossGood
// or LossBad depending on its state, then moves good->bad with probability P or bad->good with
// probability R. Mean burst length in the bad state is 1/R packets; the long-run loss ratio is
// (R*LossGood + P*LossBad) / (P + R).
type GilbertElliott struct {
	P        float64 `json:"p"`
	R        float64 `json:"r"`
	LossGood float64 `json:"lossGood"`
	LossBad  float64 `json:"lossBad"`
}

// Profile is a client's impairment, one Impairment per direction.
//
// In JSON or YAML a profile is either {"up": {...}, "down": {...}} or, as shorthand, the fields
// of one Impairment at the top level, which apply to the downstream (server to client) direction
// only, leaving upstream clean. Downstream is the default because it carries nearly all of a game
// server's bytes and is the direction its congestion response acts on; a clean upstream keeps
// client acknowledgements intact, so the effect is attributable. Shorthand fields and "down"
// cannot be mixed; "up" may accompany either.
type Profile struct {
	Up   Impairment `json:"up"`
	Down Impairment `json:"down"`
}

// UnmarshalJSON accepts the full and the shorthand form and refuses unknown fields.
func (p *Profile) UnmarshalJSON(data []byte) error {
	var aux struct {
		Impairment
		Up   *Impairment `json:"up"`
		Down *Impairment `json:"down"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aux); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	flat := aux.Impairment != (Impairment{})
	if flat && aux.Down != nil {
		return errors.New("profile: top-level impairment fields (shorthand for down) and \"down\" both given")
	}
	*p = Profile{Down: aux.Impairment}
	if aux.Down != nil {
		p.Down = *aux.Down
	}
	if aux.Up != nil {
		p.Up = *aux.Up
	}
	return nil
}

// ParseProfile decodes a profile from JSON or YAML, validates it and fills in defaults.
func ParseProfile(data []byte) (Profile, error) {
	var p Profile
	if err := decodeStrict(data, &p); err != nil {
		return Profile{}, err
	}
	if err := p.Validate(); err != nil {
		return Profile{}, err
	}
	return p.WithDefaults(), nil
}

// decodeStrict decodes YAML or JSON (JSON is YAML) into v, refusing unknown and duplicate keys.
func decodeStrict(data []byte, v any) error {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return nil
}

// Validate reports the first field out of range, named by its JSON path.
func (p Profile) Validate() error {
	if err := p.Up.validate(); err != nil {
		return fmt.Errorf("up.%w", err)
	}
	if err := p.Down.validate(); err != nil {
		return fmt.Errorf("down.%w", err)
	}
	return nil
}

// WithDefaults returns p with unset defaults filled in, as the proxy applies it.
func (p Profile) WithDefaults() Profile {
	return Profile{Up: p.Up.withDefaults(), Down: p.Down.withDefaults()}
}

func (m Impairment) withDefaults() Impairment {
	if m.JitterDist == "" {
		m.JitterDist = JitterUniform
	}
	if m.Reorder > 0 && m.ReorderDelayMs == 0 {
		m.ReorderDelayMs = DefaultReorderDelayMs
	}
	if m.RateBytesPerSec > 0 && m.QueueMs == 0 && m.QueueBytes == 0 {
		m.QueueMs = DefaultQueueMs
	}
	if m.PolicerBytesPerSec > 0 && m.PolicerBurstBytes == 0 {
		m.PolicerBurstBytes = max(m.PolicerBytesPerSec*DefaultPolicerBurstMs/1000, minPolicerBurstBytes)
	}
	if m.GilbertElliott != nil {
		ge := *m.GilbertElliott
		m.GilbertElliott = &ge
	}
	return m
}

func (m Impairment) validate() error {
	ratios := []struct {
		name string
		v    float64
	}{{"loss", m.Loss}, {"reorder", m.Reorder}, {"duplicate", m.Duplicate}}
	for _, r := range ratios {
		if err := checkRatio(r.name, r.v); err != nil {
			return err
		}
	}
	durations := []struct {
		name string
		v    float64
	}{{"delayMs", m.DelayMs}, {"jitterMs", m.JitterMs}, {"reorderDelayMs", m.ReorderDelayMs}, {"queueMs", m.QueueMs}}
	for _, d := range durations {
		if math.IsNaN(d.v) || d.v < 0 || d.v > maxMs {
			return fmt.Errorf("%s: %v is outside [0, %d]", d.name, d.v, maxMs)
		}
	}
	if math.IsNaN(m.LossBurst) || m.LossBurst < 0 || (m.LossBurst > 0 && m.LossBurst < 1) || m.LossBurst > 1e6 {
		return fmt.Errorf("lossBurst: %v must be 0 (off) or a mean burst length in [1, 1e6] packets", m.LossBurst)
	}
	if m.LossBurst > 1 && m.Loss >= 1 {
		return errors.New("lossBurst: bursty loss needs loss below 1")
	}
	if ge := m.GilbertElliott; ge != nil {
		if m.Loss != 0 || m.LossBurst != 0 {
			return errors.New("gilbertElliott: excludes loss and lossBurst")
		}
		for _, r := range []struct {
			name string
			v    float64
		}{{"p", ge.P}, {"r", ge.R}, {"lossGood", ge.LossGood}, {"lossBad", ge.LossBad}} {
			if err := checkRatio("gilbertElliott."+r.name, r.v); err != nil {
				return err
			}
		}
		if ge.P+ge.R == 0 {
			return errors.New("gilbertElliott: p and r cannot both be 0")
		}
	}
	switch m.JitterDist {
	case "", JitterUniform, JitterNormal:
	default:
		return fmt.Errorf("jitterDist: %q is not %q or %q", m.JitterDist, JitterUniform, JitterNormal)
	}
	if m.RateBytesPerSec < 0 || m.RateBytesPerSec > maxRate {
		return fmt.Errorf("rateBytesPerSec: %d is outside [0, %d]", m.RateBytesPerSec, int64(maxRate))
	}
	if m.QueueBytes < 0 || m.QueueBytes > maxQueueBytes {
		return fmt.Errorf("queueBytes: %d is outside [0, %d]", m.QueueBytes, int64(maxQueueBytes))
	}
	if m.RateBytesPerSec == 0 && (m.QueueMs != 0 || m.QueueBytes != 0) {
		return errors.New("queueMs/queueBytes: a queue limit needs rateBytesPerSec")
	}
	if m.PolicerBytesPerSec < 0 || m.PolicerBytesPerSec > maxRate {
		return fmt.Errorf("policerBytesPerSec: %d is outside [0, %d]", m.PolicerBytesPerSec, int64(maxRate))
	}
	if m.PolicerBurstBytes < 0 || m.PolicerBurstBytes > maxQueueBytes {
		return fmt.Errorf("policerBurstBytes: %d is outside [0, %d]", m.PolicerBurstBytes, int64(maxQueueBytes))
	}
	if m.PolicerBytesPerSec == 0 && m.PolicerBurstBytes != 0 {
		return errors.New("policerBurstBytes: a bucket needs policerBytesPerSec")
	}
	return nil
}

func checkRatio(name string, v float64) error {
	if math.IsNaN(v) || v < 0 || v > 1 {
		return fmt.Errorf("%s: %v is outside [0, 1]", name, v)
	}
	return nil
}
