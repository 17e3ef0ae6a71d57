package zorka

import (
	"container/list"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ztsd/ztsd/membudget"
	"github.com/ztsd/ztsd/trace"
)

// Options bound and tune Sessions. Zero fields take the defaults below.
type Options struct {
	// IdleTimeout drops a session (and an open streamed trace) that saw no
	// submission for this long. Default 10 minutes.
	IdleTimeout time.Duration
	// MaxSessions bounds the sessions kept; beyond it the least recently
	// used one is dropped (its agent resends its symbols). Default 4096.
	MaxSessions int
	// MaxSymbols bounds string plus method definitions per session.
	// Default 1<<20.
	MaxSymbols int
	// MaxSymbolBytes bounds the text of a session's definitions (plus a
	// fixed overhead per entry). Default 64 MiB.
	MaxSymbolBytes int64
	// MaxOpenTraces bounds the streamed traces with open records kept per
	// session; beyond it the least recently continued one is dropped.
	// Default 256.
	MaxOpenTraces int
	// Now is the clock (for idle timeouts). Default time.Now.
	Now func() time.Time
	// Budget is the daemon's memory budget: each session's symbol table
	// reserves its accounted bytes while the session lives, and agent data
	// that would pass the budget fails with an error wrapping
	// membudget.ErrExhausted (503: the agent retries). Nil is unlimited.
	Budget *membudget.Budget
}

func (o Options) withDefaults() Options {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 10 * time.Minute
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 4096
	}
	if o.MaxSymbols <= 0 {
		o.MaxSymbols = 1 << 20
	}
	if o.MaxSymbolBytes <= 0 {
		o.MaxSymbolBytes = 64 << 20
	}
	if o.MaxOpenTraces <= 0 {
		o.MaxOpenTraces = 256
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// maxSessionIDLen bounds the X-Zorka-Session-ID header value.
const maxSessionIDLen = 256

// Sessions is the per-agent-session state of the Zorka protocol: symbol
// translation and the open records of streamed traces. It is safe for
// concurrent use; bodies of different sessions decode in parallel.
type Sessions struct {
	opt Options

	mu   sync.Mutex // guards byID, lru and each session's elem and lastUsed
	byID map[string]*session
	lru  *list.List // of *session, most recently used first
}

type session struct {
	id       string
	elem     *list.Element
	lastUsed time.Time
	gone     atomic.Bool // dropped from Sessions while a body was being decoded

	mu     sync.Mutex // guards the fields below
	syms   *symbolTable
	traces map[trace.TraceID]*openTrace

	// reserved is what the session holds of Options.Budget: syms.bytes
	// once a submission is done. Dropping the session releases it.
	reserved atomic.Int64
}

// NewSessions returns an empty session set.
func NewSessions(opt Options) *Sessions {
	return &Sessions{opt: opt.withDefaults(), byID: make(map[string]*session), lru: list.New()}
}

// Len returns the number of live sessions.
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// DropIdle drops the sessions idle for longer than Options.IdleTimeout and
// returns how many it dropped. Submissions do this too; a maintenance loop
// may call it to free memory when no agent is sending.
func (s *Sessions) DropIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropIdleLocked(s.opt.Now())
}

func (s *Sessions) dropIdleLocked(now time.Time) int {
	n := 0
	for e := s.lru.Back(); e != nil; {
		sess := e.Value.(*session)
		if now.Sub(sess.lastUsed) <= s.opt.IdleTimeout {
			break
		}
		e = e.Prev()
		s.dropLocked(sess)
		n++
	}
	return n
}

func (s *Sessions) dropLocked(sess *session) {
	sess.gone.Store(true)
	s.lru.Remove(sess.elem)
	delete(s.byID, sess.id)
	s.opt.Budget.Release(sess.reserved.Swap(0))
}

// account brings the session's budget reservation to its symbol table's
// size (sess.mu held); a session dropped meanwhile releases everything.
func (s *Sessions) account(sess *session) {
	if d := sess.syms.bytes - sess.reserved.Load(); d > 0 {
		s.opt.Budget.Reserve(d)
		sess.reserved.Add(d)
	} else if d < 0 {
		sess.reserved.Add(d)
		s.opt.Budget.Release(-d)
	}
	if sess.gone.Load() {
		s.opt.Budget.Release(sess.reserved.Swap(0))
	}
}

