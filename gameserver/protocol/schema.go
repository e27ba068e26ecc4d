package protocol

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// A Schema declares what a game replicates: for each entity kind, which parts of the transform
// it has (position, rotation, velocity) and its typed fields. Server and clients must hold the
// same schema: its Hash travels in the client's HELLO, and a client with another is refused.
//
// Field values travel as unsigned integers of the field's width (Field.Bits); Encode and Decode
// convert between a field's value and that integer.
type Schema struct {
	Kinds []KindSchema
}

// KindSchema is one entity kind of a Schema.
type KindSchema struct {
	// ID is the kind on the wire (the spawn record's kind byte): 1 to 255, unique in the schema.
	ID uint8
	// Name names the kind, unique in the schema.
	Name string
	// Parts is the transform parts the kind has. A kind without a position has no place in the
	// world: it is always relevant to every session its visibility allows (a scoreboard).
	Parts Parts
	// Fields are the kind's fields, in wire order; at most MaxFields.
	Fields []Field
}

// Parts is a set of transform parts.
type Parts uint8

// Transform parts.
const (
	PartPosition Parts = 1 << iota
	PartRotation
	PartVelocity

	// Transform is every part: what a kind declared without a schema has.
	Transform = PartPosition | PartRotation | PartVelocity
)

// FieldType is the type of a Field.
type FieldType uint8

// Field types.
const (
	// FieldUint is an unsigned integer of Bits bits (1 to 32).
	FieldUint FieldType = iota + 1
	// FieldInt is a signed integer of Bits bits (1 to 32), two's complement.
	FieldInt
	// FieldBool is true or false, one bit.
	FieldBool
	// FieldEnum is one of Values, by index.
	FieldEnum
	// FieldFloat is a number in [Min, Max] quantized to Step: the integer round((v-Min)/Step).
	FieldFloat
	// FieldBytes is Size bytes (1 to MaxBytesField).
	FieldBytes
)

func (t FieldType) String() string {
	switch t {
	case FieldUint:
		return "uint"
	case FieldInt:
		return "int"
	case FieldBool:
		return "bool"
	case FieldEnum:
		return "enum"
	case FieldFloat:
		return "float"
	case FieldBytes:
		return "bytes"
	}
	return fmt.Sprintf("FieldType(%d)", uint8(t))
}

// Field is one typed field of a kind. Build them with Uint, Int, Bool, Enum, Float and Bytes.
type Field struct {
	Name   string
	Type   FieldType
	Bits   int      // FieldUint, FieldInt: the width
	Values []string // FieldEnum: the names of the values
	// FieldFloat: the range and the step.
	Min, Max, Step float64
	Size           int // FieldBytes: the length
}

// Field constructors.

// Uint is an unsigned integer field of bits bits.
func Uint(name string, bits int) Field { return Field{Name: name, Type: FieldUint, Bits: bits} }

// Int is a signed integer field of bits bits.
func Int(name string, bits int) Field { return Field{Name: name, Type: FieldInt, Bits: bits} }

// Bool is a true-or-false field.
func Bool(name string) Field { return Field{Name: name, Type: FieldBool} }

// Enum is a field holding one of values.
func Enum(name string, values ...string) Field {
	return Field{Name: name, Type: FieldEnum, Values: values}
}

// Float is a number in [lo, hi], quantized to step.
func Float(name string, lo, hi, step float64) Field {
	return Field{Name: name, Type: FieldFloat, Min: lo, Max: hi, Step: step}
}

// Bytes is a field of size bytes.
func Bytes(name string, size int) Field { return Field{Name: name, Type: FieldBytes, Size: size} }

// Schema limits.
const (
	// MaxFields is the most fields a kind has.
	MaxFields = 32
	// MaxBytesField is the longest FieldBytes, in bytes.
	MaxBytesField = 16
	// MaxFieldBits is the most bits the fields of one kind take together: with the transform, a
	// kind's records fit the smallest packet a server sends (256 bytes).
	MaxFieldBits = 1024
)

