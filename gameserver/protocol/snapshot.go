package protocol

import (
	"encoding/binary"
	"math/bits"
)

// SnapshotHeader is the fixed part of a SNAPSHOT packet.
type SnapshotHeader struct {
	Tick         uint32 // server tick the records describe
	ServerTimeMs uint32 // server wall clock when the packet was built, unix ms, low 32 bits
	Seq          uint16 // per-session packet sequence, acknowledged by ACK
	Flags        uint8
	// InputSeq is the sequence of the newest of the client's COMMANDs the game has applied by
	// Tick, when Flags has FlagInputAck: the client's predicted inputs after it are not yet in
	// the state the packet describes.
	InputSeq uint16
}

// SNAPSHOT flags.
const (
	// FlagLast marks the last packet of a tick's frame.
	FlagLast = 1 << 0
	// FlagReset marks the packets of the first frame after a reset: a client that has not yet
	// seen the RESET of Tick performs it before applying the packet.
	FlagReset = 1 << 1
	// FlagInputAck marks a packet that carries InputSeq, 16 bits after the flags.
	FlagInputAck = 1 << 2

	snapshotFlagsKnown = FlagLast | FlagReset | FlagInputAck
)

const (
	// SnapshotHeaderBytes is the size of the SNAPSHOT header.
	SnapshotHeaderBytes = 12
	snapshotFlagsOffset = 11
	// InputAckBytes is what a header with FlagInputAck adds.
	InputAckBytes = 2
	// MinSnapshotBytes is the smallest buffer a SNAPSHOT can be built in: a header without the
	// input acknowledgement, and the end op.
	MinSnapshotBytes = SnapshotHeaderBytes + 1
	// MaxTransformSpawnBits is the size of a spawn of the whole transform with a velocity.
	MaxTransformSpawnBits = 2 + 17 + 8 + 3*PosBits + 32 + 1 + 3*VelBits
	// MaxSpawnBits is the size of the largest spawn any schema allows: the whole transform and
	// MaxFieldBits of fields. A packet with this much room left always takes one more record.
	MaxSpawnBits = MaxTransformSpawnBits + MaxFieldBits
)

// Op is an entity record's operation, the record's first 2 bits.
type Op uint8

// Record operations.
const (
	OpSpawn   Op = 0
	OpDelta   Op = 1
	OpDespawn Op = 2
	opEnd     Op = 3 // ends the record list
)

// Delta change flags, Delta.Changed.
const (
	DeltaPosX     = 1 << 0
	DeltaPosY     = 1 << 1
	DeltaPosZ     = 1 << 2
	DeltaRotFull  = 1 << 3 // Rot holds the new rotation
	DeltaRotSmall = 1 << 4 // RotD holds differences of the three components, same dropped index
	DeltaVelX     = 1 << 5
	DeltaVelY     = 1 << 6
	DeltaVelZ     = 1 << 7
)

// Delta is a decoded delta record's payload: the fields that differ from the baseline.
type Delta struct {
	Changed uint8
	Pos     [3]int32 // differences, for the DeltaPos flags set
	Rot     uint32   // with DeltaRotFull
	RotD    [3]int16 // with DeltaRotSmall
	Vel     [3]int16 // differences, for the DeltaVel flags set
}

// Apply returns base with d applied. It reports false when a field leaves its range, which a
// delta built by the server against the same baseline never does.
func (d *Delta) Apply(base *State) (State, bool) {
	s := *base
	for i := range 3 {
		if d.Changed&(DeltaPosX<<i) != 0 {
			v := s.Pos[i] + d.Pos[i]
			if v < PosMin || v > PosMax {
				return s, false
			}
			s.Pos[i] = v
		}
		if d.Changed&(DeltaVelX<<i) != 0 {
			v := int32(s.Vel[i]) + int32(d.Vel[i])
			if v < VelMin || v > VelMax {
				return s, false
			}
			s.Vel[i] = int16(v)
		}
	}
	switch {
	case d.Changed&DeltaRotFull != 0:
		s.Rot = d.Rot
	case d.Changed&DeltaRotSmall != 0:
		rot := s.Rot &^ (1<<(3*RotComponentBits) - 1)
		for i := range 3 {
			shift := uint(2-i) * RotComponentBits
			c := int32(s.Rot>>shift&rotComponentMax) + int32(d.RotD[i])
			if c < 0 || c > rotComponentMax {
				return s, false
			}
			rot |= uint32(c) << shift
		}
		s.Rot = rot
	}
	return s, true
}

