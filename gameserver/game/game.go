// Package game is the contract between netfleet's engine and a game built on it.
//
// The engine (the server loop, gameserver/broadcast) owns the tick, the transport, replication and
// every budget; a game owns its simulation. The game writes its entities into an entity store
// (gameserver/entity) that it creates and hands to the server loop, and the server loop calls the
// game's methods, always on its tick goroutine and never concurrently, so a game needs no locks of
// its own:
//
//   - Join, when a client completes its connection: the game returns the entity the player's
//     interest follows (normally the avatar it spawns for the player), or refuses the player with
//     an error; a Refusal names the close code the client is disconnected with;
//   - Leave, when a joined player is gone: it disconnected or timed out, or the server closed it;
//   - Input, for every COMMAND the player sent, in order, before the tick's Step: the payload is
//     the game's own encoding, opaque to the engine, and comes with the server tick the client had
//     applied when it sent it;
//   - Step, once per tick: the game simulates one tick and writes the results into the store
//     (spawns, transforms, despawns, priority bumps); the tick can also move a player's interest to
//     another entity or disconnect a player.
//
// Each tick runs, in order: the queued inputs of every player (Input), the store's Advance, Step,
// the store's Commit, and replication. Joins and leaves happen between ticks, as the transport
// delivers connections and disconnections.
//
// # Lifecycle
//
// A game drives its server's state through a Lifecycle handle (serve.Setup.Lifecycle): Ready
// after a match (the server is reused), Reserve, Shutdown, and the capacity and named counters
// its GameServer shows. A game that also implements Allocatable learns each allocation — its
// name, uid, metadata and match payload — on the tick goroutine, before the operator hands the
// server's address to anyone. Both are optional: a game that uses neither runs as before.
//
// # Refusals and errors
//
// A Join that returns a *Refusal disconnects the client with the refusal's code, which must be
// protocol.CloseRefused or a game code in [protocol.CloseGameMin, protocol.CloseGameMax]; any other
// error disconnects it with protocol.CloseRefused. protocol.CloseStalled (1013) is a refusal's
// "try again later", for a game that is full. A Join that returns an entity that does not
// exist in the store is an error of the game: the client is disconnected with
// protocol.CloseGameError, and the server logs which entity the game returned and counts it. A
// refused player never joined, so no Leave follows. Step's Follow and Kick refuse what they cannot
// do with an error; nothing a game passes the engine makes it panic.
//
// It imports gameserver/entity and gameserver/protocol and nothing else from netfleet.
package game

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// Game is a game running on netfleet. The server loop calls its methods on its tick goroutine,
// one at a time. None of them may block: they run inside the tick.
type Game interface {
	// Join admits a player whose client has connected, and returns the entity the player's
	// interest follows: replication sends the player the entities within the interest radius of
	// it. It refuses the player with an error (see Refusal).
	Join(p Player) (entity.ID, error)
	// Leave tells the game that a joined player is gone. The entity it followed stays in the
	// store until the game despawns it.
	Leave(p Player, why Leave)
	// Input delivers one COMMAND of the player: its payload, which is only valid during the call,
	// and the newest server tick the client had applied when it sent it. Inputs arrive in the
	// order the client sent them, all of a tick's before its Step.
	Input(p Player, in Input)
	// Step simulates one tick and writes its results into the store.
	Step(t *Tick)
}

// Player is a connected client as the game sees it.
type Player struct {
	// Slot is the player's peer slot, unique among the players connected now and reused after
	// one leaves: a game can index its per-player state by it.
	Slot int
	// Addr is the client's address.
	Addr netip.AddrPort
	// ConnectData is the 32-bit data the client connected with (ENet connect data).
	ConnectData uint32
	// PlayerID is the player id of the client's connect token: the id the matchmaker named when
	// it allocated the match. It is empty when the server does not check tokens, or when tokens
	// are optional and the client presented none.
	PlayerID string
}

// Input is one COMMAND of a player.
type Input struct {
	// Seq counts the client's commands (it wraps).
	Seq uint16
	// Tick is the newest server tick the client had applied when it sent the command.
	Tick uint32
	// Payload is the game's own encoding of the input, at most protocol.MaxCommandPayload bytes.
	// It aliases the server's buffer and must not be kept after Input returns.
	Payload []byte
}

