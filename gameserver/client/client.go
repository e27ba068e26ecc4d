// Package client is the client side of netfleet's game protocol, for Go game clients, load bots
// and tests: it decodes SNAPSHOT and RESET messages of a game's schema, applies them to a local
// view of the entities (their transforms and typed fields), keeps the per-entity history that
// deltas are resolved against, and produces HELLO, ACK, PING and COMMAND messages.
//
// It imports gameserver/protocol only; it does no I/O and reads no clock (callers pass the time),
// so a bot drives it from its own network loop.
//
// # Applying records
//
// Each entity keeps the tick of its newest record. A record older than that is stale (a
// reordered packet): it does not change the view, but a stale state that resolves is kept in the
// history, since the server may later use it as a baseline. A despawn leaves a tombstone so a
// late spawn cannot bring the entity back.
//
// A delta whose baseline is not in the history (or that names an entity the client does not
// hold) cannot be applied. The packet is still acknowledged, and the entity is listed in NeedFull
// in every ACK until a spawn for it arrives; the server answers NeedFull with full state and
// ignores acknowledgements of what it had in flight for that entity. If more than
// protocol.MaxNeedFull entities are missing, the ACK asks for a RESET instead (Resync).
package client

import (
	"errors"

	"github.com/netfleet/netfleet/gameserver/protocol"
)

// PingIntervalMs is the interval between PINGs: 4 Hz.
const PingIntervalMs = 250

// ErrUnexpected is returned for a message a client does not accept (ACK, PING, COMMAND).
var ErrUnexpected = errors.New("client: unexpected message type from server")

// Entity is one entity of the view.
type Entity struct {
	ID    uint16
	Kind  uint8
	State protocol.State
	Tick  uint32 // tick of State
	// Fields are the entity's field words at Tick (nil for a kind without fields); they alias the
	// client's memory and are valid until its next HandleMessage. Read them by name with the
	// typed accessors, or with the fields' protocol.FieldLayout.
	Fields []uint32
	// Layout is the entity's kind in the client's schema.
	Layout *protocol.KindLayout
}

// Field returns the layout of the entity's field called name, or nil.
func (e *Entity) Field(name string) *protocol.FieldLayout {
	if e.Layout == nil {
		return nil
	}
	return e.Layout.Field(name)
}

// Uint returns an unsigned integer field; ok is false if the kind has no such field.
func (e *Entity) Uint(name string) (v uint64, ok bool) {
	if f := e.Field(name); f != nil && f.Type == protocol.FieldUint {
		return f.Uint(e.Fields), true
	}
	return 0, false
}

// Int returns a signed integer field.
func (e *Entity) Int(name string) (v int64, ok bool) {
	if f := e.Field(name); f != nil && f.Type == protocol.FieldInt {
		return f.Int(e.Fields), true
	}
	return 0, false
}

// Bool returns a bool field.
func (e *Entity) Bool(name string) (v, ok bool) {
	if f := e.Field(name); f != nil && f.Type == protocol.FieldBool {
		return f.Bool(e.Fields), true
	}
	return false, false
}

// Enum returns an enum field's value name.
func (e *Entity) Enum(name string) (v string, ok bool) {
	if f := e.Field(name); f != nil && f.Type == protocol.FieldEnum {
		_, v = f.Enum(e.Fields)
		return v, true
	}
	return "", false
}

// Float returns a float field.
func (e *Entity) Float(name string) (v float64, ok bool) {
	if f := e.Field(name); f != nil && f.Type == protocol.FieldFloat {
		return f.Float(e.Fields), true
	}
	return 0, false
}

// Bytes returns a bytes field.
func (e *Entity) Bytes(name string) (v []byte, ok bool) {
	if f := e.Field(name); f != nil && f.Type == protocol.FieldBytes {
		return f.Bytes(nil, e.Fields), true
	}
	return nil, false
}

