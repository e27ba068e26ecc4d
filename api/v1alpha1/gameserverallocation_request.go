package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
)

// DecodeGameServerAllocation reads one GameServerAllocation, the body of a request to the
// operator's allocator endpoint. It refuses unknown fields, a second JSON value, a wrong
// apiVersion or kind and a malformed namespace; it fills in the apiVersion and kind, defaults the
// namespace to "default" and drops any status the caller sent.
func DecodeGameServerAllocation(body io.Reader) (*GameServerAllocation, error) {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	req := &GameServerAllocation{}
	if err := dec.Decode(req); err != nil {
		return nil, fmt.Errorf("decode GameServerAllocation: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode GameServerAllocation: more than one JSON value in the body")
	}
	gvk := GroupVersion.WithKind("GameServerAllocation")
	if req.APIVersion != "" && req.APIVersion != gvk.GroupVersion().String() {
		return nil, fmt.Errorf("apiVersion %q: want %s", req.APIVersion, gvk.GroupVersion())
	}
	if req.Kind != "" && req.Kind != gvk.Kind {
		return nil, fmt.Errorf("kind %q: want %s", req.Kind, gvk.Kind)
	}
	req.APIVersion, req.Kind = gvk.GroupVersion().String(), gvk.Kind
	if req.Namespace == "" {
		req.Namespace = corev1.NamespaceDefault
	}
	if errs := validation.IsDNS1123Label(req.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("metadata.namespace %q: %s", req.Namespace, errs[0])
	}
	req.Status = GameServerAllocationStatus{}
	return req, nil
}

// LabelSelector is the label selector of a request: its selector and, when it names one, its
// fleet.
func (s GameServerAllocationSpec) LabelSelector() (labels.Selector, error) {
	sel := labels.Everything()
	if s.Selector != nil {
		ls, err := metav1.LabelSelectorAsSelector(s.Selector)
		if err != nil {
			return nil, fmt.Errorf("spec.selector: %w", err)
		}
		sel = ls
	}
	if s.Fleet != "" {
		if errs := validation.IsDNS1123Label(s.Fleet); len(errs) > 0 {
			return nil, fmt.Errorf("spec.fleet %q: %s", s.Fleet, errs[0])
		}
		req, err := labels.NewRequirement(LabelFleet, selection.Equals, []string{s.Fleet})
		if err != nil {
			return nil, fmt.Errorf("spec.fleet: %w", err)
		}
		sel = sel.Add(*req)
	}
	return sel, nil
}