// Record is a decoded entity record.
type Record struct {
	Op           Op
	ID           uint16
	Kind         uint8  // spawn
	State        State  // spawn: the full state (the parts the kind lacks are zero)
	BaselineTick uint32 // delta: the tick of the state Delta applies to
	Delta        Delta  // delta
	// Fields are a spawn's field words (the kind's, in a Snapshot's buffer). A delta's fields
	// section is decoded against the entity's kind, which the record does not name: FieldsAt is
	// the bit offset in the packet of its change mask and values, FieldsBits their length (0: no
	// field changed). Layout.ApplyFields applies them.
	Fields     []uint32
	FieldsAt   int
	FieldsBits int
}

// Snapshot is a decoded SNAPSHOT packet. DecodeSnapshot reuses Records' backing array and its
// buffer of field words.
type Snapshot struct {
	SnapshotHeader
	Records []Record
	words   []uint32
}

// SnapshotEncoder builds one SNAPSHOT packet in a caller-provided buffer. Each record is written
// whole or not at all: a record method that reports false left the packet as it was, and the
// caller closes the packet with Finish. Reusing an encoder and its buffer allocates nothing.
//
// Records follow the encoder's Layout (SetLayout); without one, every kind has the whole
// transform and no fields.
type SnapshotEncoder struct {
	w       BitWriter
	records int
	layout  *Layout
	rec     RecordBits // the record being written, for the record methods
}

// SetLayout makes the encoder write records of l's schema; nil is the whole transform and no
// fields for every kind.
func (e *SnapshotEncoder) SetLayout(l *Layout) { e.layout = l }

// Begin starts a packet in buf (its length is the packet's capacity) and writes the header. It
// reports false if buf cannot hold the header and the end op (MinSnapshotBytes, and InputAckBytes
// more with FlagInputAck).
func (e *SnapshotEncoder) Begin(buf []byte, h *SnapshotHeader) bool {
	need := MinSnapshotBytes
	if h.Flags&FlagInputAck != 0 {
		need += InputAckBytes
	}
	if len(buf) < need {
		return false
	}
	e.records = 0
	e.w.Reset(buf)
	e.w.WriteBits(typeByte(MsgSnapshot), 8)
	e.w.WriteBits(uint64(h.Tick), 32)
	e.w.WriteBits(uint64(h.ServerTimeMs), 32)
	e.w.WriteBits(uint64(h.Seq), 16)
	e.w.WriteBits(uint64(h.Flags), 8)
	if h.Flags&FlagInputAck != 0 {
		e.w.WriteBits(uint64(h.InputSeq), 16)
	}
	e.w.SetLimit(len(buf)*8 - 2) // keep room for the end op
	return true
}

// Records is the number of records written since Begin.
func (e *SnapshotEncoder) Records() int { return e.records }

// RoomBits is how many more bits of records the packet can take.
func (e *SnapshotEncoder) RoomBits() int { return e.w.Limit() - e.w.BitLen() }

// Finish writes the end op and returns the packet.
func (e *SnapshotEncoder) Finish() []byte {
	e.w.SetLimit(e.w.BitLen() + 2)
	e.w.WriteBits(uint64(opEnd), 2)
	return e.w.Bytes()
}

// SetSnapshotFlags sets flags in the header of an encoded SNAPSHOT packet.
func SetSnapshotFlags(pkt []byte, flags uint8) {
	pkt[snapshotFlagsOffset] |= flags
}

// opID packs a record's op and entity id: '0' + 12 bits below 4096, else '1' + 16 bits.
func opID(op Op, id uint16) (uint64, uint) {
	if id < 1<<12 {
		return uint64(op) | uint64(id)<<3, 15
	}
	return uint64(op) | 1<<2 | uint64(id)<<3, 19
}

