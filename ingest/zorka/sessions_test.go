package zorka

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is an injectable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestSessionIdleTimeout(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s := NewSessions(Options{IdleTimeout: time.Minute, Now: clk.Now})
	agd := hx(t, testAgd190)
	trc := hx(t, recStart+prolog1+begin1+epilog1)
	if err := s.SubmitAgentData("a", true, agd); err != nil {
		t.Fatal(err)
	}
	if err := s.SubmitAgentData("b", true, agd); err != nil {
		t.Fatal(err)
	}
	// a stays busy, b goes idle.
	for i := 0; i < 3; i++ {
		clk.advance(40 * time.Second)
		if _, err := s.SubmitTraceData("a", false, testTraceID, trc); err != nil {
			t.Fatalf("a after %d: %v", i, err)
		}
	}
	if s.Len() != 1 {
		t.Errorf("%d sessions after b idled, want 1", s.Len())
	}
	if _, err := s.SubmitTraceData("b", false, testTraceID, trc); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("idle session b: %v", err)
	}
	// The agent recovers by resending its symbols with a reset.
	if err := s.SubmitAgentData("b", true, agd); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SubmitTraceData("b", false, testTraceID, trc); err != nil {
		t.Fatal(err)
	}
	// Exactly at the timeout a session is still alive; past it, it is not.
	clk.advance(time.Minute)
	if _, err := s.SubmitTraceData("b", false, testTraceID, trc); err != nil {
		t.Errorf("at the timeout: %v", err)
	}
	clk.advance(time.Minute + time.Nanosecond)
	if n := s.DropIdle(); n != 2 || s.Len() != 0 {
		t.Errorf("DropIdle dropped %d, %d left", n, s.Len())
	}
}

func TestOpenTraceIdleTimeout(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s := NewSessions(Options{IdleTimeout: time.Minute, Now: clk.Now})
	if err := s.SubmitAgentData("a", true, hx(t, testAgd190)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SubmitTraceData("a", false, testTraceID, hx(t, recStart+prolog1+begin1)); err != nil {
		t.Fatal(err)
	}
	// The session stays alive through other traces, but the open trace is
	// not continued for longer than the timeout and is dropped.
	for i := 0; i < 3; i++ {
		clk.advance(30 * time.Second)
		if _, err := s.SubmitTraceData("a", false, "ff", hx(t, recStart+prolog1+begin1+epilog1)); err == nil {
			t.Fatal("bad trace id accepted")
		}
		if _, err := s.SubmitTraceData("a", false, "00000000000000ff", hx(t, recStart+prolog1+begin1+epilog1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SubmitTraceData("a", false, testTraceID, hx(t, epilog1)); err == nil {
		t.Fatal("an expired open trace was continued")
	}
}

func TestMaxSessionsEvictsLeastRecentlyUsed(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s := NewSessions(Options{MaxSessions: 3, Now: clk.Now})
	agd := hx(t, testAgd190)
	trc := hx(t, recStart+prolog1+begin1+epilog1)
	for _, id := range []string{"a", "b", "c"} {
		clk.advance(time.Second)
		if err := s.SubmitAgentData(id, true, agd); err != nil {
			t.Fatal(err)
		}
	}
	clk.advance(time.Second)
	if _, err := s.SubmitTraceData("a", false, testTraceID, trc); err != nil { // a is now the most recent
		t.Fatal(err)
	}
	if err := s.SubmitAgentData("d", true, agd); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3 {
		t.Fatalf("%d sessions", s.Len())
	}
	if _, err := s.SubmitTraceData("b", false, testTraceID, trc); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("b should have been evicted: %v", err)
	}
	for _, id := range []string{"a", "c", "d"} {
		if _, err := s.SubmitTraceData(id, false, testTraceID, trc); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}

func TestSymbolBounds(t *testing.T) {
	s := NewSessions(Options{MaxSymbols: 10, MaxSymbolBytes: 1 << 20})
	if err := s.SubmitAgentData("a", true, hx(t, testAgd190)); err != nil { // 8 symbols
		t.Fatal(err)
	}
	// Redefinitions do not count again.
	if err := s.SubmitAgentData("a", false, hx(t, testAgd190)); err != nil {
		t.Fatal(err)
	}
	var de *DecodeError
	err := s.SubmitAgentData("a", false, hx(t, "c1 83 10 60 00 c1 83 11 60 00 c1 83 12 60 00"))
	if !errors.As(err, &de) || de.Offset != 10 || !strings.Contains(de.Msg, "more than 10 symbols") {
		t.Fatalf("symbol count bound: %v", err)
	}
	// A reset starts the count over.
	if err := s.SubmitAgentData("a", true, hx(t, "c1 83 10 60 00 c1 83 11 60 00 c1 83 12 60 00")); err != nil {
		t.Fatal(err)
	}

	s = NewSessions(Options{MaxSymbolBytes: 200})
	long := strings.Repeat("x", 100)
	body := fmt.Sprintf("c1 83 01 7864 %x 00 c1 83 02 7864 %x 00", long, long)
	err = s.SubmitAgentData("a", true, hx(t, body))
	if !errors.As(err, &de) || de.Offset != 106 || !strings.Contains(de.Msg, "more than 200 bytes") {
		t.Fatalf("symbol bytes bound: %v", err)
	}
}

func TestMaxOpenTraces(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s := NewSessions(Options{MaxOpenTraces: 2, Now: clk.Now})
	if err := s.SubmitAgentData("a", true, hx(t, testAgd190)); err != nil {
		t.Fatal(err)
	}
	open := hx(t, recStart+prolog1+begin1)
	ids := []string{"00000000000000000000000000000001", "00000000000000000000000000000002", "00000000000000000000000000000003"}
	for _, id := range ids {
		clk.advance(time.Second)
		if _, err := s.SubmitTraceData("a", false, id, open); err != nil {
			t.Fatal(err)
		}
	}
	// The oldest open trace was dropped; the other two continue.
	if _, err := s.SubmitTraceData("a", false, ids[0], hx(t, epilog1)); err == nil {
		t.Error("the oldest open trace is still kept")
	}
	for _, id := range ids[1:] {
		spans, err := s.SubmitTraceData("a", false, id, hx(t, epilog1))
		if err != nil || spans[0].ChunkNum != 1 {
			t.Errorf("trace %s: %v", id, err)
		}
	}
}

// Sessions decode in parallel; run with -race.
func TestSessionsConcurrent(t *testing.T) {
	s := NewSessions(Options{MaxSessions: 8})
	agd := hx(t, testAgd190)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			id := fmt.Sprintf("session-%d", w) // more sessions than the bound: evictions race with use
			for i := 0; i < 200; i++ {
				if err := s.SubmitAgentData(id, true, agd); err != nil {
					errs <- err
					return
				}
				tid := fmt.Sprintf("%032x", w*1000+i%3+1)
				_, err := s.SubmitTraceData(id, false, tid, hx(t, recStart+prolog1+begin1))
				if err == nil {
					_, err = s.SubmitTraceData(id, false, tid, hx(t, epilog1))
				}
				if err != nil && !errors.Is(err, ErrUnknownSession) {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s.Len() > 8 {
		t.Errorf("%d sessions, bound is 8", s.Len())
	}
}
