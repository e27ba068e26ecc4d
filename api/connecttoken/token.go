// Package connecttoken issues and verifies netfleet's connect tokens.
//
// A connect token lets one player join one match: the operator signs it when it allocates a game
// server, the matchmaker hands it to the player, the player's client sends it in its HELLO, and
// the game server checks it before the connection costs a session. A token binds:
//
//   - the server: the address and port the player connects to, as the operator published them
//     (GameServer status.address and status.port);
//   - the allocation: the uid of the GameServerAllocation that picked the server;
//   - the player: the id the matchmaker named, which the game receives on the player's join;
//   - a deadline: the token is good to connect with until then (30 s after its issue by default).
//
// It is signed with HMAC-SHA256 under a key that only the operator and the fleet's servers hold.
// A server holds up to two keys at once, the signing key and the one it replaced, so that a key
// rotation never refuses a token issued just before it.
//
// # Format
//
// All integers are little-endian, like the rest of the wire protocol (docs/protocol.md):
//
//	offset  size  field
//	0       1     version (1)
//	1       4     key id: which key signed it
//	5       8     deadline, Unix milliseconds
//	13      16    server address (IPv6, or an IPv4 address mapped into IPv6)
//	29      2     server port
//	31      16    allocation: the first 16 bytes of SHA-256 of the allocation's uid
//	47      1     n, the player id's length, 1 to MaxPlayerIDBytes
//	48      n     player id (UTF-8)
//	48+n    32    HMAC-SHA256, under the key, of bytes 0 to 48+n
//
// A token is 81 to 144 bytes; a HELLO carries up to 255.
//
// # What tokens protect against
//
// A token keeps anyone who was not allocated a place in the match from holding a session: a
// client that only knows the server's address, a player of another match or of another server,
// a token kept past its deadline, and a token seen on the network and replayed from another
// address. ENet traffic is not encrypted: a token is a credential to connect with, not a secure
// channel, and an attacker who can rewrite a player's packets can act as that player.
//
// The package does no I/O; the Verifier's Verify allocates nothing. The operator issues tokens
// with Issue; the game server's loop checks them with a Verifier. It imports nothing of netfleet,
// so the operator links no game-server package.
package connecttoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"net/netip"
	"time"
	"unicode/utf8"
)

const (
	// Version is the token format's version byte.
	Version = 1
	// KeyBytes is a signing key's length.
	KeyBytes = 32
	// MACBytes is the length of a token's HMAC-SHA256.
	MACBytes = sha256.Size
	// MaxPlayerIDBytes is the longest player id a token carries.
	MaxPlayerIDBytes = 64
	// MinBytes and MaxBytes are the sizes of a token with a player id of 1 and of
	// MaxPlayerIDBytes bytes.
	MinBytes = headerBytes + 1 + MACBytes
	MaxBytes = headerBytes + MaxPlayerIDBytes + MACBytes

	headerBytes = 48 // up to and with the player id's length
	offKeyID    = 1
	offDeadline = 5
	offAddr     = 13
	offPort     = 29
	offAlloc    = 31
	offIDLen    = 47
)

// Key is a signing key and its id. Ids tell the keys of a rotation apart; a server looks a
// token's key up by its id.
type Key struct {
	ID     uint32
	Secret [KeyBytes]byte
}

// Allocation is the 16-byte form of an allocation's uid that a token carries.
type Allocation [16]byte

// AllocationOf returns the token form of an allocation uid.
func AllocationOf(uid string) Allocation {
	sum := sha256.Sum256([]byte(uid))
	var a Allocation
	copy(a[:], sum[:16])
	return a
}

// Claims is what a token says.
type Claims struct {
	// Server is the address and port the player connects to.
	Server netip.AddrPort
	// Allocation is the uid of the allocation that picked the server.
	Allocation string
	// Player is the player's id: 1 to MaxPlayerIDBytes bytes of UTF-8.
	Player string
	// Deadline is the last moment the token may be used to connect.
	Deadline time.Time
}

// ErrClaims is Issue's refusal of claims it cannot encode.
var ErrClaims = errors.New("token: invalid claims")

// Issue appends a token for c, signed with k, to dst.
func Issue(dst []byte, k *Key, c *Claims) ([]byte, error) {
	switch {
	case len(c.Player) == 0 || len(c.Player) > MaxPlayerIDBytes:
		return dst, fmt.Errorf("%w: the player id is %d bytes, want 1 to %d", ErrClaims, len(c.Player), MaxPlayerIDBytes)
	case !utf8.ValidString(c.Player):
		return dst, fmt.Errorf("%w: the player id is not UTF-8", ErrClaims)
	case !c.Server.IsValid() || c.Server.Port() == 0:
		return dst, fmt.Errorf("%w: the server address %v is not an address and a port", ErrClaims, c.Server)
	case c.Allocation == "":
		return dst, fmt.Errorf("%w: no allocation uid", ErrClaims)
	}
	start := len(dst)
	var h [headerBytes]byte
	h[0] = Version
	binary.LittleEndian.PutUint32(h[offKeyID:], k.ID)
	binary.LittleEndian.PutUint64(h[offDeadline:], uint64(c.Deadline.UnixMilli()))
	addr := c.Server.Addr().As16()
	copy(h[offAddr:], addr[:])
	binary.LittleEndian.PutUint16(h[offPort:], c.Server.Port())
	alloc := AllocationOf(c.Allocation)
	copy(h[offAlloc:], alloc[:])
	h[offIDLen] = byte(len(c.Player))
	dst = append(dst, h[:]...)
	dst = append(dst, c.Player...)
	m := hmac.New(sha256.New, k.Secret[:])
	m.Write(dst[start:])
	return m.Sum(dst), nil
}

