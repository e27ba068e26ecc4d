package netcode

// Resolved is a NetcodeConfig that Resolve validated and defaulted: every field is set and every
// rule holds. The game server's layers — the admin API, the server loop, the peer sessions and
// replication — take only a Resolved, so a config is validated and defaulted once, where it
// enters the process, and nothing inside judges it again. The zero Resolved is the default
// config.
//
// +kubebuilder:object:generate=false
type Resolved struct {
	c *NetcodeConfig // nil: the default config
}

// Resolve validates c (Validate) and fills in its defaults (Default).
func Resolve(c NetcodeConfig) (Resolved, error) {
	if err := c.Validate(); err != nil {
		return Resolved{}, err
	}
	d := c.Default()
	return Resolved{c: &d}, nil
}

// Config returns a copy of the resolved config.
func (r Resolved) Config() NetcodeConfig {
	if r.c == nil {
		return NetcodeConfig{}.Default()
	}
	return *r.c.DeepCopy()
}

// Hash is the config's Hash.
func (r Resolved) Hash() string {
	if r.c == nil {
		return NetcodeConfig{}.Hash()
	}
	return r.c.Hash()
}

// MustResolve is Resolve for a config known to be valid, such as a literal in a test or a tool;
// it panics if the config is invalid.
func MustResolve(c NetcodeConfig) Resolved {
	r, err := Resolve(c)
	if err != nil {
		panic(err)
	}
	return r
}
