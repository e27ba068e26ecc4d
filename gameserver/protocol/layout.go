package protocol

import (
	"errors"
	"fmt"
	"math"
)

// Layout is a validated Schema compiled for encoding and decoding: per kind, its transform parts
// and where each field's value lives in a state's field words. A state's fields are Stride
// 32-bit words, the same for every kind of the schema; a kind uses its first Words of them.
type Layout struct {
	schema    *Schema
	kinds     [256]*KindLayout
	stride    int
	hasFields bool
	hash      uint64
}

// KindLayout is one kind of a Layout.
type KindLayout struct {
	ID     uint8
	Name   string
	Parts  Parts
	Fields []FieldLayout
	// Words is how many field words the kind uses; Bits the width of all its fields.
	Words, Bits int
	// flat is set when every field takes one word, field i's word i (no bytes field over 4
	// bytes); widths are the fields' widths, for the encoders.
	flat   bool
	widths [MaxFields]uint8
}

// FieldLayout is one field of a KindLayout: where its value is and how wide it is on the wire.
type FieldLayout struct {
	Field
	Index int // in the kind's fields
	Word  int // its first field word
	Width int // bits on the wire
}

// Compile validates s (Validate) and compiles it.
func (s *Schema) Compile() (*Layout, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	l := &Layout{schema: s, hash: s.Hash(), hasFields: s.HasFields()}
	for i := range s.Kinds {
		k := &s.Kinds[i]
		kl := &KindLayout{ID: k.ID, Name: k.Name, Parts: k.Parts, Fields: make([]FieldLayout, len(k.Fields))}
		for j := range k.Fields {
			f := &k.Fields[j]
			kl.Fields[j] = FieldLayout{Field: *f, Index: j, Word: kl.Words, Width: f.Width()}
			kl.Words += f.Words()
			kl.Bits += f.Width()
			kl.widths[j] = uint8(f.Width())
		}
		kl.flat = kl.Words == len(kl.Fields)
		l.stride = max(l.stride, kl.Words)
		l.kinds[k.ID] = kl
	}
	return l, nil
}

// MustCompile is Compile for a schema known to be valid; it panics if it is not.
func (s *Schema) MustCompile() *Layout {
	l, err := s.Compile()
	if err != nil {
		panic(err)
	}
	return l
}

// Schema is the schema the layout was compiled from.
func (l *Layout) Schema() *Schema { return l.schema }

// Hash is the schema's Hash.
func (l *Layout) Hash() uint64 { return l.hash }

// Stride is how many field words a state holds; a nil layout's is 0.
func (l *Layout) Stride() int {
	if l == nil {
		return 0
	}
	return l.stride
}

// HasFields reports whether any kind has fields: only then do delta records carry a fields
// section.
func (l *Layout) HasFields() bool { return l != nil && l.hasFields }

// Kind returns the layout of kind id, or nil if the schema has no such kind (a nil layout has
// none).
func (l *Layout) Kind(id uint8) *KindLayout {
	if l == nil {
		return nil
	}
	return l.kinds[id]
}

// Field returns the kind's field called name, or nil.
func (k *KindLayout) Field(name string) *FieldLayout {
	for i := range k.Fields {
		if k.Fields[i].Name == name {
			return &k.Fields[i]
		}
	}
	return nil
}

// Errors of field values.
var (
	ErrFieldType  = errors.New("protocol: the value is not of the field's type")
	ErrFieldRange = errors.New("protocol: the value is out of the field's range")
)

// PutUint stores an unsigned integer into the field's words of fields; v must fit its width.
func (f *FieldLayout) PutUint(fields []uint32, v uint64) error {
	if f.Type != FieldUint {
		return fmt.Errorf("%w: %s is a %s", ErrFieldType, f.Name, f.Type)
	}
	if f.Width < 64 && v>>uint(f.Width) != 0 {
		return fmt.Errorf("%w: %s holds %d bits, %d does not fit", ErrFieldRange, f.Name, f.Width, v)
	}
	fields[f.Word] = uint32(v)
	return nil
}

// PutInt stores a signed integer; v must fit its width.
func (f *FieldLayout) PutInt(fields []uint32, v int64) error {
	if f.Type != FieldInt {
		return fmt.Errorf("%w: %s is a %s", ErrFieldType, f.Name, f.Type)
	}
	lo, hi := -int64(1)<<(f.Width-1), int64(1)<<(f.Width-1)-1
	if v < lo || v > hi {
		return fmt.Errorf("%w: %s holds [%d, %d], not %d", ErrFieldRange, f.Name, lo, hi, v)
	}
	fields[f.Word] = uint32(v) & mask32(f.Width)
	return nil
}