// acquire returns the session locked, creating it when create is set.
func (s *Sessions) acquire(id string, create bool) (*session, error) {
	if id == "" || len(id) > maxSessionIDLen {
		return nil, fmt.Errorf("%w: session id of %d bytes (want 1 to %d)", ErrInvalidRequest, len(id), maxSessionIDLen)
	}
	for {
		s.mu.Lock()
		now := s.opt.Now()
		s.dropIdleLocked(now)
		sess := s.byID[id]
		if sess == nil {
			if !create {
				s.mu.Unlock()
				return nil, fmt.Errorf("session %q: %w", id, ErrUnknownSession)
			}
			for len(s.byID) >= s.opt.MaxSessions {
				s.dropLocked(s.lru.Back().Value.(*session))
			}
			sess = &session{id: id, syms: newSymbolTable(), traces: make(map[trace.TraceID]*openTrace)}
			sess.elem = s.lru.PushFront(sess)
			s.byID[id] = sess
		} else {
			s.lru.MoveToFront(sess.elem)
		}
		sess.lastUsed = now
		s.mu.Unlock()

		sess.mu.Lock()
		if !sess.gone.Load() {
			return sess, nil
		}
		// Dropped between the two locks (evicted or expired): start over.
		sess.mu.Unlock()
	}
}

// SubmitAgentData applies an agent-data body (string and method
// definitions) to a session. reset (X-Zorka-Session-Reset: true) creates
// the session if needed and clears its symbols first; without it the
// session must exist (ErrUnknownSession). The body is applied whole or not
// at all; a malformed body is a *DecodeError.
func (s *Sessions) SubmitAgentData(sessionID string, reset bool, body []byte) error {
	_, err := s.submitAgentData(sessionID, reset, body)
	return err
}

func (s *Sessions) submitAgentData(sessionID string, reset bool, body []byte) (agentStats, error) {
	sess, err := s.acquire(sessionID, reset)
	if err != nil {
		return agentStats{}, err
	}
	defer sess.mu.Unlock()
	defs, st, err := decodeAgentData(body, sess.syms, reset, s.opt.MaxSymbols, s.opt.MaxSymbolBytes)
	if err != nil {
		return st, fmt.Errorf("agent data of session %q: %w", sessionID, err)
	}
	// defs.added bounds the table's growth (with reset, its new size):
	// reserve it before applying.
	grow := defs.added
	if reset {
		grow -= sess.reserved.Load()
	}
	if err := s.opt.Budget.TryReserve("agent symbols", grow); err != nil {
		return st, fmt.Errorf("agent data of session %q: %w", sessionID, err)
	}
	if grow > 0 {
		sess.reserved.Add(grow)
	}
	sess.syms.apply(defs, reset)
	s.account(sess)
	return st, nil
}

// SubmitTraceData decodes one trace-data body of a session and returns its
// span pieces (see the package documentation). traceIDHex is the
// X-Zorka-Trace-ID header: 32 or 16 hex digits; when it is empty or all
// zeroes a random trace id is used. reset clears the session's symbols
// first (and creates the session, as for agent data); records left open by
// earlier submissions of the trace are kept either way. Without reset the
// session must exist (ErrUnknownSession). A malformed body is a
// *DecodeError and changes nothing.
func (s *Sessions) SubmitTraceData(sessionID string, reset bool, traceIDHex string, body []byte) ([]*trace.Span, error) {
	spans, _, err := s.submitTraceData(sessionID, reset, traceIDHex, body)
	return spans, err
}

func (s *Sessions) submitTraceData(sessionID string, reset bool, traceIDHex string, body []byte) ([]*trace.Span, traceStats, error) {
	var tid trace.TraceID
	if traceIDHex != "" {
		var err error
		if tid, err = trace.ParseTraceID(traceIDHex); err != nil {
			return nil, traceStats{}, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
		}
	}
	if tid.IsZero() {
		if _, err := rand.Read(tid[:]); err != nil {
			return nil, traceStats{}, fmt.Errorf("generate trace id: %w", err)
		}
		tid[0] |= 1 // never zero
	}
	sess, err := s.acquire(sessionID, reset)
	if err != nil {
		return nil, traceStats{}, err
	}
	defer sess.mu.Unlock()
	if reset {
		sess.syms.clear()
		s.account(sess)
	}
	now := s.opt.Now()
	for id, ot := range sess.traces {
		if now.Sub(ot.lastUsed) > s.opt.IdleTimeout {
			delete(sess.traces, id)
		}
	}
	st := sess.traces[tid]
	spans, next, stats, err := decodeTrace(sess.syms, tid, body, st)
	if err != nil {
		return nil, stats, fmt.Errorf("trace data of session %q, trace %s: %w", sessionID, tid, err)
	}
	if next == nil {
		delete(sess.traces, tid)
		return spans, stats, nil
	}
	next.lastUsed = now
	if st == nil && len(sess.traces) >= s.opt.MaxOpenTraces {
		var oldest trace.TraceID
		var oldestAt time.Time
		first := true
		for id, ot := range sess.traces {
			if first || ot.lastUsed.Before(oldestAt) {
				oldest, oldestAt, first = id, ot.lastUsed, false
			}
		}
		delete(sess.traces, oldest)
	}
	sess.traces[tid] = next
	return spans, stats, nil
}
