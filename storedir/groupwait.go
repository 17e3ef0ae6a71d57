package storedir

import (
	"sync/atomic"
	"time"
)

// Adaptive group commit (sync=batch, BatchMaxDelay 0).
//
// Without a delay the committer syncs a group as soon as it has taken the
// requests waiting. With a few closed-loop writers that is one request per
// fsync: while writer A's group is in its fsync, B's request arrives and
// waits; B's group is then B alone, and A's next request arrives during
// B's fsync, and so on. Each fsync carries one request although two
// writers are active.
//
// The committer therefore remembers how many requests were in flight at
// once recently (the peak of Appends between queueing and their answer,
// per group, over the last groupWaitHistory groups). When a group holds
// fewer requests than that, it waits for the missing ones before syncing,
// at most about one recent fsync duration or twice the recent spread of
// the writers' arrivals, whichever is longer (never more than
// maxGroupWait): a request arriving during that wait joins this fsync
// instead of waiting for the rest of it and then for its own, and the
// fsync is shared. The wait ends as soon as the group holds as many
// requests as recently were in flight. A wait that no request joined
// clears the history: when a writer goes away, the others pay for it at
// most once. A lone writer (a peak of one) never waits, nor does a group
// that is already as large as the recent peak, nor any group when
// BatchMaxDelay is set (the fixed delay replaces this) or under
// sync=always|none.
//
// The spread: closed-loop writers answered by the same group send their
// next requests after their own HTTP round trips, which differ by more
// than an fsync often enough. In a runtime trace of the bench's 2
// unbatched writers (1 span per request, HTTP) the second writer's
// request came 63 µs after the first at the median, 167 µs at p90 and
// 308 µs at p99, against a wait of one fsync (~115 µs): 21% of the groups
// (794 of 3,850) held one request, each time the late one waiting for
// that fsync and then for its own, and the two writers fell out of step.
// The committer therefore keeps a decaying maximum of how long after a
// wait began the requests that joined it arrived (spread), and waits up
// to twice that. A request that came after a wait nobody joined counts
// too, with how long after that wait began it was queued (up to
// maxGroupWait): the next wait is long enough for it. In the same kind of
// trace with this wait, 13 of 3,550 groups held one request.

// groupWaitHistory is how many recent groups' peaks of requests in flight
// the committer remembers.
const groupWaitHistory = 8

// maxGroupWait bounds the adaptive wait whatever the fsyncs cost.
const maxGroupWait = 2 * time.Millisecond

// spreadDecay is how fast the spread of arrivals is forgotten: by
// 1/spreadDecay each group (a spread seen once counts for about
// spreadDecay groups).
const spreadDecay = 32

// groupWaiter holds what the adaptive wait is decided from. inFlight and
// peak are updated by Append's goroutines; the rest belongs to the
// committer.
type groupWaiter struct {
	inFlight atomic.Int32 // requests queued for the committer and not yet answered
	peak     atomic.Int32 // the highest inFlight since the committer last looked

	peaks [groupWaitHistory]int32 // peaks of the last groups (ring)
	next  int
	// sync is a moving average of the duration of one group's fsync
	// (0 until the first was measured: no wait before).
	sync time.Duration
	// spread is a decaying maximum of how long after an adaptive wait
	// began the requests that joined it arrived; missedAt is when the
	// last wait that nobody joined began (zero once the next request
	// was seen).
	spread   time.Duration
	missedAt time.Time
	// waits and joined count the adaptive waits and the requests that
	// joined a group during one (tests, the observer's log).
	waits, joined atomic.Int64
}

// enter counts a request handed to the committer; leave when it has its
// answer (or its caller gave up).
func (g *groupWaiter) enter() {
	n := g.inFlight.Add(1)
	for p := g.peak.Load(); n > p; p = g.peak.Load() {
		if g.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (g *groupWaiter) leave() { g.inFlight.Add(-1) }

// want returns how many requests the group that is being formed should
// hold, from the peaks of the last groups (this one's included), and how
// long to wait at most for them. Committer only.
func (g *groupWaiter) want() (n int, wait time.Duration) {
	// The peak since the last group, restarted from what is in flight now.
	g.peaks[g.next] = g.peak.Swap(g.inFlight.Load())
	g.next = (g.next + 1) % len(g.peaks)
	var m int32
	for _, p := range g.peaks {
		m = max(m, p)
	}
	g.spread -= g.spread / spreadDecay
	if g.sync == 0 {
		return int(m), 0 // no fsync measured yet
	}
	return int(m), min(max(g.sync, 2*g.spread), maxGroupWait)
}

// joinedAfter records that a request joined the group d after the
// adaptive wait began. Committer only.
func (g *groupWaiter) joinedAfter(d time.Duration) {
	g.spread = max(g.spread, d)
}

// missed records a wait that began at start and that nobody joined: the
// writers are fewer than they were (the history of peaks is cleared), or
// one came later than the wait (arrived learns how much). Committer only.
func (g *groupWaiter) missed(start time.Time) {
	g.forget()
	g.missedAt = start
}

// arrived is told when the first request of a group was queued: after a
// wait that nobody joined, a request queued within maxGroupWait of that
// wait's start would have joined a wait that long. Committer only.
func (g *groupWaiter) arrived(queued time.Time) {
	if g.missedAt.IsZero() {
		return
	}
	if d := queued.Sub(g.missedAt); d > 0 && d <= maxGroupWait {
		g.joinedAfter(d)
	}
	g.missedAt = time.Time{}
}

// forget clears the history of peaks. Committer only.
func (g *groupWaiter) forget() {
	g.peaks = [groupWaitHistory]int32{}
}

// synced records one group's fsync time (the sum of its fsyncs).
// Committer only.
func (g *groupWaiter) synced(d time.Duration) {
	if g.sync == 0 {
		g.sync = d
		return
	}
	g.sync += (d - g.sync) / 8
}
