package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The JSON form of a schema, for clients in other languages and for tools: a game publishes its
// schema with it (gameserver/serve's --print-schema), and a client loads it instead of declaring
// the schema again. docs/protocol.md specifies it; testdata/golden/vectors.json holds an example.
//
//	{"kinds": [{"id": 1, "name": "player", "parts": ["position", "rotation", "velocity"],
//	            "fields": [{"name": "health", "type": "float", "min": 0, "max": 100, "step": 0.5, "width": 8}, ...]}]}
//
// Kinds and fields keep their declaration order. "width" is the field's width on the wire, which
// the declaration determines: it is written for the reader's convenience and, when present,
// checked on reading.

type schemaJSON struct {
	Kinds []kindJSON `json:"kinds"`
}

type kindJSON struct {
	ID     uint8       `json:"id"`
	Name   string      `json:"name"`
	Parts  []string    `json:"parts"`
	Fields []fieldJSON `json:"fields"`
}

type fieldJSON struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Bits   int      `json:"bits,omitempty"`
	Values []string `json:"values,omitempty"`
	Min    *float64 `json:"min,omitempty"`
	Max    *float64 `json:"max,omitempty"`
	Step   *float64 `json:"step,omitempty"`
	Size   int      `json:"size,omitempty"`
	Width  *int     `json:"width,omitempty"`
}

var partNames = [...]struct {
	bit  Parts
	name string
}{{PartPosition, "position"}, {PartRotation, "rotation"}, {PartVelocity, "velocity"}}

// MarshalJSON encodes the schema in its JSON form.
func (s Schema) MarshalJSON() ([]byte, error) {
	out := schemaJSON{Kinds: make([]kindJSON, 0, len(s.Kinds))}
	for _, k := range s.Kinds {
		kj := kindJSON{ID: k.ID, Name: k.Name, Parts: []string{}, Fields: []fieldJSON{}}
		for _, p := range partNames {
			if k.Parts&p.bit != 0 {
				kj.Parts = append(kj.Parts, p.name)
			}
		}
		for _, f := range k.Fields {
			w := f.Width()
			fj := fieldJSON{Name: f.Name, Type: f.Type.String(), Width: &w}
			switch f.Type {
			case FieldUint, FieldInt:
				fj.Bits = f.Bits
			case FieldEnum:
				fj.Values = f.Values
			case FieldFloat:
				fj.Min, fj.Max, fj.Step = &f.Min, &f.Max, &f.Step
			case FieldBytes:
				fj.Size = f.Size
			}
			kj.Fields = append(kj.Fields, fj)
		}
		out.Kinds = append(out.Kinds, kj)
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads a schema's JSON form and validates it (Validate): an unknown part or field
// type, a width that is not the declaration's, or any problem Validate finds is an error naming
// the kind and the field. Unknown keys are refused.
func (s *Schema) UnmarshalJSON(b []byte) error {
	var in schemaJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	out := Schema{Kinds: make([]KindSchema, 0, len(in.Kinds))}
	for _, kj := range in.Kinds {
		k := KindSchema{ID: kj.ID, Name: kj.Name}
		for _, name := range kj.Parts {
			known := false
			for _, p := range partNames {
				if p.name == name {
					k.Parts |= p.bit
					known = true
				}
			}
			if !known {
				return &SchemaError{Kind: kj.Name, Detail: fmt.Sprintf("unknown transform part %q", name)}
			}
		}
		for _, fj := range kj.Fields {
			f := Field{Name: fj.Name, Bits: fj.Bits, Values: fj.Values, Size: fj.Size}
			for t := FieldUint; t <= FieldBytes; t++ {
				if t.String() == fj.Type {
					f.Type = t
				}
			}
			if f.Type == 0 {
				return &SchemaError{Kind: kj.Name, Field: fj.Name, Detail: fmt.Sprintf("unknown type %q", fj.Type)}
			}
			for _, v := range []struct {
				dst *float64
				src *float64
			}{{&f.Min, fj.Min}, {&f.Max, fj.Max}, {&f.Step, fj.Step}} {
				if v.src != nil {
					*v.dst = *v.src
				}
			}
			if fj.Width != nil && *fj.Width != f.Width() {
				return &SchemaError{Kind: kj.Name, Field: fj.Name, Detail: fmt.Sprintf("width %d, but the declaration gives %d", *fj.Width, f.Width())}
			}
			k.Fields = append(k.Fields, f)
		}
		out.Kinds = append(out.Kinds, k)
	}
	if err := out.Validate(); err != nil {
		return err
	}
	*s = out
	return nil
}