// PutBool stores a bool.
func (f *FieldLayout) PutBool(fields []uint32, v bool) error {
	if f.Type != FieldBool {
		return fmt.Errorf("%w: %s is a %s", ErrFieldType, f.Name, f.Type)
	}
	fields[f.Word] = 0
	if v {
		fields[f.Word] = 1
	}
	return nil
}

// PutEnum stores the index of one of the enum's values.
func (f *FieldLayout) PutEnum(fields []uint32, i int) error {
	if f.Type != FieldEnum {
		return fmt.Errorf("%w: %s is a %s", ErrFieldType, f.Name, f.Type)
	}
	if i < 0 || i >= len(f.Values) {
		return fmt.Errorf("%w: %s has %d values, not %d", ErrFieldRange, f.Name, len(f.Values), i)
	}
	fields[f.Word] = uint32(i)
	return nil
}

// PutFloat quantizes v to the field's step, clamped to its range; NaN is refused.
func (f *FieldLayout) PutFloat(fields []uint32, v float64) error {
	if f.Type != FieldFloat {
		return fmt.Errorf("%w: %s is a %s", ErrFieldType, f.Name, f.Type)
	}
	if math.IsNaN(v) {
		return fmt.Errorf("%w: %s cannot hold NaN", ErrFieldRange, f.Name)
	}
	fields[f.Word] = uint32(math.Round((math.Max(f.Min, math.Min(f.Max, v)) - f.Min) / f.Step))
	return nil
}

// PutBytes stores b, which must be the field's size.
func (f *FieldLayout) PutBytes(fields []uint32, b []byte) error {
	if f.Type != FieldBytes {
		return fmt.Errorf("%w: %s is a %s", ErrFieldType, f.Name, f.Type)
	}
	if len(b) != f.Size {
		return fmt.Errorf("%w: %s holds %d bytes, not %d", ErrFieldRange, f.Name, f.Size, len(b))
	}
	for w := range f.Words() {
		var v uint32
		for i := range 4 {
			if k := 4*w + i; k < len(b) {
				v |= uint32(b[k]) << (8 * i)
			}
		}
		fields[f.Word+w] = v
	}
	return nil
}

// Uint reads an unsigned integer field.
func (f *FieldLayout) Uint(fields []uint32) uint64 { return uint64(fields[f.Word]) }

// Int reads a signed integer field.
func (f *FieldLayout) Int(fields []uint32) int64 {
	shift := 32 - uint(f.Width)
	return int64(int32(fields[f.Word]<<shift) >> shift)
}

// Bool reads a bool field.
func (f *FieldLayout) Bool(fields []uint32) bool { return fields[f.Word] != 0 }

// Enum reads an enum field: the value's index and name ("" if the index is out of range, which a
// decoded state never holds).
func (f *FieldLayout) Enum(fields []uint32) (int, string) {
	i := int(fields[f.Word])
	if i >= len(f.Values) {
		return i, ""
	}
	return i, f.Values[i]
}

// Float reads a float field.
func (f *FieldLayout) Float(fields []uint32) float64 {
	return f.Min + float64(fields[f.Word])*f.Step
}

// Bytes appends a bytes field to dst.
func (f *FieldLayout) Bytes(dst []byte, fields []uint32) []byte {
	for i := range f.Size {
		dst = append(dst, byte(fields[f.Word+i/4]>>(8*(i%4))))
	}
	return dst
}

func mask32(width int) uint32 {
	if width >= 32 {
		return math.MaxUint32
	}
	return 1<<uint(width) - 1
}

// MaxSpawnBits is the size of the largest spawn record of the layout's kinds; a nil layout's is
// MaxTransformSpawnBits.
func (l *Layout) MaxSpawnBits() int {
	if l == nil {
		return MaxTransformSpawnBits
	}
	most := 0
	for _, k := range l.kinds {
		if k != nil {
			most = max(most, k.spawnBits())
		}
	}
	return most
}

// spawnBits is the size of the kind's largest spawn record.
func (k *KindLayout) spawnBits() int {
	n := 2 + 17 + 8 + k.Bits
	if k.Parts&PartPosition != 0 {
		n += 3 * PosBits
	}
	if k.Parts&PartRotation != 0 {
		n += 32
	}
	if k.Parts&PartVelocity != 0 {
		n += 1 + 3*VelBits
	}
	return n
}
