package botswarm

import "math/bits"

// Age histogram layout: ages below ageExact ms have a bucket each; above, every octave
// [2^k, 2^(k+1)) is split into ageSubBuckets buckets (at most 1/16 = 6.25% wide), up to
// ageMaxMs; larger ages share the last bucket.
const (
	ageExactBits  = 5
	ageExact      = 1 << ageExactBits // 32 ms
	ageSubBits    = 4
	ageSubBuckets = 1 << ageSubBits
	ageOctaves    = 9 // 32 ms .. 16384 ms
	ageMaxMs      = ageExact<<ageOctaves - 1
	ageBuckets    = ageExact + ageOctaves*ageSubBuckets + 1
)

// AgeHist is a bounded histogram of snapshot ages in milliseconds: exact below 32 ms,
// buckets at most 6.25% wide up to about 16 s, and one overflow bucket. It is small
// (a few hundred bytes) so every bot keeps one per second of its run; counts saturate at
// 65535, far above what one bot receives in a second.
type AgeHist struct {
	counts [ageBuckets]uint16
}

// Add records one age; a negative age (a server clock ahead of the client's) counts as 0.
func (h *AgeHist) Add(ms int32) {
	if c := &h.counts[ageBucket(ms)]; *c < ^uint16(0) {
		*c++
	}
}

// Count is the number of ages recorded.
func (h *AgeHist) Count() uint64 { return count(h.counts[:]) }

// Quantile returns the age at quantile q in [0, 1], in ms: exact below 32 ms, otherwise the
// middle of its bucket; -1 when h is empty.
func (h *AgeHist) Quantile(q float64) float64 { return quantile(h.counts[:], q) }

// ageTotal merges many AgeHists (windows, classes) without saturating.
type ageTotal struct {
	counts [ageBuckets]uint64
}

func (t *ageTotal) merge(h *AgeHist) {
	for i, c := range h.counts {
		t.counts[i] += uint64(c)
	}
}

func (t *ageTotal) add(ms int32) { t.counts[ageBucket(ms)]++ }

func (t *ageTotal) quantile(q float64) float64 { return quantile(t.counts[:], q) }

func count[T uint16 | uint64](counts []T) uint64 {
	var n uint64
	for _, c := range counts {
		n += uint64(c)
	}
	return n
}

func quantile[T uint16 | uint64](counts []T, q float64) float64 {
	n := count(counts)
	if n == 0 {
		return -1
	}
	q = min(max(q, 0), 1)
	rank := uint64(q*float64(n-1)) + 1 // 1-based rank of the sample at q
	var seen uint64
	for i, c := range counts {
		seen += uint64(c)
		if seen >= rank {
			low, width := bucketLow(i)
			return float64(low) + float64(width-1)/2
		}
	}
	low, _ := bucketLow(ageBuckets - 1)
	return float64(low)
}

func ageBucket(ms int32) int {
	switch {
	case ms < 0:
		return 0
	case ms < ageExact:
		return int(ms)
	case ms > ageMaxMs:
		return ageBuckets - 1
	}
	octave := bits.Len32(uint32(ms)) - 1 // >= ageExactBits
	sub := (int(ms) >> (octave - ageSubBits)) & (ageSubBuckets - 1)
	return ageExact + (octave-ageExactBits)*ageSubBuckets + sub
}

// bucketLow returns the smallest age in bucket i, and its width in ms.
func bucketLow(i int) (low, width int) {
	if i < ageExact {
		return i, 1
	}
	if i == ageBuckets-1 {
		return ageMaxMs + 1, 1
	}
	j := i - ageExact
	octave := j/ageSubBuckets + ageExactBits
	width = 1 << (octave - ageSubBits)
	return 1<<octave + (j%ageSubBuckets)*width, width
}
