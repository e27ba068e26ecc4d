package netcode

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// ErrAllocationEnded: the allocation was delivered before and its match is over. The admin API
// answers a delivery of it with 410 Gone; the operator takes that as delivered.
var ErrAllocationEnded = errors.New("the match of this allocation is over")

// The lifecycle part of the admin API: the operator delivers allocations to the process, and
// follows the process's lifecycle (state, players, capacity, counters) with a long-poll.
const (
	// PathAllocation: PUT an Allocation (bearer token required); the answer is the
	// LifecycleStatus once the game has seen the allocation.
	PathAllocation = "/v1/allocation"
	// PathLifecycle: GET the LifecycleStatus. With ?since=V it is a long-poll: the answer comes
	// when the status's version differs from V, or after ?waitMillis= (default
	// DefaultLifecycleWaitMillis, at most MaxLifecycleWaitMillis) with the unchanged status.
	PathLifecycle = "/v1/lifecycle"

	DefaultLifecycleWaitMillis = 10_000
	MaxLifecycleWaitMillis     = 60_000

	// MaxAllocationPayloadBytes bounds an allocation's match payload.
	MaxAllocationPayloadBytes = 4096
	// MaxAllocationMetadataEntries bounds the labels, and separately the annotations, of an
	// allocation.
	MaxAllocationMetadataEntries = 32
	// MaxAllocationAnnotationBytes bounds one annotation value of an allocation.
	MaxAllocationAnnotationBytes = 1024
	// MaxCounters bounds the named counters a game sets; MaxCounterNameBytes one name.
	MaxCounters         = 16
	MaxCounterNameBytes = 63
	// MaxCapacity bounds the player capacity a game declares.
	MaxCapacity = 10_000
)

// LifecycleState is where a game-server process is in its life, as the process sees it.
type LifecycleState string

// The process's lifecycle states. A process starts Ready. Allocated: a match owns it (an
// allocation was delivered). Reserved: the game held itself back from allocation until
// ReservedUntil. Shutdown: the game ended; it is final.
const (
	LifecycleReady     LifecycleState = "Ready"
	LifecycleReserved  LifecycleState = "Reserved"
	LifecycleAllocated LifecycleState = "Allocated"
	LifecycleShutdown  LifecycleState = "Shutdown"
)

// Allocation is the body of PUT /v1/allocation: the GameServerAllocation that took the server.
//
// +kubebuilder:object:generate=false
type Allocation struct {
	// Name and UID name the allocation; UID is required, and a second delivery of the same UID
	// is acknowledged without reaching the game again.
	Name string `json:"name"`
	UID  string `json:"uid"`
	// Labels and Annotations are the allocation's metadata, as applied to the GameServer.
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Payload is the allocation's free-form match data, at most MaxAllocationPayloadBytes.
	Payload string `json:"payload,omitempty"`
	// PlayerRoom is the room for players the allocation asked for (0: none in particular).
	PlayerRoom int32 `json:"playerRoom,omitempty"`
}

// AllocationRef names an allocation.
//
// +kubebuilder:object:generate=false
type AllocationRef struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// LifecycleStatus is the answer to GET /v1/lifecycle and to PUT /v1/allocation.
//
// +kubebuilder:object:generate=false
type LifecycleStatus struct {
	// InstanceID identifies the process (as in ConfigStatus).
	InstanceID string `json:"instanceID"`
	// Version changes with every change of the status; a long-poll waits for a new one.
	Version uint64 `json:"version"`
	// State is the process's lifecycle state.
	State LifecycleState `json:"state"`
	// ReservedUntil is when a Reserved process becomes Ready again.
	ReservedUntil time.Time `json:"reservedUntil,omitzero"`
	// Allocation is the latest allocation of the current match, nil unless Allocated.
	Allocation *AllocationRef `json:"allocation,omitempty"`
	// LastAllocationUID is the UID of the last allocation the process received; it stays after
	// the match ends, so the operator can tell a match that ended from one not delivered yet.
	LastAllocationUID string `json:"lastAllocationUID,omitempty"`
	// Players is the number of connected players.
	Players int32 `json:"players"`
	// Capacity is the number of players the game takes; 0 when it has not said.
	Capacity int32 `json:"capacity,omitempty"`
	// Counters are the game's named counters.
	Counters map[string]int64 `json:"counters,omitempty"`
	// Healthy is false when the tick loop has stopped advancing.
	Healthy bool `json:"healthy"`
}

var (
	labelKeyRE   = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	labelValueRE = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)
	counterRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$`)
)

// ValidateAllocation checks an allocation against the limits the CRD enforces, and names the
// refused field.
func ValidateAllocation(a Allocation) error {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
	}
	if a.UID == "" || len(a.UID) > 128 {
		add("uid", "uid must be 1 to 128 characters")
	}
	if len(a.Name) > 253 {
		add("name", "name must be at most 253 characters")
	}
	if len(a.Payload) > MaxAllocationPayloadBytes {
		add("payload", "payload of %d bytes exceeds %d", len(a.Payload), MaxAllocationPayloadBytes)
	}
	if a.PlayerRoom < 0 || a.PlayerRoom > MaxCapacity {
		add("playerRoom", "playerRoom must be in [0, %d]", MaxCapacity)
	}
	if len(a.Labels) > MaxAllocationMetadataEntries {
		add("labels", "%d labels exceed %d", len(a.Labels), MaxAllocationMetadataEntries)
	}
	for k, v := range a.Labels {
		if err := ValidLabel(k, v); err != nil {
			add("labels", "%v", err)
		}
	}
	if len(a.Annotations) > MaxAllocationMetadataEntries {
		add("annotations", "%d annotations exceed %d", len(a.Annotations), MaxAllocationMetadataEntries)
	}
	for k, v := range a.Annotations {
		if !validKey(k) {
			add("annotations", "annotation key %q is not a qualified name", k)
		}
		if len(v) > MaxAllocationAnnotationBytes {
			add("annotations", "annotation %q: value of %d bytes exceeds %d", k, len(v), MaxAllocationAnnotationBytes)
		}
	}
	if len(errs) > 0 {
		return &ValidationError{Fields: errs}
	}
	return nil
}

// ValidLabel reports why k=v is not a valid Kubernetes label, or nil.
func ValidLabel(k, v string) error {
	if !validKey(k) {
		return fmt.Errorf("label key %q is not a qualified name", k)
	}
	if len(v) > 63 || !labelValueRE.MatchString(v) {
		return fmt.Errorf("label %q: value %q is not a valid label value", k, v)
	}
	return nil
}

func validKey(k string) bool {
	prefix, name := "", k
	for i := len(k) - 1; i >= 0; i-- {
		if k[i] == '/' {
			prefix, name = k[:i], k[i+1:]
			break
		}
	}
	return len(prefix) <= 253 && len(name) >= 1 && len(name) <= 63 && labelKeyRE.MatchString(k)
}

// ValidCounterName reports whether name may name a counter: 1 to MaxCounterNameBytes lower-case
// letters, digits, '-', '_' and '.', starting and ending with a letter or digit.
func ValidCounterName(name string) bool {
	return len(name) >= 1 && len(name) <= MaxCounterNameBytes && counterRE.MatchString(name)
}
