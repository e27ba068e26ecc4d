package linkem

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
)

// Schedule is a plan of profiles: the classes a proxy starts with, the rules that put clients
// into classes, and timed changes. In YAML:
//
//	classes:
//	  lossy: {}                  # starts clean
//	rules:
//	  - select: client:0-3       # the first four clients...
//	    class: lossy             # ...take the lossy class's profile
//	steps:
//	  - at: 10s                  # 10 s after the proxy started
//	    select: class:lossy
//	    profile: {loss: 0.05, delayMs: 80}
//	  - at: 20s
//	    select: client:0
//	    profile: {down: {rateBytesPerSec: 20000}, up: {delayMs: 10}}
//	  - at: 30s
//	    select: client:0
//	    reset: true              # drop client 0's own profile; it follows its class again
type Schedule struct {
	Classes map[string]Profile `json:"classes,omitempty"`
	Rules   []Rule             `json:"rules,omitempty"`
	Steps   []Step             `json:"steps,omitempty"`
}

// Rule puts the clients Select picks (a client or address selector) into Class. The first
// matching rule wins; a client no rule picks uses the default profile.
type Rule struct {
	Select Selector `json:"select"`
	Class  string   `json:"class"`
}

// Step is one timed change: at At after the proxy started, set Profile for Select, or with
// Reset remove the per-client profile Select names (see Proxy.ResetProfile).
type Step struct {
	At      Duration `json:"at"`
	Select  Selector `json:"select"`
	Profile *Profile `json:"profile,omitempty"`
	Reset   bool     `json:"reset,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("1.5s", "250ms") in JSON/YAML.
type Duration time.Duration

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string like \"10s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// ParseSchedule decodes a schedule from YAML or JSON and validates it.
func ParseSchedule(data []byte) (Schedule, error) {
	var s Schedule
	if err := decodeStrict(data, &s); err != nil {
		return Schedule{}, fmt.Errorf("schedule: %w", err)
	}
	if err := s.Validate(); err != nil {
		return Schedule{}, err
	}
	return s, nil
}

// LoadSchedule reads and parses a schedule file.
func LoadSchedule(path string) (Schedule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule: %w", err)
	}
	s, err := ParseSchedule(data)
	if err != nil {
		return Schedule{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Validate checks classes, rules and steps.
func (s Schedule) Validate() error {
	for name, p := range s.Classes {
		if err := ClassSelector(name).validate(); err != nil {
			return fmt.Errorf("schedule: classes: %w", err)
		}
		if err := p.Validate(); err != nil {
			return fmt.Errorf("schedule: classes.%s.%w", name, err)
		}
	}
	for i, r := range s.Rules {
		if !r.Select.picksClients() {
			return fmt.Errorf("schedule: rules[%d].select: %q must pick clients (client:… or addr:…)", i, r.Select)
		}
		if _, ok := s.Classes[r.Class]; !ok {
			return fmt.Errorf("schedule: rules[%d].class: %q is not in classes", i, r.Class)
		}
	}
	for i, st := range s.Steps {
		if err := st.validate(); err != nil {
			return fmt.Errorf("schedule: steps[%d]: %w", i, err)
		}
	}
	return nil
}

func (st Step) validate() error {
	if st.At < 0 {
		return fmt.Errorf("at: %v is negative", time.Duration(st.At))
	}
	if err := st.Select.validate(); err != nil {
		return fmt.Errorf("select: %w", err)
	}
	switch {
	case st.Reset && st.Profile != nil:
		return errors.New("profile and reset both given")
	case st.Reset:
		if !st.Select.picksClients() {
			return fmt.Errorf("reset: %q is not a client or address selector", st.Select)
		}
	case st.Profile == nil:
		return errors.New("neither profile nor reset given")
	default:
		if err := st.Profile.Validate(); err != nil {
			return fmt.Errorf("profile.%w", err)
		}
	}
	return nil
}

// sortedSteps returns the steps in time order; steps at the same time keep file order.
func (s Schedule) sortedSteps() []Step {
	steps := slices.Clone(s.Steps)
	slices.SortStableFunc(steps, func(a, b Step) int { return cmp.Compare(a.At, b.At) })
	return steps
}
