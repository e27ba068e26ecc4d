package arena

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/netfleet/netfleet/gameserver/game"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// MatchPayload is the match payload an allocation of an arena server carries, as JSON:
//
//	{"matchSeconds": 300, "end": "ready"}
//
// MatchSeconds is how long the match lasts (0: until the server is stopped); when it is over,
// every player is disconnected with protocol.CloseGoingAway and the game calls Ready ("ready",
// the default: the server takes the next match) or Shutdown ("shutdown": its Fleet replaces
// it). An empty payload is a match without an end.
type MatchPayload struct {
	MatchSeconds int    `json:"matchSeconds,omitempty"`
	End          string `json:"end,omitempty"`
}

// The ends of a match.
const (
	EndReady    = "ready"
	EndShutdown = "shutdown"
)

// Counters the arena reports on its GameServer (status.counters).
const (
	// CounterMatches counts the matches the server started.
	CounterMatches = "matches"
	// CounterMatchSeconds is the length of the current (or last) match.
	CounterMatchSeconds = "match-seconds"
)

// ParseMatch decodes a match payload; an empty one is a match without an end.
func ParseMatch(payload string) (MatchPayload, error) {
	var m MatchPayload
	if payload == "" {
		return m, nil
	}
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		return m, fmt.Errorf("arena: match payload: %w", err)
	}
	switch {
	case m.MatchSeconds < 0 || m.MatchSeconds > 24*3600:
		return m, fmt.Errorf("arena: match payload: matchSeconds %d not in [0, 86400]", m.MatchSeconds)
	case m.End != "" && m.End != EndReady && m.End != EndShutdown:
		return m, fmt.Errorf("arena: match payload: end %q is neither %q nor %q", m.End, EndReady, EndShutdown)
	}
	return m, nil
}

// match is the arena's current match.
type match struct {
	alloc   game.Allocation
	payload MatchPayload
	left    time.Duration // until it ends; counted down by Step
	on      bool
	ended   bool // its players were sent away; the lifecycle call follows
	count   int64
}

// Allocated starts the match an allocation brings (game.Allocatable). A payload it cannot read
// starts a match without an end, and is logged by the caller through Match.
func (g *Game) Allocated(a game.Allocation) {
	m, err := ParseMatch(a.Payload)
	g.match.alloc, g.match.payload, g.match.on, g.match.ended = a, m, true, false
	g.match.left = time.Duration(m.MatchSeconds) * time.Second
	g.matchErr = err
	g.match.count++
	if lc := g.cfg.Lifecycle; lc != nil {
		g.matchErr = errors.Join(g.matchErr, lc.SetCounter(CounterMatches, g.match.count), lc.SetCounter(CounterMatchSeconds, int64(m.MatchSeconds)))
	}
}

// Match returns the allocation of the current match, whether one runs, and the error of its
// payload, if it had one.
func (g *Game) Match() (game.Allocation, bool, error) { return g.match.alloc, g.match.on, g.matchErr }

// stepMatch counts the match down; at its end it sends every player away, and on the next tick,
// with the players gone, it hands the server back through the lifecycle.
func (g *Game) stepMatch(t *game.Tick) {
	m := &g.match
	switch {
	case !m.on || m.payload.MatchSeconds == 0:
		return
	case m.ended:
		m.on, m.ended = false, false
		if lc := g.cfg.Lifecycle; lc != nil {
			var err error
			if m.payload.End == EndShutdown {
				err = lc.Shutdown()
			} else {
				err = lc.Ready()
			}
			g.matchErr = errors.Join(g.matchErr, err)
		}
		return
	}
	m.left -= time.Duration(float64(t.Dt) * float64(time.Second))
	if m.left > 0 {
		return
	}
	for _, pl := range g.play {
		_ = t.Kick(pl.slot, protocol.CloseGoingAway)
	}
	m.ended = true
}
