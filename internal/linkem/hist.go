package linkem

import (
	"math/bits"
	"time"
)

// Histogram layout: microsecond values, exact below 16 µs, then 16 linear sub-buckets per power
// of two (at most 1/16 = 6.25% wide), up to 2^31 µs (about 36 minutes); larger values land in the
// last bucket. Fixed size, so memory per histogram is bounded.
const (
	histSubBits = 4
	histSub     = 1 << histSubBits
	histMaxExp  = 30
	histBuckets = (histMaxExp - histSubBits + 2) * histSub
)

// histogram is a bounded log-linear histogram of durations. Not safe for concurrent use.
type histogram struct {
	counts [histBuckets]uint64
	total  uint64
	max    time.Duration
}

func histIndex(us uint64) int {
	if us < histSub {
		return int(us)
	}
	shift := bits.Len64(us) - 1 - histSubBits
	if shift > histMaxExp-histSubBits {
		return histBuckets - 1
	}
	return (shift+1)*histSub + int(us>>uint(shift)) - histSub
}

// histMid is the middle of bucket i, in microseconds; the exact buckets below 16 µs report their
// value, so an empty queue reads as 0.
func histMid(i int) float64 {
	if i < histSub {
		return float64(i)
	}
	shift := i/histSub - 1
	low := uint64(i%histSub+histSub) << uint(shift)
	return float64(low) + float64(uint64(1)<<uint(shift))/2
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[histIndex(uint64(d/time.Microsecond))]++
	h.total++
	if d > h.max {
		h.max = d
	}
}

// quantile returns the q-quantile (0..1) as the middle of its bucket, capped at the maximum seen;
// 0 when empty. The overflow bucket reports the maximum.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(q*float64(h.total-1)) + 1
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			if i == histBuckets-1 {
				return h.max
			}
			d := time.Duration(histMid(i) * float64(time.Microsecond))
			return min(d, h.max)
		}
	}
	return h.max
}
