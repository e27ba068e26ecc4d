package netcode

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// crdBounds reads every minimum and maximum of spec.netcode in the generated GameServer CRD,
// by JSON path.
func crdBounds(t *testing.T) map[string][2]int64 {
	t.Helper()
	raw, err := os.ReadFile("../../config/crd/bases/netfleet.io_gameservers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema schema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	nc := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["netcode"]
	out := map[string][2]int64{}
	var walk func(s schema, path string)
	walk = func(s schema, path string) {
		if s.Minimum != nil || s.Maximum != nil {
			if s.Minimum == nil || s.Maximum == nil {
				t.Fatalf("%s has a minimum or a maximum but not both", path)
			}
			out[path] = [2]int64{*s.Minimum, *s.Maximum}
		}
		for name, sub := range s.Properties {
			walk(sub, strings.TrimPrefix(path+"."+name, "."))
		}
	}
	walk(nc, "")
	if len(out) < 25 {
		t.Fatalf("found %d bounded fields in the CRD, want the netcode config's", len(out))
	}
	return out
}

type schema struct {
	Properties map[string]schema `json:"properties"`
	Minimum    *int64            `json:"minimum"`
	Maximum    *int64            `json:"maximum"`
}

// withField returns a config with the field at path set to v, through JSON as a push would.
func withField(t *testing.T, path string, v int64) NetcodeConfig {
	t.Helper()
	parts := strings.Split(path, ".")
	doc := fmt.Sprint(v)
	for i := len(parts) - 1; i >= 0; i-- {
		doc = fmt.Sprintf("{%q: %s}", parts[i], doc)
	}
	var c NetcodeConfig
	if err := json.Unmarshal([]byte(doc), &c); err != nil {
		t.Fatalf("%s = %d: %v", path, v, err)
	}
	return c
}

// rangeRefused reports whether err refuses the field at path for its range.
func rangeRefused(err error, path string) bool {
	var ve *ValidationError
	if !errors.As(err, &ve) {
		return false
	}
	for _, f := range ve.Fields {
		if f.Field == path && strings.HasPrefix(f.Detail, "must be in [") {
			return true
		}
	}
	return false
}

// TestBoundsAgreeWithCRD: the validator's ranges are the generated CRD's, field by field, and
// Resolve refuses a value just outside each range, naming the field, and accepts both ends. A
// zero in a field that is not a pointer means "absent, take the default" in Go, so it is not
// tried where it falls just below the range.
func TestBoundsAgreeWithCRD(t *testing.T) {
	crd := crdBounds(t)
	ours := map[string][2]int64{}
	for _, b := range fieldBounds {
		ours[b.field] = [2]int64{b.min, b.max}
	}
	if !reflect.DeepEqual(crd, ours) {
		t.Fatalf("the validator's ranges differ from the CRD's:\n  CRD       %v\n  validator %v", crd, ours)
	}
	for path, r := range crd {
		lo, hi := r[0], r[1]
		if lo-1 != 0 || isPointer(path) {
			if _, err := Resolve(withField(t, path, lo-1)); !rangeRefused(err, path) {
				t.Errorf("%s = %d (below %d): %v", path, lo-1, lo, err)
			}
		}
		if _, err := Resolve(withField(t, path, hi+1)); !rangeRefused(err, path) {
			t.Errorf("%s = %d (above %d): %v", path, hi+1, hi, err)
		}
		for _, v := range []int64{lo, hi} {
			if _, err := Resolve(withField(t, path, v)); rangeRefused(err, path) {
				t.Errorf("%s = %d, within [%d, %d], refused: %v", path, v, lo, hi, err)
			}
		}
	}
}

// isPointer reports whether the field at path is a pointer, whose zero is a value of its own.
func isPointer(path string) bool {
	t := reflect.TypeFor[NetcodeConfig]()
	for _, name := range strings.Split(path, ".") {
		found := false
		for i := range t.NumField() {
			f := t.Field(i)
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
				t, found = f.Type, true
				break
			}
		}
		if !found {
			return false
		}
		if t.Kind() == reflect.Pointer {
			return true
		}
	}
	return false
}

func TestResolve(t *testing.T) {
	var zero Resolved
	if zero.Hash() != (NetcodeConfig{}).Hash() || zero.Config().Hash() != (NetcodeConfig{}).Hash() {
		t.Fatal("the zero Resolved is not the default config")
	}
	r, err := Resolve(NetcodeConfig{TickRateHz: 30})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Config()
	if c.TickRateHz != 30 || c.Congestion.MinSendHz != DefaultCongestionMinSendHz || *c.Budget.SnapshotBytesPerTick != DefaultBudgetSnapshotBytesPerTick {
		t.Fatalf("resolved %+v", c)
	}
	*c.Budget.SnapshotBytesPerTick = 7
	if *r.Config().Budget.SnapshotBytesPerTick != DefaultBudgetSnapshotBytesPerTick {
		t.Fatal("a copy of a Resolved shares its pointers")
	}
	if _, err := Resolve(NetcodeConfig{TickRateHz: 5}); FirstField(err) != "tickRateHz" {
		t.Fatalf("Resolve of a bad config: %v", err)
	}
}