// Leave says how a player left.
type Leave struct {
	// ByServer reports that the server closed the connection (Code says why); otherwise the client
	// disconnected or its connection timed out.
	ByServer bool
	// Code is the close code the server sent (protocol.Close*), or the disconnect data the client
	// sent (0 on a timeout).
	Code uint32
}

// Refusal is an error a Join returns to turn a player away with a close code of the game's
// choice: protocol.CloseRefused, protocol.CloseStalled ("try again later", when the game is
// full), or a code in [protocol.CloseGameMin, protocol.CloseGameMax] that the game documents for
// its clients. Reason is sent to the client in a CLOSE message before the disconnect (see
// protocol.Close), and logged.
type Refusal struct {
	Code   uint32
	Reason string
}

// Refuse returns a Refusal with code and reason.
func Refuse(code uint32, reason string) *Refusal { return &Refusal{Code: code, Reason: reason} }

func (r *Refusal) Error() string {
	return fmt.Sprintf("player refused (close code %d): %s", r.Code, r.Reason)
}

// Reason is what the client of a refused Join is told, in the CLOSE message before its
// disconnect: a Refusal's reason, or the error's text.
func Reason(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return err.Error()
}

// CloseCode is the close code the client of a refused Join is disconnected with: a valid
// Refusal's code, else protocol.CloseRefused.
func CloseCode(err error) uint32 {
	var r *Refusal
	if errors.As(err, &r) && (r.Code == protocol.CloseRefused || r.Code == protocol.CloseStalled ||
		r.Code >= protocol.CloseGameMin && r.Code <= protocol.CloseGameMax) {
		return r.Code
	}
	return protocol.CloseRefused
}

// Tick is one tick of the game, handed to Step. It is only valid during Step.
type Tick struct {
	// Number is the store's tick being stepped.
	Number uint32
	// Dt is the tick's length in seconds (1 / netcode tickRateHz).
	Dt float32
	// Store is the game's entity store.
	Store *entity.Store

	players Players
}

// Players is what a tick may do to the players; the server loop implements it.
type Players interface {
	// Follow moves the interest of the player in slot to entity id.
	Follow(slot int, id entity.ID) error
	// Kick disconnects the player in slot with a close code (protocol.CloseGoingAway,
	// protocol.CloseRefused or a game code); Leave follows.
	Kick(slot int, code uint32) error
	// SetGroups puts the player in slot in groups, a bit each: it sees the entities whose
	// entity.Visibility names one of them.
	SetGroups(slot int, groups uint64) error
}

// NewTick returns a tick for the server loop to hand to Step.
func NewTick(number uint32, dt float32, st *entity.Store, players Players) Tick {
	return Tick{Number: number, Dt: dt, Store: st, players: players}
}

// Errors of Follow and Kick.
var (
	ErrNoPlayer  = errors.New("game: no player in that slot")
	ErrNoPlayers = errors.New("game: this tick cannot act on players")
	ErrCloseCode = errors.New("game: a kick's close code must be 1001, 4003 or a game code in [4100, 4999]")
)

// Follow moves the interest of the player in slot to entity id, for example to the new avatar
// after a respawn. The entity must exist (entity.ErrNoEntity).
func (t *Tick) Follow(slot int, id entity.ID) error {
	if t.players == nil {
		return ErrNoPlayers
	}
	return t.players.Follow(slot, id)
}

// Kick disconnects the player in slot with code: protocol.CloseGoingAway, protocol.CloseRefused
// or a game code in [protocol.CloseGameMin, protocol.CloseGameMax]. Leave follows, with ByServer
// set.
func (t *Tick) Kick(slot int, code uint32) error {
	if t.players == nil {
		return ErrNoPlayers
	}
	if !KickCode(code) {
		return ErrCloseCode
	}
	return t.players.Kick(slot, code)
}

// SetGroups puts the player in slot in groups (a bit each, the game's meaning: a team, a squad):
// from the next frame on it sees the entities whose entity.Visibility.Groups names one of them,
// and no longer those of groups it left. A player joins in no group.
func (t *Tick) SetGroups(slot int, groups uint64) error {
	if t.players == nil {
		return ErrNoPlayers
	}
	return t.players.SetGroups(slot, groups)
}

// KickCode reports whether a game may disconnect a player with code.
func KickCode(code uint32) bool {
	return code == protocol.CloseGoingAway || code == protocol.CloseRefused ||
		code >= protocol.CloseGameMin && code <= protocol.CloseGameMax
}