// commit ends a record: it rolls the record back if it did not fit.
func (e *SnapshotEncoder) commit(m BitMark) bool {
	if e.w.Overflow() {
		e.w.Rewind(m)
		return false
	}
	e.records++
	return true
}

// RecordBits is one encoded entity record as a packet carries it: N bits in W, least significant
// first. A server that sends one record to many clients encodes it once (SpawnRecord,
// DeltaRecord) and appends it to each packet (SnapshotEncoder.Append). The bits of W beyond N
// are not part of the record: the encoders build a record over the last one without clearing it,
// so that a RecordBits can be reused without zeroing its words.
type RecordBits struct {
	W [RecordWords]uint64
	N uint
}

// Record sizes.
const (
	// MaxTransformDeltaBits is the size of the largest delta of the transform alone: every part
	// changed and coded at its widest.
	MaxTransformDeltaBits = 19 + 11 + (1 + 3*(1+3+19)) + 34 + (1 + 3*(1+2+15))
	// maxFieldsSectionBits is the largest fields section of a delta: the changed bit, the
	// length, the change mask and every field.
	maxFieldsSectionBits = 1 + 12 + MaxFields + MaxFieldBits
	// MaxRecordBits is the size of the largest record any schema allows.
	MaxRecordBits = MaxTransformDeltaBits + maxFieldsSectionBits
	// RecordWords is the words of a RecordBits.
	RecordWords = (MaxRecordBits + 63) / 64
)

// reset empties the record.
func (r *RecordBits) reset() { r.N = 0 }

// add appends the low n bits of v, n <= 64, as BitWriter.WriteBits would.
func (r *RecordBits) add(v uint64, n uint) {
	v &= 1<<n - 1 // for n == 64 the shift gives 0 and the mask all ones
	i, off := r.N>>6, r.N&63
	r.W[i] = r.W[i]&(1<<off-1) | v<<off // the bits from off up are left from an older record
	if off+n > 64 {
		r.W[i+1] = v >> (64 - off)
	}
	r.N += n
}

// Append writes an encoded record whole, or reports false, writing nothing, if it does not fit.
func (e *SnapshotEncoder) Append(r *RecordBits) bool {
	if r.N > MaxRecordBits || !e.w.writeWords(r.W[:], r.N) {
		return false
	}
	e.records++
	return true
}

// AppendLong writes a record of 65 to 128 bits, the low 64 in lo and the rest in hi, whole, or
// reports false, writing nothing, if it does not fit.
func (e *SnapshotEncoder) AppendLong(lo, hi uint64, n uint) bool {
	w := [2]uint64{lo, hi}
	if n <= 64 || n > 128 || !e.w.writeWords(w[:], n) {
		return false
	}
	e.records++
	return true
}

// AppendBits writes records of 1 to 64 bits, the low n[i] bits of v[i] for each i in order,
// until one does not fit or has another length; it returns how many it wrote. It is Append for
// runs of the short records that make up most packets, with the writer's state in registers.
func (e *SnapshotEncoder) AppendBits(v []uint64, n []uint8) int {
	n = n[:min(len(n), len(v))]
	j := e.appendWords(v[:len(n)], n)
	return j + e.appendTail(v[j:len(n)], n[j:])
}

// appendWords is AppendBits for the records that end at least 8 bytes before the end of the
// buffer. It stores the word of pending bits after every record, whole or not, and moves on to
// the next word only once it is full, which takes no branch: the records' lengths follow no
// pattern the CPU could predict a branch on.
func (e *SnapshotEncoder) appendWords(v []uint64, n []uint8) int {
	w := &e.w
	acc, nacc, o := w.acc, w.nacc, w.n
	buf := w.buf
	last := len(buf) - 8 // the last offset a word can be stored at
	if o > last {
		return 0
	}
	// A record is stored at the offset of the word its first bit falls in, so one that ends
	// within the bits up to the end of the word at last starts in a word at or before last.
	room := min(w.limit-w.bits, ((last-o)>>3+1)<<6-int(nacc))
	start := room
	v = v[:len(n)]
	j := 0
	for ; j < len(n); j++ {
		k := uint(n[j])
		if k-1 >= 64 || int(k) > room {
			break
		}
		room -= int(k)
		x := v[j] & (^uint64(0) >> ((64 - k) & 63)) // the low k bits; k is 1 to 64
		lo := acc | x<<(nacc&63)
		binary.LittleEndian.PutUint64(buf[o:o+8], lo)
		hi := x >> 1 >> ((63 - nacc) & 63) // x >> (64 - nacc), 0 when nacc is 0
		nacc += k
		full := nacc >> 6 // 1: lo is a full word, stored for good, and hi starts the next
		o += int(full) << 3
		acc = lo
		if full != 0 {
			acc = hi
		}
		nacc &= 63
	}
	w.acc, w.nacc, w.n = acc, nacc, o
	w.bits += start - room
	e.records += j
	return j
}