// Stats are the client's counters.
type Stats struct {
	Packets          uint64 // SNAPSHOT packets decoded
	Bytes            uint64 // their bytes
	Resets           uint64 // view resets performed (RESET or FlagReset)
	Malformed        uint64 // messages that did not decode, dropped
	RecordsApplied   uint64
	RecordsStale     uint64 // older than what the view holds
	RecordsUnapplied uint64 // deltas that could not be resolved; full state was asked for
	LastAgeMs        int32  // snapshot age of the last packet: receive time - server time
	MaxAgeMs         int32
	SumAgeMs         int64 // over Packets, for the mean age
}

type entry struct {
	id     uint16
	kind   uint8
	alive  bool
	latest uint32 // tick of the newest record applied, despawns included
	n      int    // history length
	ticks  [protocol.HistoryDepth]uint32
	states [protocol.HistoryDepth]protocol.State // ascending by tick
	// words holds the field words of each history state, stride a state, in the order of states.
	words  []uint32
	stride int
}

// find returns the index in the history of the state of tick, or -1.
func (e *entry) find(tick uint32) int {
	for i := e.n - 1; i >= 0; i-- {
		if e.ticks[i] == tick {
			return i
		}
	}
	return -1
}

// fieldsOf is the field words of history state i.
func (e *entry) fieldsOf(i int) []uint32 { return e.words[i*e.stride : (i+1)*e.stride] }

// remember inserts a state and its field words into the history in tick order, evicting the
// oldest when full.
func (e *entry) remember(tick uint32, s *protocol.State, fields []uint32) {
	i := e.n
	for i > 0 && e.ticks[i-1] >= tick {
		if e.ticks[i-1] == tick {
			e.states[i-1] = *s
			copy(e.fieldsOf(i-1), fields)
			return
		}
		i--
	}
	w := e.stride
	if e.n == protocol.HistoryDepth {
		if i == 0 {
			return // older than the whole history
		}
		copy(e.ticks[:i-1], e.ticks[1:i])
		copy(e.states[:i-1], e.states[1:i])
		copy(e.words[:(i-1)*w], e.words[w:i*w])
		i--
	} else {
		copy(e.ticks[i+1:e.n+1], e.ticks[i:e.n])
		copy(e.states[i+1:e.n+1], e.states[i:e.n])
		copy(e.words[(i+1)*w:(e.n+1)*w], e.words[i*w:e.n*w])
		e.n++
	}
	e.ticks[i], e.states[i] = tick, *s
	f := e.fieldsOf(i)
	clear(f)
	copy(f, fields)
}

// forget drops history older than tick.
func (e *entry) forget(tick uint32) {
	k := 0
	for k < e.n && e.ticks[k] < tick {
		k++
	}
	copy(e.ticks[:], e.ticks[k:e.n])
	copy(e.states[:], e.states[k:e.n])
	copy(e.words, e.words[k*e.stride:e.n*e.stride])
	e.n -= k
}

// current is the newest state.
func (e *entry) current() *protocol.State { return &e.states[e.n-1] }

// Client is one client's protocol state and view. It is not safe for concurrent use.
type Client struct {
	layout  *protocol.Layout // nil: the whole transform and no fields, for every kind
	stride  int
	index   map[uint16]int32
	entries []entry
	free    []int32
	alive   int
	snap    protocol.Snapshot
	scratch []uint32 // a delta's fields as they are applied

	closed   protocol.Close // the server's CLOSE, if it sent one
	token    []byte         // the connect token the HELLO carries
	inputSeq uint16         // the newest input acknowledgement, and the tick of its packet
	inputAt  uint32
	hasInput bool

	acks      protocol.AckState
	ackDue    bool
	need      []uint16
	resync    bool
	applied   uint32 // newest tick applied
	resetTick uint32 // tick of the newest reset performed

	lastPingMs int64
	pinged     bool
	cmdSeq     uint16
	stats      Stats
}

