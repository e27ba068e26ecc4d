package linkem

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
)

// Profiles is a proxy's profile state. A client's profile is, in order of precedence: the most
// recently set override that picks it, the class of the first rule that picks it, the default.
type Profiles struct {
	Default   Profile            `json:"default"`
	Classes   map[string]Profile `json:"classes"`
	Rules     []Rule             `json:"rules"`
	Overrides []Override         `json:"overrides"`
}

// Override is a profile set for the clients a client or address selector picks.
type Override struct {
	Select  Selector `json:"select"`
	Profile Profile  `json:"profile"`
}

func newProfiles(def Profile, s Schedule) Profiles {
	ps := Profiles{
		Default:   def.WithDefaults(),
		Classes:   make(map[string]Profile, len(s.Classes)),
		Rules:     slices.Clone(s.Rules),
		Overrides: []Override{},
	}
	for name, p := range s.Classes {
		ps.Classes[name] = p.WithDefaults()
	}
	if ps.Rules == nil {
		ps.Rules = []Rule{}
	}
	return ps
}

func (ps *Profiles) clone() Profiles {
	return Profiles{
		Default:   ps.Default,
		Classes:   maps.Clone(ps.Classes),
		Rules:     slices.Clone(ps.Rules),
		Overrides: slices.Clone(ps.Overrides),
	}
}

// set stores p (validated, defaults applied) for sel. Setting a class that no rule names
// creates it, so a later rule-less schedule step is not an error.
func (ps *Profiles) set(sel Selector, p Profile) {
	switch sel.kind {
	case selDefault:
		ps.Default = p
	case selClass:
		ps.Classes[sel.class] = p
	default:
		ps.Overrides = slices.DeleteFunc(ps.Overrides, func(o Override) bool { return o.Select == sel })
		ps.Overrides = append(ps.Overrides, Override{Select: sel, Profile: p})
	}
}

// reset removes the override set for exactly sel.
func (ps *Profiles) reset(sel Selector) error {
	if !sel.picksClients() {
		return fmt.Errorf("reset %q: only client and address overrides can be reset", sel)
	}
	n := len(ps.Overrides)
	ps.Overrides = slices.DeleteFunc(ps.Overrides, func(o Override) bool { return o.Select == sel })
	if len(ps.Overrides) == n {
		return fmt.Errorf("reset %q: %w", sel, ErrNoOverride)
	}
	return nil
}

// resolve returns the profile for a client and what chose it.
func (ps *Profiles) resolve(index int, addr netip.AddrPort) (Profile, string) {
	for i := len(ps.Overrides) - 1; i >= 0; i-- {
		if o := ps.Overrides[i]; o.Select.matches(index, addr) {
			return o.Profile, o.Select.String()
		}
	}
	for _, r := range ps.Rules {
		if r.Select.matches(index, addr) {
			return ps.Classes[r.Class], "class:" + r.Class
		}
	}
	return ps.Default, "default"
}