// appendTail is AppendBits for the records appendWords left.
func (e *SnapshotEncoder) appendTail(v []uint64, n []uint8) int {
	w := &e.w
	// Few values live in the loop, so they stay in registers: the room left, the pending bits,
	// and the unwritten rest of the buffer.
	room := w.limit - w.bits
	acc, nacc := w.acc, w.nacc
	out := w.buf[w.n:]
	v = v[:len(n)]
	j := 0
	for ; j < len(n); j++ {
		k := uint(n[j])
		if k-1 >= 64 || int(k) > room {
			break
		}
		room -= int(k)
		x := v[j] << ((64 - k) & 63) >> ((64 - k) & 63) // the low k bits; k is 1 to 64
		acc |= x << (nacc & 63)
		if nacc += k; nacc >= 64 {
			// Within buf: the bits are within limit <= 8*len(buf).
			binary.LittleEndian.PutUint64(out, acc)
			out = out[8:]
			nacc -= 64
			acc = x >> 1 >> ((k - nacc - 1) & 63) // x >> (k - nacc), 0 when that is 64
		}
	}
	w.acc, w.nacc = acc, nacc
	w.bits = w.limit - room
	w.n = len(w.buf) - len(out)
	e.records += j
	return j
}

// Spawn writes a spawn record: id now holds a new entity of the given kind, state and fields
// (the kind's field words; nil for a kind without fields).
func (e *SnapshotEncoder) Spawn(id uint16, kind uint8, s *State, fields []uint32) bool {
	e.layout.SpawnRecord(id, kind, s, fields, &e.rec)
	return e.Append(&e.rec)
}

// SpawnRecord encodes a spawn record of the whole transform into r.
func SpawnRecord(id uint16, kind uint8, s *State, r *RecordBits) {
	(*Layout)(nil).SpawnRecord(id, kind, s, nil, r)
}

// SpawnRecord encodes a spawn record into r: the kind's transform parts and fields. A nil layout
// is the whole transform and no fields.
func (l *Layout) SpawnRecord(id uint16, kind uint8, s *State, fields []uint32, r *RecordBits) {
	r.reset()
	parts, kl := Transform, (*KindLayout)(nil)
	if l != nil {
		if kl = l.kinds[kind]; kl != nil {
			parts = kl.Parts
		}
	}
	// Fields are gathered into a few words of at most 64 bits, one add each.
	v, n := opID(OpSpawn, id) // 19 bits at most
	v |= uint64(kind) << n
	n += 8
	if parts&PartPosition != 0 {
		v |= uint64(s.Pos[0]-PosMin)<<n | uint64(s.Pos[1]-PosMin)<<(n+PosBits)
		r.add(v, n+2*PosBits)
		v, n = uint64(s.Pos[2]-PosMin), PosBits
	}
	if parts&PartRotation != 0 {
		v |= uint64(s.Rot) << n
		n += 32
	}
	r.add(v, n)
	if parts&PartVelocity != 0 {
		if s.Vel == [3]int16{} {
			r.add(0, 1)
		} else {
			r.add(1|
				uint64(int32(s.Vel[0])-VelMin)<<1|
				uint64(int32(s.Vel[1])-VelMin)<<(1+VelBits)|
				uint64(int32(s.Vel[2])-VelMin)<<(1+2*VelBits), 1+3*VelBits)
		}
	}
	if kl != nil {
		for i := range kl.Fields {
			r.addField(&kl.Fields[i], fields)
		}
	}
}

