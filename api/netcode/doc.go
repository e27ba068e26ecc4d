// Package netcode holds NetcodeConfig — a game server's netcode settings: tick rate, congestion
// response, byte budgets, backpressure, inbound limits, memory ceilings — with its defaults and
// validation, and the wire types of the game server's admin API.
//
// It is the one definition that the CRDs (api/v1alpha1), the operator (controllers) and the game
// server (gameserver/...) share, so it imports neither Kubernetes nor cgo packages. The
// kubebuilder markers on its fields become the CRD's OpenAPI bounds and CEL rules; Validate applies
// the same rules in Go so that a config pushed straight to a game server is judged exactly as the
// API server judges a custom resource. A field's range is stated once, in its Minimum and Maximum
// markers: hack/netcode-bounds generates the validator's table of ranges from them
// (zz_generated.bounds.go), and a test checks both against the generated CRD.
//
// Resolve is the one way into the game server: it validates and defaults a config once, where it
// enters the process, and returns a Resolved, the only form the runtime's layers accept.
//
// +kubebuilder:object:generate=true
package netcode
