package entity

import (
	"errors"
	"fmt"

	"github.com/netfleet/netfleet/gameserver/protocol"
)

// Field is a handle to one field of one kind, for the store's field setters; get it once, with
// Store.Field, and use it every tick.
type Field struct {
	kind Kind
	f    *protocol.FieldLayout
}

// Name is the field's name.
func (f Field) Name() string { return f.f.Name }

// Layout is the field's layout in the schema.
func (f Field) Layout() *protocol.FieldLayout { return f.f }

// ErrNoField: the schema declares no such field for the kind.
var ErrNoField = errors.New("entity: the kind declares no such field")

// ErrWrongKind: a field of another kind than the entity's.
var ErrWrongKind = errors.New("entity: the field is not of the entity's kind")

// Field returns the handle of kind k's field called name.
func (s *Store) Field(k Kind, name string) (Field, error) {
	kl := s.layout.Kind(uint8(k))
	if kl == nil {
		return Field{}, fmt.Errorf("%w: %d", ErrUnknownKind, k)
	}
	f := kl.Field(name)
	if f == nil {
		return Field{}, fmt.Errorf("%w: kind %s has no field %q", ErrNoField, kl.Name, name)
	}
	return Field{kind: k, f: f}, nil
}

// MustField is Field for a field the game declared; it panics if there is no such field.
func (s *Store) MustField(k Kind, name string) Field {
	f, err := s.Field(k, name)
	if err != nil {
		panic(err)
	}
	return f
}

// words returns the entity's written field words, for a setter of f, and marks the entity dirty.
func (s *Store) words(id ID, f Field) ([]uint32, error) {
	if !s.Valid(id) {
		return nil, ErrNoEntity
	}
	slot := id.Slot()
	if f.f == nil || s.kind[slot] != f.kind {
		return nil, ErrWrongKind
	}
	return s.written[int(slot)*s.stride : (int(slot)+1)*s.stride], nil
}

// The setters write a field of an entity; Commit sends clients the fields that changed. A value
// out of the field's range, or of another type, is refused and the field keeps its value.

// SetUint sets an unsigned integer field.
func (s *Store) SetUint(id ID, f Field, v uint64) error {
	w, err := s.words(id, f)
	if err == nil {
		if err = f.f.PutUint(w, v); err == nil {
			s.dirty[id.Slot()] = true
		}
	}
	return err
}

// SetInt sets a signed integer field.
func (s *Store) SetInt(id ID, f Field, v int64) error {
	w, err := s.words(id, f)
	if err == nil {
		if err = f.f.PutInt(w, v); err == nil {
			s.dirty[id.Slot()] = true
		}
	}
	return err
}

// SetBool sets a bool field.
func (s *Store) SetBool(id ID, f Field, v bool) error {
	w, err := s.words(id, f)
	if err == nil {
		if err = f.f.PutBool(w, v); err == nil {
			s.dirty[id.Slot()] = true
		}
	}
	return err
}

// SetEnum sets an enum field to its value of index i.
func (s *Store) SetEnum(id ID, f Field, i int) error {
	w, err := s.words(id, f)
	if err == nil {
		if err = f.f.PutEnum(w, i); err == nil {
			s.dirty[id.Slot()] = true
		}
	}
	return err
}

// SetFloat sets a float field, quantized to its step and clamped to its range.
func (s *Store) SetFloat(id ID, f Field, v float64) error {
	w, err := s.words(id, f)
	if err == nil {
		if err = f.f.PutFloat(w, v); err == nil {
			s.dirty[id.Slot()] = true
		}
	}
	return err
}

// SetBytes sets a bytes field; b must be its size.
func (s *Store) SetBytes(id ID, f Field, b []byte) error {
	w, err := s.words(id, f)
	if err == nil {
		if err = f.f.PutBytes(w, b); err == nil {
			s.dirty[id.Slot()] = true
		}
	}
	return err
}

// FieldWords returns the field words last written for the entity (read them with the fields'
// protocol.FieldLayout). The slice is the store's: it must not be modified.
func (s *Store) FieldWords(id ID) ([]uint32, bool) {
	if !s.Valid(id) {
		return nil, false
	}
	slot := int(id.Slot())
	return s.written[slot*s.stride : (slot+1)*s.stride], true
}
