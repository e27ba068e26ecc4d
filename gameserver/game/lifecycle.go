package game

import "time"

// Allocation is the allocation that gave the server its match: the GameServerAllocation's name
// and uid, the labels and annotations it applied to the GameServer, and its free-form match
// payload (at most 4096 bytes; the game's own encoding, often JSON).
type Allocation struct {
	Name, UID   string
	Labels      map[string]string
	Annotations map[string]string
	Payload     string
	// PlayerRoom is the room for players the allocation asked for; 0 when it asked for none.
	PlayerRoom int
}

// Allocatable is what a game implements, besides Game, to learn of its allocations. The server
// loop calls Allocated on its tick goroutine, between two ticks, when the operator delivers an
// allocation: the operator hands the server's address to the matchmaker only after the call
// returned, so the game sees its match's data before any player of the match connects. A backfill
// allocation of a running match calls it again with the new allocation; a second delivery of the
// same allocation (an operator that retried) does not. Allocated must not block.
type Allocatable interface {
	Allocated(a Allocation)
}

// Lifecycle is the handle a game drives its own state with; serve.Setup hands it to the game.
// Its methods are safe to call from any goroutine, Step included, and do not block. A call out of
// order returns an error and changes nothing; after Shutdown every call but the setters returns
// an error.
type Lifecycle interface {
	// Ready makes the server available for a match again: a reusable server calls it when its
	// match ends. It also ends a reservation.
	Ready() error
	// Reserve holds a Ready server back from allocation (and from scale-down) for d, after which
	// it is Ready again. An Allocated server cannot be reserved.
	Reserve(d time.Duration) error
	// Shutdown ends the server for good: its Fleet replaces it.
	Shutdown() error
	// SetCapacity declares how many players the server takes (0 withdraws it); allocations that
	// ask for room for players count against it.
	SetCapacity(n int) error
	// SetCounter sets a named counter the GameServer's status shows.
	SetCounter(name string, v int64) error
}
