package entity

import (
	"errors"
	"math"
	"slices"
)

// Visibility is which sessions see an entity, and how much it matters to them, on top of the
// interest radius. The zero Visibility is the default: every session sees the entity when it is
// within its interest radius, at the relevance its distance gives.
type Visibility struct {
	// Hidden hides the entity from every session.
	Hidden bool
	// Always makes the entity relevant to every session that may see it, wherever it is: a
	// scoreboard, a match timer, a flag carried across the map. An entity of a kind without a
	// position is always relevant.
	Always bool
	// Groups, when not zero, limits the entity to the sessions in one of these groups (a
	// session's groups are the game's, game.Tick.SetGroups): a team's markers, a squad's radio.
	Groups uint64
	// OwnerOnly limits the entity to the player in slot Owner (and to Groups, if any): an
	// inventory, a private objective.
	OwnerOnly bool
	Owner     int
	// Scale multiplies the entity's relevance, so that its updates go out more or less often
	// than its distance alone gives: in (0, 16]; 0 is 1.
	Scale float32

	placeless bool // the entity's kind has no position
}

// MaxRelevanceScale is the largest Visibility.Scale.
const MaxRelevanceScale = 16

// ErrBadVisibility: a relevance scale that is not in (0, MaxRelevanceScale].
var ErrBadVisibility = errors.New("entity: a relevance scale must be in (0, 16]")

// special reports whether v is other than the default.
func (v *Visibility) special() bool {
	return v.Hidden || v.Always || v.Groups != 0 || v.OwnerOnly || v.placeless || (v.Scale != 0 && v.Scale != 1)
}

// Visible reports whether a session of the player in slot, in groups, may see the entity.
func (v *Visibility) Visible(slot int, groups uint64) bool {
	switch {
	case v.Hidden:
		return false
	case v.Groups == 0 && !v.OwnerOnly:
		return true
	}
	return v.Groups&groups != 0 || v.OwnerOnly && v.Owner == slot
}

// Relevant reports whether the entity is relevant wherever it is.
func (v *Visibility) Relevant() bool { return v.Always || v.placeless }

// RelevanceScale is the factor on the entity's relevance.
func (v *Visibility) RelevanceScale() float32 {
	if v.Scale == 0 {
		return 1
	}
	return v.Scale
}

// SetVisibility sets which sessions see the entity (see Visibility). Sessions that no longer may
// see it are sent its despawn; those that now may find it as they would a spawn.
func (s *Store) SetVisibility(id ID, v Visibility) error {
	if !s.Valid(id) {
		return ErrNoEntity
	}
	if !(v.Scale == 0 || v.Scale > 0 && v.Scale <= MaxRelevanceScale) || math.IsNaN(float64(v.Scale)) {
		return ErrBadVisibility
	}
	slot := id.Slot()
	old := s.vis[slot]
	v.placeless = old.placeless
	s.vis[slot] = v
	if old.Relevant() != v.Relevant() {
		if v.Relevant() {
			s.always = append(s.always, slot)
		} else {
			s.dropAlways(slot)
		}
	}
	s.meta[slot].Special = v.special()
	// Views check the entities logged as spawned: one that may now be seen is found there.
	s.log.add(slot, s.tick, len(s.meta))
	return nil
}

// VisibilityOf returns the entity's visibility.
func (s *Store) VisibilityOf(id ID) (Visibility, bool) {
	if !s.Valid(id) {
		return Visibility{}, false
	}
	v := s.vis[id.Slot()]
	v.placeless = false
	return v, true
}

func (s *Store) dropAlways(slot uint16) {
	if i := slices.Index(s.always, slot); i >= 0 {
		s.always[i] = s.always[len(s.always)-1]
		s.always = s.always[:len(s.always)-1]
	}
}