// addField appends a field's value, at its width.
func (r *RecordBits) addField(f *FieldLayout, fields []uint32) {
	for w, left := f.Word, uint(f.Width); left > 0; w++ {
		n := min(left, 32)
		r.add(uint64(fields[w]), n)
		left -= n
	}
}

// Despawn writes a despawn record.
func (e *SnapshotEncoder) Despawn(id uint16) bool {
	m := e.w.Mark()
	v, n := opID(OpDespawn, id)
	e.w.WriteBits(v, n)
	return e.commit(m)
}

// Delta writes a delta record of cur against base, the state the client holds at age ticks
// before the packet's tick; 1 <= age <= MaxBaselineAge. baseFields and curFields are the entity's
// field words in the two (nil for a kind without fields). It reports false, writing nothing, if
// the record does not fit or age is out of range.
func (e *SnapshotEncoder) Delta(id uint16, age uint32, kind uint8, base, cur *State, baseFields, curFields []uint32) bool {
	return e.layout.DeltaRecord(id, age, kind, base, cur, baseFields, curFields, &e.rec) && e.Append(&e.rec)
}

// DeltaRecord encodes a delta record of the transform alone, cur against base, age ticks older,
// into r: the record of a schema without fields. It reports false if age is not in
// [1, MaxBaselineAge].
func DeltaRecord(id uint16, age uint32, base, cur *State, r *RecordBits) bool {
	return transformDelta(id, age, base, cur, r)
}

// DeltaRecord encodes a delta record of cur against base, age ticks older, into r: the transform
// and, if the schema has fields, the fields section with the kind's fields that differ between
// baseFields and curFields. A nil layout has no fields. It reports false if age is not in
// [1, MaxBaselineAge].
func (l *Layout) DeltaRecord(id uint16, age uint32, kind uint8, base, cur *State, baseFields, curFields []uint32, r *RecordBits) bool {
	if !transformDelta(id, age, base, cur, r) {
		return false
	}
	if l != nil && l.hasFields {
		r.addFieldsDelta(l.kinds[kind], baseFields, curFields)
	}
	return true
}

// addFieldsDelta appends a delta's fields section: '0' when no field changed, else '1', the
// length of the rest ('0' and 6 bits, or '1' and 11), a change bit per field of the kind, and the
// values of the fields that changed.
func (r *RecordBits) addFieldsDelta(kl *KindLayout, base, cur []uint32) {
	if kl == nil || len(kl.Fields) == 0 {
		r.add(0, 1)
		return
	}
	if !kl.flat {
		r.addFieldsDeltaWords(kl, base, cur)
		return
	}
	// Every field is one word: the change mask and the values are gathered in v (n bits) and
	// added whenever the next value might not fit in 64 bits.
	nf := len(kl.Fields)
	base, cur = base[:nf], cur[:nf]
	var mask uint64
	length := uint64(nf)
	for i := range cur {
		if base[i] != cur[i] {
			mask |= 1 << uint(i)
			length += uint64(kl.widths[i])
		}
	}
	if mask == 0 {
		r.add(0, 1)
		return
	}
	v, n := 0b01|length<<2, uint(8)
	if length >= 1<<6 {
		v, n = 0b11|length<<2, 13
	}
	v, n = v|mask<<n, n+uint(nf) // 45 bits at most
	for m := mask; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		w := uint(kl.widths[i])
		if n+w > 64 {
			r.add(v, n)
			v, n = 0, 0
		}
		v, n = v|uint64(cur[i])<<(n&63), n+w
	}
	r.add(v, n)
}

// addFieldsDeltaWords is addFieldsDelta for a kind with a field of more than one word.
func (r *RecordBits) addFieldsDeltaWords(kl *KindLayout, base, cur []uint32) {
	var mask uint64
	bits := 0
	for i := range kl.Fields {
		f := &kl.Fields[i]
		for w := f.Word; w < f.Word+f.Words(); w++ {
			if base[w] != cur[w] {
				mask |= 1 << uint(i)
				bits += f.Width
				break
			}
		}
	}
	if mask == 0 {
		r.add(0, 1)
		return
	}
	if length := uint64(len(kl.Fields) + bits); length < 1<<6 {
		r.add(0b01|length<<2, 8)
	} else {
		r.add(0b11|length<<2, 13)
	}
	r.add(mask, uint(len(kl.Fields)))
	for i := range kl.Fields {
		if mask&(1<<uint(i)) != 0 {
			r.addField(&kl.Fields[i], cur)
		}
	}
}

