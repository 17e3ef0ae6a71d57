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
// at most about one recent fsync duration (never more than maxGroupWait):
// a request arriving during that wait joins this fsync instead of waiting
// for the rest of it and then for its own, so it is answered no later,
// and the fsync is shared. The wait ends as soon as the group holds as
// many requests as recently were in flight. A wait that no request joined
// clears the history: when a writer goes away, the others pay for it at
// most once. A lone writer (a peak of one) never waits, nor does a group
// that is already as large as the recent peak, nor any group when
// BatchMaxDelay is set (the fixed delay replaces this) or under
// sync=always|none.

// groupWaitHistory is how many recent groups' peaks of requests in flight
// the committer remembers.
const groupWaitHistory = 8

// maxGroupWait bounds the adaptive wait whatever the fsyncs cost.
const maxGroupWait = 2 * time.Millisecond

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
	return int(m), min(g.sync, maxGroupWait)
}

// forget clears the history of peaks (a wait that nobody joined: the
// writers are fewer than they were). Committer only.
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