// Reason is a Verify outcome: OK, or why a token was refused.
type Reason uint8

// The outcomes of Verify.
const (
	OK Reason = iota
	// Missing: the HELLO carried no token, and the server requires one.
	Missing
	// Malformed: the bytes are not a token of this version.
	Malformed
	// Forged: the token's key is not one the server holds, or its MAC does not verify.
	Forged
	// Expired: the token's deadline has passed.
	Expired
	// WrongServer: the token is for another server's address or port.
	WrongServer
	// WrongAllocation: the token is for another allocation than the one the server runs.
	WrongAllocation
	// Replayed: the token was already used from another address.
	Replayed
	// Full: the server cannot remember another token until older ones expire (try again later).
	Full
	// NumReasons is the number of outcomes.
	NumReasons
)

var reasonNames = [NumReasons]string{"ok", "missing", "malformed", "forged", "expired", "wrong_server", "wrong_allocation", "replayed", "full"}

func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// The close codes of the refusals (docs/protocol.md, close codes).
const (
	CloseMissing         = 4005
	CloseInvalid         = 4006 // malformed or forged
	CloseExpired         = 4007
	CloseWrongServer     = 4008
	CloseWrongAllocation = 4009
	CloseReplayed        = 4010
	closeTryLater        = 1013 // the wire protocol's "try again later"
)

// CloseCode is the close code a client refused for r is disconnected with; 0 for OK.
func (r Reason) CloseCode() uint32 {
	switch r {
	case OK:
		return 0
	case Missing:
		return CloseMissing
	case Malformed, Forged:
		return CloseInvalid
	case Expired:
		return CloseExpired
	case WrongServer:
		return CloseWrongServer
	case WrongAllocation:
		return CloseWrongAllocation
	case Replayed:
		return CloseReplayed
	default:
		return closeTryLater
	}
}

// Message is a short explanation of r for the CLOSE message a refused client receives.
func (r Reason) Message() string {
	switch r {
	case Missing:
		return "this server requires a connect token; ask the matchmaker for one"
	case Malformed:
		return "the connect token is malformed"
	case Forged:
		return "the connect token is not signed by this fleet's key"
	case Expired:
		return "the connect token has expired; ask the matchmaker for a new one"
	case WrongServer:
		return "the connect token is for another server"
	case WrongAllocation:
		return "the connect token is for another allocation than this server's match"
	case Replayed:
		return "the connect token was already used from another address"
	case Full:
		return "the server cannot admit another token now; try again later"
	}
	return ""
}

// signer is one key with its HMAC state, kept so that a verification allocates nothing.
type signer struct {
	id  uint32
	mac hash.Hash
}

// Keys is the set of keys a server verifies with: the signing key first, and during a rotation
// the key it replaced.
type Keys struct {
	signers []signer
}

// MaxKeys is the most keys a server holds at once.
const MaxKeys = 2

// ErrKeys is NewKeys' refusal of a key set.
var ErrKeys = errors.New("token: invalid key set")

// NewKeys makes the key set of keys, the signing key first. It refuses an empty set, more than
// MaxKeys keys, two keys of one id and an all-zero key.
func NewKeys(keys []Key) (*Keys, error) {
	if len(keys) == 0 || len(keys) > MaxKeys {
		return nil, fmt.Errorf("%w: %d keys, want 1 to %d", ErrKeys, len(keys), MaxKeys)
	}
	ks := &Keys{}
	var zero [KeyBytes]byte
	for i := range keys {
		k := &keys[i]
		if k.Secret == zero {
			return nil, fmt.Errorf("%w: key %d is all zeros", ErrKeys, k.ID)
		}
		for _, s := range ks.signers {
			if s.id == k.ID {
				return nil, fmt.Errorf("%w: two keys of id %d", ErrKeys, k.ID)
			}
		}
		ks.signers = append(ks.signers, signer{id: k.ID, mac: hmac.New(sha256.New, k.Secret[:])})
	}
	return ks, nil
}

// IDs returns the key ids, the signing key's first.
func (ks *Keys) IDs() []uint32 {
	out := make([]uint32, len(ks.signers))
	for i, s := range ks.signers {
		out[i] = s.id
	}
	return out
}

// check verifies tok's MAC; it reports false for a key id it does not hold.
func (ks *Keys) check(tok []byte, scratch *[MACBytes]byte) bool {
	id := binary.LittleEndian.Uint32(tok[offKeyID:])
	body := len(tok) - MACBytes
	for _, s := range ks.signers {
		if s.id != id {
			continue
		}
		s.mac.Reset()
		s.mac.Write(tok[:body])
		return hmac.Equal(s.mac.Sum(scratch[:0]), tok[body:])
	}
	return false
}

