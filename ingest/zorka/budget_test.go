package zorka

import (
	"errors"
	"testing"
	"time"

	"github.com/ztsd/ztsd/membudget"
)

// TestSessionsReserveSymbolMemory: each session's symbol table reserves
// its bytes in the daemon's memory budget; agent data past the budget is
// refused (ErrExhausted, so the agent is told to retry) and changes
// nothing; dropping sessions (idle, evicted, reset) releases their bytes.
// Before, 24 sessions holding symbols took 1.8 GB with no shared bound.
func TestSessionsReserveSymbolMemory(t *testing.T) {
	agd := readSample(t, "traces1-0-agd.cbor")
	probe := NewSessions(Options{})
	if err := probe.SubmitAgentData("probe", true, agd); err != nil {
		t.Fatal(err)
	}
	perSession := probe.byID["probe"].syms.bytes
	if perSession <= 0 {
		t.Fatalf("sample defines %d bytes of symbols", perSession)
	}

	budget := membudget.New(3*perSession + perSession/2)
	s := NewSessions(Options{Budget: budget, MaxSessions: 3})
	for _, id := range []string{"a", "b", "c"} {
		if err := s.SubmitAgentData(id, true, agd); err != nil {
			t.Fatalf("session %s: %v", id, err)
		}
	}
	if used, _, _ := budget.Stats(); used != 3*perSession {
		t.Fatalf("3 sessions reserve %d bytes, want %d", used, 3*perSession)
	}
	// Resending the same symbols (reset) does not grow the reservation.
	if err := s.SubmitAgentData("a", true, agd); err != nil {
		t.Fatal(err)
	}
	if used, _, _ := budget.Stats(); used != 3*perSession {
		t.Fatalf("after a reset resend: %d bytes reserved, want %d", used, 3*perSession)
	}
	// A fourth session evicts the least recently used one (MaxSessions 3),
	// releasing its bytes first.
	if err := s.SubmitAgentData("d", true, agd); err != nil {
		t.Fatalf("fourth session: %v", err)
	}
	if used, _, _ := budget.Stats(); used != 3*perSession {
		t.Fatalf("after eviction: %d bytes reserved, want %d", used, 3*perSession)
	}
	// With the budget lowered, new symbols are refused and nothing changes.
	budget.SetLimit(3 * perSession)
	s2 := NewSessions(Options{Budget: budget})
	err := s2.SubmitAgentData("e", true, agd)
	if !errors.Is(err, membudget.ErrExhausted) {
		t.Fatalf("past the budget: %v", err)
	}
	if n := s2.byID["e"].syms.count(); n != 0 {
		t.Fatalf("refused agent data left %d symbols", n)
	}
	// Dropping every session returns all of it.
	s.opt.Now = func() time.Time { return time.Now().Add(time.Hour) }
	s.DropIdle()
	s2.opt.Now = s.opt.Now
	s2.DropIdle()
	if used, _, _ := budget.Stats(); used != 0 {
		t.Fatalf("after dropping every session: %d bytes still reserved", used)
	}
}