// New returns a client with an empty view, for a game of no declared schema: every kind has the
// whole transform and no fields.
func New() *Client { return NewLayout(nil) }

// NewLayout returns a client with an empty view for a game of the schema l was compiled from;
// nil is New's.
func NewLayout(l *protocol.Layout) *Client {
	c := &Client{
		layout: l,
		index:  make(map[uint16]int32, 1024),
		need:   make([]uint16, 0, protocol.MaxNeedFull),
	}
	if l != nil {
		c.stride = l.Stride()
		c.scratch = make([]uint32, c.stride)
	}
	return c
}

// Closed returns the CLOSE the server sent before disconnecting the client: the close code and
// why; ok is false if it sent none.
func (c *Client) Closed() (m protocol.Close, ok bool) { return c.closed, c.closed.Code != 0 }

// SchemaHash is the hash of the client's schema, which its HELLO carries.
func (c *Client) SchemaHash() uint64 {
	if c.layout == nil {
		return protocol.TransformSchema().Hash()
	}
	return c.layout.Hash()
}

// InputAck returns the sequence of the newest of the client's COMMANDs the game has applied, as
// the newest packet that said so reports (protocol.FlagInputAck); ok is false before any did.
func (c *Client) InputAck() (seq uint16, ok bool) { return c.inputSeq, c.hasInput }

// Stats returns the counters.
func (c *Client) Stats() Stats { return c.stats }

// LastAppliedTick is the newest server tick the client applied a SNAPSHOT packet of.
func (c *Client) LastAppliedTick() uint32 { return c.applied }

// Len is the number of live entities in the view.
func (c *Client) Len() int { return c.alive }

// Entity returns entity id of the view.
func (c *Client) Entity(id uint16) (Entity, bool) {
	i, ok := c.index[id]
	if !ok || !c.entries[i].alive {
		return Entity{}, false
	}
	return c.view(&c.entries[i]), true
}

// view is the Entity of entry e.
func (c *Client) view(e *entry) Entity {
	en := Entity{ID: e.id, Kind: e.kind, State: *e.current(), Tick: e.ticks[e.n-1]}
	if c.layout != nil {
		en.Layout = c.layout.Kind(e.kind)
		if en.Layout != nil && en.Layout.Words > 0 {
			en.Fields = e.fieldsOf(e.n - 1)[:en.Layout.Words]
		}
	}
	return en
}

// Range calls fn for every live entity until fn returns false.
func (c *Client) Range(fn func(Entity) bool) {
	for i := range c.entries {
		e := &c.entries[i]
		if e.alive && !fn(c.view(e)) {
			return
		}
	}
}

// HandleMessage applies a message from the server received at nowUnixMs. A message that does not
// decode is counted in Stats.Malformed and its error returned; the view is unchanged.
func (c *Client) HandleMessage(b []byte, nowUnixMs int64) error {
	t, err := protocol.PeekType(b)
	if err == nil {
		switch t {
		case protocol.MsgSnapshot:
			err = c.handleSnapshot(b, nowUnixMs)
		case protocol.MsgReset:
			var m protocol.Reset
			if err = protocol.DecodeReset(b, &m); err == nil {
				c.reset(m.Tick)
			}
		case protocol.MsgClose:
			err = protocol.DecodeClose(b, &c.closed)
		default:
			err = ErrUnexpected
		}
	}
	if err != nil {
		c.stats.Malformed++
	}
	return err
}