// Steps is the number of steps of a float field: its values are the integers 0 to Steps.
func (f *Field) steps() float64 { return math.Round((f.Max - f.Min) / f.Step) }

// Width is the field's width on the wire, in bits; 0 for a field that could hold one value only.
func (f *Field) Width() int {
	switch f.Type {
	case FieldUint, FieldInt:
		return f.Bits
	case FieldBool:
		return 1
	case FieldEnum:
		if len(f.Values) < 2 {
			return 0
		}
		return bits.Len(uint(len(f.Values) - 1))
	case FieldFloat:
		s := f.steps()
		if !(s >= 1 && s < 1<<32) {
			return 0
		}
		return bits.Len64(uint64(s))
	case FieldBytes:
		return 8 * f.Size
	}
	return 0
}

// Words is how many 32-bit words the field's value takes in a state.
func (f *Field) Words() int {
	if f.Type == FieldBytes {
		return (f.Size + 3) / 4
	}
	return 1
}

// SchemaError is a refused schema declaration: the kind and the field it is about, and why.
type SchemaError struct {
	Kind, Field string
	Detail      string
}

func (e *SchemaError) Error() string {
	switch {
	case e.Kind == "":
		return "schema: " + e.Detail
	case e.Field == "":
		return fmt.Sprintf("schema: kind %q: %s", e.Kind, e.Detail)
	}
	return fmt.Sprintf("schema: kind %q, field %q: %s", e.Kind, e.Field, e.Detail)
}

// Validate reports every problem of the schema, each as a *SchemaError naming the kind and the
// field: duplicate kind ids or names, fields with no name, duplicate field names, fields of no
// width or beyond their limits, too many fields, records too large for a packet.
func (s *Schema) Validate() error {
	var errs []error
	bad := func(kind, field, format string, args ...any) {
		errs = append(errs, &SchemaError{Kind: kind, Field: field, Detail: fmt.Sprintf(format, args...)})
	}
	if len(s.Kinds) == 0 {
		bad("", "", "no kinds")
	}
	ids, names := map[uint8]string{}, map[string]bool{}
	for i := range s.Kinds {
		k := &s.Kinds[i]
		name := k.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i)
			bad(name, "", "no name")
		}
		if names[k.Name] && k.Name != "" {
			bad(name, "", "a second kind of that name")
		}
		names[k.Name] = true
		switch prev, dup := ids[k.ID]; {
		case k.ID == 0:
			bad(name, "", "id 0; kind ids are 1 to 255")
		case dup:
			bad(name, "", "id %d is kind %q's too", k.ID, prev)
		}
		ids[k.ID] = name
		if k.Parts&^Transform != 0 {
			bad(name, "", "unknown transform parts %#x", uint8(k.Parts&^Transform))
		}
		if len(k.Fields) > MaxFields {
			bad(name, "", "%d fields, more than %d", len(k.Fields), MaxFields)
		}
		fields, total := map[string]bool{}, 0
		for j := range k.Fields {
			f := &k.Fields[j]
			fname := f.Name
			if fname == "" {
				fname = fmt.Sprintf("#%d", j)
				bad(name, fname, "no name")
			}
			if fields[f.Name] && f.Name != "" {
				bad(name, fname, "a second field of that name")
			}
			fields[f.Name] = true
			if msg := f.problem(); msg != "" {
				bad(name, fname, "%s", msg)
			}
			total += f.Width()
		}
		if total > MaxFieldBits {
			bad(name, "", "fields of %d bits, more than %d: a record of the kind could not fit a packet", total, MaxFieldBits)
		}
	}
	return errors.Join(errs...)
}