// transformDelta encodes the op, the id, the age and the transform's sections of a delta.
func transformDelta(id uint16, age uint32, base, cur *State, r *RecordBits) bool {
	if age == 0 || age > MaxBaselineAge {
		return false
	}
	r.reset()
	// Fields are gathered in v (n bits) and added whenever the next field might not fit in 64
	// bits; local words stay in registers, where per-field adds would not.
	v, n := opID(OpDelta, id)
	if age--; age < 16 {
		v, n = v|uint64(age)<<(n+1), n+5
	} else {
		v, n = v|(1|uint64(age)<<1)<<n, n+11
	}
	if base.Pos == cur.Pos {
		n++ // '0': position unchanged
	} else {
		c, l := posCodes.code(uint64(Zigzag(cur.Pos[0] - base.Pos[0])))
		v, n = v|(1|c<<1)<<n, n+1+l // 54 bits at most
		r.add(v, n)
		c, l = posCodes.code(uint64(Zigzag(cur.Pos[1] - base.Pos[1])))
		c2, l2 := posCodes.code(uint64(Zigzag(cur.Pos[2] - base.Pos[2])))
		v, n = c|c2<<(l&63), l+l2 // 46 bits at most
	}
	if base.Rot == cur.Rot {
		n++
	} else {
		r.add(v, n)
		v, n = rotCode(base.Rot, cur.Rot)
	}
	if base.Vel == cur.Vel {
		n++
	} else {
		r.add(v|1<<(n&63), n+1)
		v, n = 0, 0
		for i := range 3 {
			c, l := velCodes.code(uint64(Zigzag(int32(cur.Vel[i]) - int32(base.Vel[i]))))
			v, n = v|c<<(n&63), n+l // 54 bits at most
		}
	}
	r.add(v, n)
	return true
}

// A prefix code for zigzag-coded differences, indexed by the bit length of the zigzag value so
// that coding takes a table lookup instead of branches the CPU would mispredict. Length 0 is an
// unchanged field: a single '0'.
type codeEntry struct {
	prefix uint64 // the prefix bits, written first
	shift  uint   // where the value starts: the prefix length
	total  uint   // prefix and value bits
}

// codeTable maps a value's bit length to its code; values are below 2^19.
type codeTable [20]codeEntry

func (t *codeTable) code(z uint64) (uint64, uint) {
	e := &t[bits.Len64(z)]
	return e.prefix | z<<(e.shift&63), e.total
}

// newCodeTable builds a table for value widths: after the changed bit '1', width i is announced by i
// '1's then a '0' (the last width by '1's alone).
func newCodeTable(widths ...uint) codeTable {
	var t codeTable
	t[0] = codeEntry{0, 0, 1}
	length := 1
	for i, wd := range widths {
		pre := uint64(1)<<(i+1) - 1 // the changed bit and i width '1's
		plen := uint(i + 2)         // ... and the closing '0'
		if i == len(widths)-1 {
			plen--
		}
		for ; length <= int(wd); length++ {
			t[length] = codeEntry{pre, plen, plen + wd}
		}
	}
	return t
}

// Value widths of the difference codes.
var (
	// posWidths: '0'+4, '10'+8, '110'+12 or '111'+19 bits.
	posWidths = [...]uint{4, 8, 12, 19}
	// velWidths: '0'+4, '10'+8 or '11'+15 bits.
	velWidths = [...]uint{4, 8, 15}
	// rotWidths: '0'+3, '10'+6 or '11'+11 bits.
	rotWidths = [...]uint{3, 6, 11}
)

// The encoders' tables: '0' unchanged, else '1' and the coded difference.
var (
	posCodes = newCodeTable(posWidths[:]...)
	velCodes = newCodeTable(velWidths[:]...)
)

