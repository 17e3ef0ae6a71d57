package bench

import (
	"math"
	"slices"
	"time"
)

// Latencies collects request durations; the zero value is ready to use.
// It is not safe for concurrent use (give each client its own and Merge).
type Latencies struct {
	d      []time.Duration
	sorted bool
}

// Add records one duration.
func (l *Latencies) Add(d time.Duration) {
	l.d = append(l.d, d)
	l.sorted = false
}

// Merge adds every duration of o.
func (l *Latencies) Merge(o *Latencies) {
	l.d = append(l.d, o.d...)
	l.sorted = false
}

// Len is the number of durations recorded.
func (l *Latencies) Len() int { return len(l.d) }

// Quantile returns the nearest-rank q-quantile (0 < q ≤ 1): the smallest
// recorded duration that at least q of all durations do not exceed. It is
// 0 when nothing was recorded.
func (l *Latencies) Quantile(q float64) time.Duration {
	if len(l.d) == 0 {
		return 0
	}
	if !l.sorted {
		slices.Sort(l.d)
		l.sorted = true
	}
	rank := int(math.Ceil(q * float64(len(l.d))))
	rank = min(max(rank, 1), len(l.d))
	return l.d[rank-1]
}

// Mean is the arithmetic mean, 0 when nothing was recorded.
func (l *Latencies) Mean() time.Duration {
	if len(l.d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range l.d {
		sum += d
	}
	return sum / time.Duration(len(l.d))
}

// LatencySummary is a latency distribution in milliseconds.
type LatencySummary struct {
	Count  int     `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// Summary returns the distribution's count, mean, p50, p99, p99.9 and max.
func (l *Latencies) Summary() LatencySummary {
	return LatencySummary{Count: len(l.d), MeanMs: ms(l.Mean()), P50Ms: ms(l.Quantile(0.5)),
		P99Ms: ms(l.Quantile(0.99)), P999Ms: ms(l.Quantile(0.999)), MaxMs: ms(l.Quantile(1))}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
