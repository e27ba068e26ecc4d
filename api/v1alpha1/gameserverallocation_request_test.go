package v1alpha1

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestLabelSelector(t *testing.T) {
	tests := []struct {
		name    string
		spec    GameServerAllocationSpec
		matches map[string]string
		misses  map[string]string
		errSub  string
	}{
		{name: "everything", matches: map[string]string{"x": "y"}},
		{name: "fleet", spec: GameServerAllocationSpec{Fleet: "arena"},
			matches: map[string]string{LabelFleet: "arena"}, misses: map[string]string{LabelFleet: "duel"}},
		{name: "fleet and labels", spec: GameServerAllocationSpec{Fleet: "arena", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"map": "dust"}}},
			matches: map[string]string{LabelFleet: "arena", "map": "dust"}, misses: map[string]string{LabelFleet: "arena", "map": "mirage"}},
		{name: "bad fleet name", spec: GameServerAllocationSpec{Fleet: "Arena!"}, errSub: "spec.fleet"},
		{name: "bad selector", spec: GameServerAllocationSpec{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "map", Operator: "Near"}},
		}}, errSub: "spec.selector"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := tc.spec.LabelSelector()
			if refused(t, err, tc.errSub) {
				return
			}
			if !sel.Matches(labels.Set(tc.matches)) || (tc.misses != nil && sel.Matches(labels.Set(tc.misses))) {
				t.Errorf("selector %s: matches %v, misses %v", sel, tc.matches, tc.misses)
			}
		})
	}
}

func TestDecodeGameServerAllocation(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		ns     string
		fleet  string
		errSub string
	}{
		{name: "minimal", body: `{}`, ns: "default"},
		{name: "full", body: `{"apiVersion":"netfleet.io/v1alpha1","kind":"GameServerAllocation","metadata":{"namespace":"games"},"spec":{"fleet":"arena"}}`,
			ns: "games", fleet: "arena"},
		{name: "status is ignored", body: `{"status":{"state":"Allocated","gameServerName":"x"}}`, ns: "default"},
		{name: "wrong group", body: `{"apiVersion":"agones.dev/v1"}`, errSub: "apiVersion"},
		{name: "unknown field", body: `{"spec":{"flet":"a"}}`, errSub: "flet"},
		{name: "empty", body: ``, errSub: "decode"},
		{name: "array", body: `[]`, errSub: "decode"},
		{name: "trailing value", body: `{}{}`, errSub: "more than one"},
		{name: "namespace too long", body: `{"metadata":{"namespace":"` + strings.Repeat("n", 64) + `"}}`, errSub: "metadata.namespace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeGameServerAllocation(strings.NewReader(tc.body))
			if refused(t, err, tc.errSub) {
				return
			}
			if got.Namespace != tc.ns || got.Spec.Fleet != tc.fleet || got.Status.State != "" || got.Kind != "GameServerAllocation" {
				t.Errorf("decoded %+v", got)
			}
		})
	}
}

// FuzzDecodeAllocation feeds the allocator endpoint's decoder arbitrary bodies: it never panics, and what
// it accepts has a valid namespace and no status.
func FuzzDecodeAllocation(f *testing.F) {
	for _, seed := range []string{`{}`, `{"metadata":{"namespace":"a"},"spec":{"fleet":"b","selector":{"matchLabels":{"c":"d"}}}}`,
		`{"spec":{"selector":{"matchExpressions":[{"key":"k","operator":"In","values":["v"]}]}}}`, `null`, `{"status":{}}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := DecodeGameServerAllocation(bytes.NewReader(body))
		if err != nil {
			return
		}
		if got.Namespace == "" || got.Status.State != "" {
			t.Fatalf("accepted %+v", got)
		}
		// The selector of an accepted request either parses or is refused cleanly.
		if _, err := got.Spec.LabelSelector(); err != nil && err.Error() == "" {
			t.Fatal("empty error")
		}
	})
}

// refused checks err against a case that wants an error naming errSub (refused reports true:
// the case is done) or, with errSub empty, no error.
func refused(t *testing.T, err error, errSub string) bool {
	t.Helper()
	if errSub == "" {
		if err != nil {
			t.Fatal(err)
		}
		return false
	}
	if err == nil || !strings.Contains(err.Error(), errSub) {
		t.Fatalf("err %v, want one naming %s", err, errSub)
	}
	return true
}