func (c *Client) handleSnapshot(b []byte, nowUnixMs int64) error {
	if err := c.layout.DecodeSnapshot(b, &c.snap); err != nil {
		return err
	}
	s := &c.snap
	if s.Flags&protocol.FlagInputAck != 0 && (!c.hasInput || s.Tick >= c.inputAt) {
		c.inputSeq, c.inputAt, c.hasInput = s.InputSeq, s.Tick, true
	}
	c.stats.Packets++
	c.stats.Bytes += uint64(len(b))
	age := int32(uint32(nowUnixMs) - s.ServerTimeMs)
	c.stats.LastAgeMs = age
	c.stats.MaxAgeMs = max(c.stats.MaxAgeMs, age)
	c.stats.SumAgeMs += int64(age)
	c.acks.Receive(s.Seq)
	c.ackDue = true
	if s.Flags&protocol.FlagReset != 0 {
		c.reset(s.Tick)
	}
	if s.Tick < c.resetTick {
		c.stats.RecordsStale += uint64(len(s.Records)) // from before a reset
		return nil
	}
	for i := range s.Records {
		c.apply(b, s.Tick, &s.Records[i])
	}
	c.applied = max(c.applied, s.Tick)
	return nil
}

func (c *Client) lookup(id uint16) *entry {
	if i, ok := c.index[id]; ok {
		return &c.entries[i]
	}
	return nil
}

func (c *Client) create(id uint16) *entry {
	var i int32
	if n := len(c.free); n > 0 {
		i = c.free[n-1]
		c.free = c.free[:n-1]
	} else {
		i = int32(len(c.entries))
		c.entries = append(c.entries, entry{})
	}
	words := c.entries[i].words
	if len(words) != protocol.HistoryDepth*c.stride {
		words = make([]uint32, protocol.HistoryDepth*c.stride)
	}
	c.entries[i] = entry{id: id, words: words, stride: c.stride}
	c.index[id] = i
	return &c.entries[i]
}

func (c *Client) apply(pkt []byte, tick uint32, r *protocol.Record) {
	e := c.lookup(r.ID)
	if e != nil && tick < e.latest {
		c.stale(pkt, tick, e, r)
		return
	}
	switch r.Op {
	case protocol.OpSpawn:
		if e == nil {
			e = c.create(r.ID)
		}
		if !e.alive {
			e.alive = true
			e.n = 0
			c.alive++
		}
		e.kind = r.Kind
		e.remember(tick, &r.State, r.Fields)
		e.latest = tick
		c.resolved(r.ID)
	case protocol.OpDelta:
		base := -1
		if e != nil && e.alive {
			base = e.find(r.BaselineTick)
		}
		if base < 0 {
			c.unapplied(r.ID)
			return
		}
		st, ok := c.resolve(pkt, e, base, r)
		if !ok {
			c.unapplied(r.ID)
			return
		}
		e.remember(tick, &st, c.scratch)
		e.latest = tick
	case protocol.OpDespawn:
		if e == nil {
			e = c.create(r.ID) // a tombstone, so a late spawn cannot revive it
		}
		if e.alive {
			e.alive = false
			c.alive--
		}
		e.n = 0
		e.latest = tick
		c.resolved(r.ID)
	}
	c.stats.RecordsApplied++
}

// resolve applies delta r to history state base of e: the state it gives, with its fields in
// c.scratch.
func (c *Client) resolve(pkt []byte, e *entry, base int, r *protocol.Record) (protocol.State, bool) {
	st, ok := r.Delta.Apply(&e.states[base])
	if !ok || c.stride == 0 {
		return st, ok
	}
	return st, c.layout.ApplyFields(pkt, r, e.kind, e.fieldsOf(base), c.scratch)
}

// stale handles a record older than the entity's newest: the view does not change, but a state
// that resolves joins the history, as the server may make it a baseline.
func (c *Client) stale(pkt []byte, tick uint32, e *entry, r *protocol.Record) {
	c.stats.RecordsStale++
	if !e.alive {
		return
	}
	switch r.Op {
	case protocol.OpSpawn:
		e.remember(tick, &r.State, r.Fields)
	case protocol.OpDelta:
		if base := e.find(r.BaselineTick); base >= 0 {
			if st, ok := c.resolve(pkt, e, base, r); ok {
				e.remember(tick, &st, c.scratch)
			}
		}
	}
}