// DefaultReplayCapacity is the number of tokens a Verifier remembers by default: the tokens
// used to connect whose deadline has not passed.
const DefaultReplayCapacity = 4096

// used is a token the Verifier has admitted: from where, and until when it could be used.
type used struct {
	from     netip.AddrPort
	deadline int64 // Unix ms
}

// Verifier checks tokens for one server. It holds the fleet's keys, the server's address and the
// allocation it runs, and remembers each token it admitted until the token's deadline, so that a
// token used from one address is refused from any other.
//
// A Verifier is not safe for concurrent use: the server loop owns it and calls it on its tick
// goroutine, and changes its keys, address and allocation between ticks.
type Verifier struct {
	keys     *Keys
	server   netip.AddrPort
	allocs   []Allocation // of the match the server runs
	seen     map[[16]byte]used
	capacity int
	scratch  [MACBytes]byte
}

// NewVerifier makes a Verifier that remembers up to capacity admitted tokens (0:
// DefaultReplayCapacity). It holds no keys, address or allocation yet, and refuses every token
// until it has them.
func NewVerifier(capacity int) *Verifier {
	if capacity <= 0 {
		capacity = DefaultReplayCapacity
	}
	return &Verifier{seen: make(map[[16]byte]used, capacity), capacity: capacity, allocs: make([]Allocation, 0, MaxAllocations)}
}

// SetKeys replaces the keys tokens are verified with.
func (v *Verifier) SetKeys(ks *Keys) { v.keys = ks }

// Keys returns the keys, nil before SetKeys.
func (v *Verifier) Keys() *Keys { return v.keys }

// SetServer sets the address and port the server's tokens must name.
func (v *Verifier) SetServer(addr netip.AddrPort) { v.server = addr }

// Server returns the address and port tokens must name.
func (v *Verifier) Server() netip.AddrPort { return v.server }

// MaxAllocations is the most allocations a match is remembered by: the one that started it and
// those that backfilled it (the newest, as the game server's lifecycle keeps them).
const MaxAllocations = 64

// SetAllocations sets the uids of the allocations of the match the server runs: the one that
// started it, then those that backfilled it (the newest MaxAllocations are kept). None when the
// server runs no match: every token is then for another allocation.
func (v *Verifier) SetAllocations(uids ...string) {
	v.allocs = v.allocs[:0]
	if len(uids) > MaxAllocations {
		uids = uids[len(uids)-MaxAllocations:]
	}
	for _, uid := range uids {
		if uid != "" {
			v.allocs = append(v.allocs, AllocationOf(uid))
		}
	}
}

func (v *Verifier) inMatch(a [16]byte) bool {
	for _, m := range v.allocs {
		if m == a {
			return true
		}
	}
	return false
}

// Remembered is the number of admitted tokens the Verifier remembers now.
func (v *Verifier) Remembered() int { return len(v.seen) }

// Verify checks tok, presented from the address from at now. It returns the token's player id,
// which aliases tok, and OK; or the reason it refuses the token. An admitted token is remembered
// until its deadline: the same token from the same address is admitted again (a reconnect), from
// any other address it is Replayed.
func (v *Verifier) Verify(tok []byte, from netip.AddrPort, now time.Time) ([]byte, Reason) {
	if len(tok) == 0 {
		return nil, Missing
	}
	if len(tok) < MinBytes || len(tok) > MaxBytes || tok[0] != Version ||
		len(tok) != headerBytes+int(tok[offIDLen])+MACBytes || tok[offIDLen] == 0 {
		return nil, Malformed
	}
	if v.keys == nil || !v.keys.check(tok, &v.scratch) {
		return nil, Forged
	}
	nowMs := now.UnixMilli()
	deadline := int64(binary.LittleEndian.Uint64(tok[offDeadline:]))
	if nowMs > deadline {
		return nil, Expired
	}
	addr := netip.AddrFrom16([16]byte(tok[offAddr:offPort])).Unmap()
	if !v.server.IsValid() || addr != v.server.Addr().Unmap() || binary.LittleEndian.Uint16(tok[offPort:]) != v.server.Port() {
		return nil, WrongServer
	}
	if !v.inMatch([16]byte(tok[offAlloc:offIDLen])) {
		return nil, WrongAllocation
	}
	body := len(tok) - MACBytes
	key := [16]byte(tok[body : body+16])
	if u, ok := v.seen[key]; ok {
		if u.from != from {
			return nil, Replayed
		}
	} else {
		if len(v.seen) >= v.capacity && v.forget(nowMs) == 0 {
			return nil, Full
		}
		v.seen[key] = used{from: from, deadline: deadline}
	}
	return tok[headerBytes:body], OK
}

// forget drops the remembered tokens whose deadline has passed, and returns how many it dropped.
func (v *Verifier) forget(nowMs int64) int {
	n := 0
	for k, u := range v.seen {
		if nowMs > u.deadline {
			delete(v.seen, k)
			n++
		}
	}
	return n
}
