package server

import (
	"log/slog"
	"sync"
	"time"
)

// unavailableLogEvery is how often the daemon logs the 503 answers of one
// code (disk_full, shutting_down, timeout): a full disk answers every
// write 503, and logging each one would fill the journal (and the disk).
const unavailableLogEvery = 10 * time.Second

// rateLog logs at most one line per key per interval, at WARN, and counts
// the lines it suppressed in between (reported with the next line).
type rateLog struct {
	every time.Duration
	now   func() time.Time
	mu    sync.Mutex
	keys  map[string]*rateKey
}

type rateKey struct {
	last       time.Time
	suppressed int
}

func newRateLog(every time.Duration) *rateLog {
	return &rateLog{every: every, now: time.Now, keys: map[string]*rateKey{}}
}

// log writes msg with args unless a line of key was written less than the
// interval ago; the written line carries how many were suppressed since.
func (r *rateLog) log(log *slog.Logger, key, msg string, args ...any) {
	now := r.now()
	r.mu.Lock()
	k := r.keys[key]
	if k == nil {
		k = &rateKey{}
		r.keys[key] = k
	}
	if !k.last.IsZero() && now.Sub(k.last) < r.every {
		k.suppressed++
		r.mu.Unlock()
		return
	}
	n := k.suppressed
	k.last, k.suppressed = now, 0
	r.mu.Unlock()
	log.Warn(msg, append(args, "suppressed_since_last", n, "log_every", r.every.String())...)
}
