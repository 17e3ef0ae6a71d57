package bench

import (
	"testing"
	"time"
)

func TestLatencyQuantiles(t *testing.T) {
	var empty Latencies
	if empty.Quantile(0.99) != 0 || empty.Mean() != 0 || empty.Summary().Count != 0 {
		t.Fatal("empty Latencies must report zeros")
	}
	var l Latencies
	for i := 1000; i >= 1; i-- { // added out of order
		l.Add(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{
		{0.001, 1 * time.Microsecond},
		{0.5, 500 * time.Microsecond},
		{0.99, 990 * time.Microsecond},
		{0.999, 999 * time.Microsecond},
		{1, 1000 * time.Microsecond},
		{0, 1 * time.Microsecond},
	} {
		if got := l.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	var other Latencies
	other.Add(5 * time.Second)
	l.Merge(&other)
	s := l.Summary()
	if s.Count != 1001 || s.MaxMs != 5000 || s.P50Ms != 0.501 {
		t.Fatalf("after Merge: %+v", s)
	}
	if got, want := l.Mean(), (500500*time.Microsecond+5*time.Second)/1001; got != want {
		t.Fatalf("Mean = %v, want %v", got, want)
	}
}