func (c *Client) unapplied(id uint16) {
	c.stats.RecordsUnapplied++
	for _, n := range c.need {
		if n == id {
			return
		}
	}
	if len(c.need) == protocol.MaxNeedFull {
		c.resync = true
		return
	}
	c.need = append(c.need, id)
	c.ackDue = true
}

// resolved drops id from NeedFull once a spawn or despawn settled it.
func (c *Client) resolved(id uint16) {
	for i, n := range c.need {
		if n == id {
			c.need[i] = c.need[len(c.need)-1]
			c.need = c.need[:len(c.need)-1]
			return
		}
	}
}

// reset performs the RESET of tick once: every entity with nothing from tick on is dropped, and
// history before tick with it.
func (c *Client) reset(tick uint32) {
	if tick <= c.resetTick {
		return
	}
	c.resetTick = tick
	c.stats.Resets++
	for i := range c.entries {
		e := &c.entries[i]
		if _, ok := c.index[e.id]; !ok || c.index[e.id] != int32(i) {
			continue // a free entry
		}
		if e.latest >= tick {
			e.forget(tick)
			continue
		}
		if e.alive {
			e.alive = false
			c.alive--
		}
		delete(c.index, e.id)
		c.free = append(c.free, int32(i))
	}
	c.need = c.need[:0]
	c.resync = false
}

// AckDue reports whether packets arrived, or entities went missing, since the last ACK.
func (c *Client) AckDue() bool { return c.ackDue }

// AppendAck appends an ACK of every packet received (the newest and the AckWindow before it) to
// dst. It reports false, appending nothing, before the first packet.
func (c *Client) AppendAck(dst []byte) ([]byte, bool) {
	if !c.acks.Any {
		return dst, false
	}
	a := protocol.Ack{Latest: c.acks.Latest, Received: c.acks.Received, LastAppliedTick: c.applied, Resync: c.resync}
	for _, id := range c.need {
		a.AddNeedFull(id)
	}
	c.ackDue = false
	return protocol.AppendAck(dst, &a), true
}

// SetToken sets the connect token the client's HELLO carries (the one the matchmaker handed the
// player for this server); nil sends none. It refuses a token over protocol.MaxTokenBytes.
func (c *Client) SetToken(token []byte) error {
	if len(token) > protocol.MaxTokenBytes {
		return protocol.ErrTokenLimit
	}
	c.token = append(c.token[:0], token...)
	return nil
}

// AppendHello appends the client's HELLO to dst: the first message a client sends, reliably,
// once its ENet connection is up. It names the client's schema, and carries its connect token if
// it has one (SetToken); the server starts the session only if the schema is the server's and the
// token is one it accepts.
func (c *Client) AppendHello(dst []byte) []byte {
	out, _ := protocol.AppendHello(dst, &protocol.Hello{SchemaHash: c.SchemaHash(), Token: c.token}) // SetToken bounded it
	return out
}

// PingDue reports whether a PING is due at nowUnixMs (every PingIntervalMs).
func (c *Client) PingDue(nowUnixMs int64) bool {
	return !c.pinged || nowUnixMs-c.lastPingMs >= PingIntervalMs
}

// AppendPing appends a PING stamped nowUnixMs to dst.
func (c *Client) AppendPing(dst []byte, nowUnixMs int64) []byte {
	c.pinged, c.lastPingMs = true, nowUnixMs
	return protocol.AppendPing(dst, &protocol.Ping{ClientTimeMs: uint32(nowUnixMs), LastAppliedTick: c.applied})
}

// AppendCommand appends a COMMAND carrying payload (at most protocol.MaxCommandPayload bytes),
// numbered after the previous one and stamped with the last applied tick.
func (c *Client) AppendCommand(dst []byte, payload []byte) ([]byte, error) {
	out, err := protocol.AppendCommand(dst, &protocol.Command{Seq: c.cmdSeq, Tick: c.applied, Payload: payload})
	if err != nil {
		return dst, err
	}
	c.cmdSeq++
	return out, nil
}