// rotCode codes a changed rotation: '1','1' and three component differences ('0'+3, '10'+6 or
// '11'+11 bits each) when the dropped index is the same and that is smaller; else '1','0' and the
// packed rotation. At most 41 bits.
func rotCode(base, cur uint32) (uint64, uint) {
	const topShift = 3 * RotComponentBits
	if base>>topShift == cur>>topShift {
		v, n := uint64(0b11), uint(2)
		for i := range 3 {
			shift := uint(2-i) * RotComponentBits
			d := int32(cur>>shift&rotComponentMax) - int32(base>>shift&rotComponentMax)
			z := uint64(Zigzag(d))
			switch {
			case z < 1<<3:
				v, n = v|z<<(n+1), n+4
			case z < 1<<6:
				v, n = v|(0b01|z<<2)<<n, n+8
			default:
				v, n = v|(0b11|z<<2)<<n, n+13
			}
		}
		if n < 34 {
			return v, n
		}
	}
	return 0b01 | uint64(cur)<<2, 34
}

// DecodeSnapshot decodes a SNAPSHOT packet of the whole transform and no fields into s, reusing
// s.Records.
func DecodeSnapshot(b []byte, s *Snapshot) error { return (*Layout)(nil).DecodeSnapshot(b, s) }

// DecodeSnapshot decodes a SNAPSHOT packet of l's schema into s, reusing s.Records and its
// buffer of field words. A spawn of a kind the schema lacks, or a field value out of its range,
// is ErrInvalid. A nil layout is the whole transform and no fields.
func (l *Layout) DecodeSnapshot(b []byte, s *Snapshot) error {
	var r BitReader
	if err := beginDecode(&r, b, MsgSnapshot); err != nil {
		return err
	}
	s.Tick = uint32(r.ReadBits(32))
	s.ServerTimeMs = uint32(r.ReadBits(32))
	s.Seq = uint16(r.ReadBits(16))
	s.Flags = uint8(r.ReadBits(8))
	if s.Flags&^snapshotFlagsKnown != 0 {
		return ErrInvalid
	}
	s.InputSeq = 0
	if s.Flags&FlagInputAck != 0 {
		s.InputSeq = uint16(r.ReadBits(16))
	}
	s.Records = s.Records[:0]
	s.words = s.words[:0]
	for r.Err() == nil {
		op := Op(r.ReadBits(2))
		if op == opEnd {
			break
		}
		s.Records = append(s.Records, Record{})
		rec := &s.Records[len(s.Records)-1]
		rec.Op = op
		if r.ReadBool() {
			rec.ID = uint16(r.ReadBits(16))
		} else {
			rec.ID = uint16(r.ReadBits(12))
		}
		switch op {
		case OpSpawn:
			s.words = l.readSpawn(&r, rec, s.words)
		case OpDelta:
			readDelta(&r, rec, s.Tick)
			if l != nil && l.hasFields {
				readFieldsSection(&r, rec)
			}
		}
	}
	if err := endDecode(&r); err != nil {
		return err
	}
	// The spawns' field words are in one buffer, which grew as they were read.
	off := 0
	for i := range s.Records {
		if rec := &s.Records[i]; rec.Op == OpSpawn {
			n := len(rec.Fields)
			rec.Fields = s.words[off : off+n : off+n]
			off += n
		}
	}
	return nil
}

// readSpawn reads a spawn's kind, its transform parts and its fields into rec, the fields at
// the end of words; rec.Fields is left the right length, and set to its place in words by the
// caller.
func (l *Layout) readSpawn(r *BitReader, rec *Record, words []uint32) []uint32 {
	rec.Kind = uint8(r.ReadBits(8))
	parts, kl := Transform, (*KindLayout)(nil)
	if l != nil {
		if kl = l.kinds[rec.Kind]; kl == nil {
			r.Fail(ErrInvalid)
			return words
		}
		parts = kl.Parts
	}
	if parts&PartPosition != 0 {
		for i := range 3 {
			rec.State.Pos[i] = int32(r.ReadBits(PosBits)) + PosMin
		}
	}
	if parts&PartRotation != 0 {
		rec.State.Rot = uint32(r.ReadBits(32))
	}
	if parts&PartVelocity != 0 && r.ReadBool() {
		for i := range 3 {
			rec.State.Vel[i] = int16(int32(r.ReadBits(VelBits)) + VelMin)
		}
	}
	if kl == nil || kl.Words == 0 {
		rec.Fields = nil
		return words
	}
	start := len(words)
	words = append(words, make([]uint32, kl.Words)...)
	for i := range kl.Fields {
		readField(r, &kl.Fields[i], words[start:])
	}
	rec.Fields = words[start:]
	return words
}

