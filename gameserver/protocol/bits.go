package protocol

import (
	"encoding/binary"
	"errors"
)

// ErrTruncated is returned when a message ends before all of its fields were read.
var ErrTruncated = errors.New("protocol: message truncated")

// BitWriter packs bit fields, least significant bit first, into a caller-provided buffer. Its
// capacity is fixed: a write that does not fit sets the overflow flag and is dropped, and so is
// every later write until the writer is rewound to a mark taken before the overflow. The zero
// value has no capacity; Reset gives it one.
type BitWriter struct {
	buf      []byte
	acc      uint64 // pending bits not yet stored in buf
	nacc     uint   // number of pending bits, < 64 between calls
	n        int    // bytes stored in buf, a multiple of 8
	bits     int    // bits written in all
	limit    int    // bits allowed in all
	overflow bool
}

// BitMark is a position in a BitWriter to rewind to.
type BitMark struct {
	acc  uint64
	nacc uint
	n    int
	bits int
}

// Reset makes w write into buf from its start, with a capacity of len(buf) bytes.
func (w *BitWriter) Reset(buf []byte) {
	*w = BitWriter{buf: buf, limit: len(buf) * 8}
}

// SetLimit sets the capacity in bits, at most 8*len(buf). Writers reserve room for a trailer
// by lowering the limit and raising it again before writing the trailer.
func (w *BitWriter) SetLimit(bits int) {
	w.limit = min(bits, len(w.buf)*8)
}

// Limit is the capacity in bits.
func (w *BitWriter) Limit() int { return w.limit }

// Overflow reports whether a write did not fit since the last Reset or Rewind.
func (w *BitWriter) Overflow() bool { return w.overflow }

// BitLen is the number of bits written.
func (w *BitWriter) BitLen() int { return w.bits }

// Mark returns the current position.
func (w *BitWriter) Mark() BitMark { return BitMark{w.acc, w.nacc, w.n, w.bits} }

// Rewind drops everything written after m and clears the overflow flag; m must come from Mark
// on this writer since its last Reset, taken while it had not overflowed.
func (w *BitWriter) Rewind(m BitMark) {
	w.acc, w.nacc, w.n, w.bits = m.acc, m.nacc, m.n, m.bits
	w.overflow = false
}

// WriteBits writes the low n bits of v, n <= 64.
func (w *BitWriter) WriteBits(v uint64, n uint) {
	if w.overflow || w.bits+int(n) > w.limit {
		w.overflow = true
		return
	}
	w.put(v&(1<<n-1), n) // for n == 64 the shift gives 0 and the mask all ones
}

// writeWords writes the low n bits held in words, least significant first, with one capacity
// check. It reports false, writing nothing, if they do not fit.
func (w *BitWriter) writeWords(words []uint64, n uint) bool {
	if w.overflow || w.bits+int(n) > w.limit {
		return false
	}
	for _, v := range words {
		if n <= 64 {
			w.put(v&(1<<n-1), n)
			return true
		}
		w.put(v, 64)
		n -= 64
	}
	return true
}

// put writes v, which has no bits above the low n, n <= 64; the caller has checked the limit.
// Shift counts are masked to 63, which the compiler turns into single shift instructions.
func (w *BitWriter) put(v uint64, n uint) {
	w.acc |= v << (w.nacc & 63)
	w.bits += int(n)
	if w.nacc+n < 64 {
		w.nacc += n
		return
	}
	// The 8 bytes are inside buf: they are below bits, which is within limit <= 8*len(buf).
	binary.LittleEndian.PutUint64(w.buf[w.n:w.n+8], w.acc)
	w.n += 8
	w.acc = v >> 1 >> ((63 - w.nacc) & 63) // v >> (64 - nacc), which is 0 when nacc is 0
	w.nacc += n - 64
}

// Bytes stores the pending bits, padding the last byte with zeros, and returns the written
// bytes. It may be called more than once; further writes continue after the written bits only
// if BitLen was a multiple of 8.
func (w *BitWriter) Bytes() []byte {
	n, acc := w.n, w.acc
	for nacc := int(w.nacc); nacc > 0; nacc -= 8 {
		w.buf[n] = byte(acc)
		acc >>= 8
		n++
	}
	return w.buf[:n]
}

// BitReader reads bit fields written by BitWriter. Reading past the end latches ErrTruncated and
// returns zeros; it never panics.
type BitReader struct {
	buf   []byte
	pos   int // bit position
	nbits int
	err   error
}

// Reset makes r read buf from its start and clears the error.
func (r *BitReader) Reset(buf []byte) {
	*r = BitReader{buf: buf, nbits: len(buf) * 8}
}

// Err returns the latched error, if any.
func (r *BitReader) Err() error { return r.err }

// Fail latches err unless an error is latched already.
func (r *BitReader) Fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// BitPos is the number of bits read.
func (r *BitReader) BitPos() int { return r.pos }

// Remaining is the number of unread bits.
func (r *BitReader) Remaining() int { return r.nbits - r.pos }

// ReadBits reads n bits, n <= 32.
func (r *BitReader) ReadBits(n uint) uint64 {
	if r.err != nil {
		return 0
	}
	if r.pos+int(n) > r.nbits {
		r.err = ErrTruncated
		return 0
	}
	i, shift := r.pos>>3, uint(r.pos&7)
	var word uint64
	if i+8 <= len(r.buf) {
		word = binary.LittleEndian.Uint64(r.buf[i:])
	} else {
		for k := len(r.buf) - 1; k >= i; k-- {
			word = word<<8 | uint64(r.buf[k])
		}
	}
	r.pos += int(n)
	return (word >> shift) & (1<<n - 1)
}

// Skip skips n bits; past the end it latches ErrTruncated.
func (r *BitReader) Skip(n int) {
	if r.err != nil {
		return
	}
	if n < 0 || r.pos+n > r.nbits {
		r.err = ErrTruncated
		return
	}
	r.pos += n
}

// ReadBool reads one bit.
func (r *BitReader) ReadBool() bool { return r.ReadBits(1) == 1 }

// Zigzag maps a signed value to an unsigned one with small magnitudes first (0, -1, 1, -2, ...).
func Zigzag(v int32) uint32 { return uint32(v<<1) ^ uint32(v>>31) }

// Unzigzag inverts Zigzag.
func Unzigzag(u uint32) int32 { return int32(u>>1) ^ -int32(u&1) }
