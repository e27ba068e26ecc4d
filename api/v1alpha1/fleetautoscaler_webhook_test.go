package v1alpha1

import (
	"errors"
	"testing"
)

func TestDecodeFleetAutoscaleResponse(t *testing.T) {
	const uid = "7d1c"
	tests := []struct {
		name, body string
		want       FleetAutoscaleResponse
		errSub     string
		outOfRange bool
	}{
		{name: "scale", body: `{"response":{"uid":"7d1c","scale":true,"replicas":12}}`,
			want: FleetAutoscaleResponse{UID: uid, Scale: true, Replicas: 12}},
		{name: "scale to zero", body: `{"response":{"uid":"7d1c","scale":true,"replicas":0}}`,
			want: FleetAutoscaleResponse{UID: uid, Scale: true}},
		{name: "no scale ignores replicas", body: `{"response":{"uid":"7d1c","scale":false,"replicas":-4}}`,
			want: FleetAutoscaleResponse{UID: uid, Replicas: -4}},
		{name: "request echoed and unknown fields", body: `{"request":{"uid":"7d1c","name":"arena"},"response":{"uid":"7d1c","scale":true,"replicas":3,"extra":1},"apiVersion":"autoscaling.agones.dev/v1"}`,
			want: FleetAutoscaleResponse{UID: uid, Scale: true, Replicas: 3}},
		{name: "at the maximum", body: `{"response":{"uid":"7d1c","scale":true,"replicas":10000}}`,
			want: FleetAutoscaleResponse{UID: uid, Scale: true, Replicas: 10000}},
		{name: "over the maximum", body: `{"response":{"uid":"7d1c","scale":true,"replicas":10001}}`, errSub: "response.replicas 10001", outOfRange: true},
		{name: "negative", body: `{"response":{"uid":"7d1c","scale":true,"replicas":-1}}`, errSub: "response.replicas -1", outOfRange: true},
		{name: "no response", body: `{"request":{"uid":"7d1c"}}`, errSub: "response: missing"},
		{name: "null response", body: `{"response":null}`, errSub: "response: missing"},
		{name: "another request's uid", body: `{"response":{"uid":"0000","scale":true,"replicas":3}}`, errSub: "response.uid"},
		{name: "replicas not an integer", body: `{"response":{"uid":"7d1c","scale":true,"replicas":2.5}}`, errSub: "decode"},
		{name: "replicas a string", body: `{"response":{"uid":"7d1c","scale":true,"replicas":"3"}}`, errSub: "decode"},
		{name: "replicas beyond int32", body: `{"response":{"uid":"7d1c","scale":true,"replicas":4294967296}}`, errSub: "decode"},
		{name: "not JSON", body: `<html>bad gateway</html>`, errSub: "decode"},
		{name: "truncated", body: `{"response":{"uid":"7d1c","sca`, errSub: "decode"},
		{name: "two values", body: `{"response":{"uid":"7d1c","scale":false}} {}`, errSub: "decode"},
		{name: "empty", body: ``, errSub: "decode"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeFleetAutoscaleResponse([]byte(tc.body), uid)
			if errors.Is(err, ErrReplicasOutOfRange) != tc.outOfRange {
				t.Errorf("err %v: out of range %v, want %v", err, !tc.outOfRange, tc.outOfRange)
			}
			if refused(t, err, tc.errSub) {
				return
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