// problem says what is wrong with the field's declaration, or "".
func (f *Field) problem() string {
	switch f.Type {
	case FieldUint, FieldInt:
		if f.Bits < 1 || f.Bits > 32 {
			return fmt.Sprintf("%s of %d bits; 1 to 32", f.Type, f.Bits)
		}
	case FieldBool:
	case FieldEnum:
		if len(f.Values) < 2 || len(f.Values) > 1<<16 {
			return fmt.Sprintf("enum of %d values; 2 to 65536", len(f.Values))
		}
		seen := map[string]bool{}
		for _, v := range f.Values {
			if v == "" || seen[v] {
				return fmt.Sprintf("enum value %q empty or repeated", v)
			}
			seen[v] = true
		}
	case FieldFloat:
		finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
		switch {
		case !finite(f.Min) || !finite(f.Max) || !finite(f.Step) || !(f.Step > 0) || !(f.Max > f.Min):
			return fmt.Sprintf("float range [%v, %v] step %v; want finite bounds, min below max and a positive step", f.Min, f.Max, f.Step)
		case f.Width() == 0:
			return fmt.Sprintf("float of %v steps; 1 to 2^32-1", f.steps())
		}
	case FieldBytes:
		if f.Size < 1 || f.Size > MaxBytesField {
			return fmt.Sprintf("bytes of %d; 1 to %d", f.Size, MaxBytesField)
		}
	default:
		return fmt.Sprintf("unknown type %d", f.Type)
	}
	return ""
}

// Kind returns the schema of the kind with id, or nil.
func (s *Schema) Kind(id uint8) *KindSchema {
	for i := range s.Kinds {
		if s.Kinds[i].ID == id {
			return &s.Kinds[i]
		}
	}
	return nil
}

// HasFields reports whether any kind has fields: only then do delta records carry a fields
// section.
func (s *Schema) HasFields() bool {
	for i := range s.Kinds {
		if len(s.Kinds[i].Fields) > 0 {
			return true
		}
	}
	return false
}

// Field returns the index of the kind's field called name, or -1.
func (k *KindSchema) Field(name string) int {
	for i := range k.Fields {
		if k.Fields[i].Name == name {
			return i
		}
	}
	return -1
}

// Canonical returns the schema's canonical encoding, which its Hash digests (docs/protocol.md).
// Kinds are taken in order of id; field declarations in their order.
func (s *Schema) Canonical() []byte {
	b := []byte("netfleet schema 1\x00")
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	str := func(v string) { u32(uint32(len(v))); b = append(b, v...) }
	f64 := func(v float64) { b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v)) }
	order := make([]*KindSchema, 0, len(s.Kinds))
	for i := range s.Kinds {
		order = append(order, &s.Kinds[i])
	}
	for i := 1; i < len(order); i++ { // by id; a schema has few kinds
		for j := i; j > 0 && order[j].ID < order[j-1].ID; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	u32(uint32(len(order)))
	for _, k := range order {
		b = append(b, k.ID, uint8(k.Parts))
		str(k.Name)
		u32(uint32(len(k.Fields)))
		for i := range k.Fields {
			f := &k.Fields[i]
			b = append(b, uint8(f.Type))
			str(f.Name)
			switch f.Type {
			case FieldUint, FieldInt:
				u32(uint32(f.Bits))
			case FieldEnum:
				u32(uint32(len(f.Values)))
				for _, v := range f.Values {
					str(v)
				}
			case FieldFloat:
				f64(f.Min)
				f64(f.Max)
				f64(f.Step)
			case FieldBytes:
				u32(uint32(f.Size))
			}
		}
	}
	return b
}

// Hash is the schema's identity: the first 8 bytes of the SHA-256 of its canonical encoding, as a
// little-endian integer.
func (s *Schema) Hash() uint64 {
	sum := sha256.Sum256(s.Canonical())
	return binary.LittleEndian.Uint64(sum[:8])
}

// TransformSchema is the schema of a game that declares none: kinds 1 to 255, each with the whole
// transform and no fields.
func TransformSchema() *Schema {
	s := &Schema{Kinds: make([]KindSchema, 255)}
	for i := range s.Kinds {
		s.Kinds[i] = KindSchema{ID: uint8(i + 1), Name: fmt.Sprintf("kind%d", i+1), Parts: Transform}
	}
	return s
}