// readField reads a field's value into its words of fields, and fails r with ErrInvalid for a
// value out of the field's range.
func readField(r *BitReader, f *FieldLayout, fields []uint32) {
	for w, left := f.Word, uint(f.Width); left > 0; w++ {
		n := min(left, 32)
		fields[w] = uint32(r.ReadBits(n))
		left -= n
	}
	switch v := fields[f.Word]; {
	case f.Type == FieldEnum && int(v) >= len(f.Values), f.Type == FieldFloat && float64(v) > f.steps():
		r.Fail(ErrInvalid)
	}
}

// readFieldsSection reads a delta's fields section, noting where its mask and values are.
func readFieldsSection(r *BitReader, rec *Record) {
	if !r.ReadBool() {
		return
	}
	var n uint64
	if r.ReadBool() {
		n = r.ReadBits(11)
	} else {
		n = r.ReadBits(6)
	}
	rec.FieldsAt, rec.FieldsBits = r.BitPos(), int(n)
	if n == 0 || r.Remaining() < int(n) {
		r.Fail(ErrInvalid)
		return
	}
	r.Skip(int(n))
}

// ApplyFields applies the fields section of delta rec, decoded from packet pkt, for an entity of
// kind whose baseline holds the field words base: out gets base with the changed fields. It
// reports false, leaving out unchanged, if the section does not match the kind (its length, a
// value out of range), which a server of the same schema never sends.
func (l *Layout) ApplyFields(pkt []byte, rec *Record, kind uint8, base, out []uint32) bool {
	copy(out, base)
	if rec.FieldsBits == 0 {
		return true
	}
	kl := l.kinds[kind]
	if kl == nil || len(kl.Fields) == 0 || len(out) < kl.Words || len(base) < kl.Words {
		return false
	}
	var r BitReader
	r.Reset(pkt)
	r.Skip(rec.FieldsAt)
	mask := r.ReadBits(uint(len(kl.Fields)))
	bits := len(kl.Fields)
	tmp := out[:kl.Words]
	for i := range kl.Fields {
		if mask&(1<<uint(i)) != 0 {
			readField(&r, &kl.Fields[i], tmp)
			bits += kl.Fields[i].Width
		}
	}
	if r.Err() != nil || mask == 0 || bits != rec.FieldsBits {
		copy(out, base)
		return false
	}
	return true
}

func readDelta(r *BitReader, rec *Record, tick uint32) {
	var age uint32
	if r.ReadBool() {
		age = uint32(r.ReadBits(10)) + 1
	} else {
		age = uint32(r.ReadBits(4)) + 1
	}
	rec.BaselineTick = tick - age
	d := &rec.Delta
	if r.ReadBool() {
		for i := range 3 {
			if r.ReadBool() {
				d.Changed |= DeltaPosX << i
				d.Pos[i] = readCode(r, posWidths[:])
			}
		}
	}
	if r.ReadBool() {
		if r.ReadBool() {
			d.Changed |= DeltaRotSmall
			for i := range 3 {
				d.RotD[i] = int16(readCode(r, rotWidths[:]))
			}
		} else {
			d.Changed |= DeltaRotFull
			d.Rot = uint32(r.ReadBits(32))
		}
	}
	if r.ReadBool() {
		for i := range 3 {
			if r.ReadBool() {
				d.Changed |= DeltaVelX << i
				d.Vel[i] = int16(readCode(r, velWidths[:]))
			}
		}
	}
}

// readCode reads a zigzag difference coded with widths: up to len(widths)-1 '1's, ended by a
// '0' unless all are '1's, select the width.
func readCode(r *BitReader, widths []uint) int32 {
	i := 0
	for i < len(widths)-1 && r.ReadBool() {
		i++
	}
	return Unzigzag(uint32(r.ReadBits(widths[i])))
}
