package main

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/internal/workload"
)

// crashIterations is how many kill -9 cycles the crash loops run: 20 in
// the normal test run, ZTSD_CRASH_ITERATIONS (make soak sets 500) when set.
func crashIterations(t *testing.T) int {
	n := 20
	if testing.Short() {
		n = 5
	}
	if s := os.Getenv("ZTSD_CRASH_ITERATIONS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			t.Fatalf("ZTSD_CRASH_ITERATIONS=%q: want a positive integer", s)
		}
		n = v
	}
	return n
}

// writeUntilKilled runs writers that put batches of their own spans until a
// request fails, kills the daemon with SIGKILL after a random delay, and
// waits for the writers.
func writeUntilKilled(t *testing.T, d *daemontest.Daemon, l *spanLedger, rng *rand.Rand, iter, writers int) {
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			c := client.New(d.Socket)
			defer c.Close()
			spans := workload.Spans(seed, 4000)
			for i := 0; i < len(spans); i += 20 {
				if err := l.put(c, spans[i:i+20]); err != nil {
					return // killed
				}
			}
		}(uint64(iter)*64 + uint64(w) + 1_000_000)
	}
	time.Sleep(time.Duration(20+rng.IntN(300)) * time.Millisecond)
	if err := d.Signal(syscall.SIGKILL); err == nil {
		t.Fatal("the daemon survived SIGKILL")
	}
	wg.Wait()
}

// TestCrashLoop starts the daemon, writes with several clients, kills it
// with SIGKILL at a random moment, restarts it and checks that every
// acknowledged span is readable and every readable span was sent — 20
// times (ZTSD_CRASH_ITERATIONS, 500 in make soak). At the end the daemon
// stops cleanly and `ztsctl verify` finds nothing wrong.
func TestCrashLoop(t *testing.T) {
	iters := crashIterations(t)
	d := daemontest.New(t, "sync = \"batch\"\n[store]\nmax_store_size = \"4MiB\"\nchunk_target_size = \"16KiB\"")
	l := newSpanLedger()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for it := 0; it < iters; it++ {
		d.Start()
		if it > 0 {
			sample := 20
			if it%5 == 0 {
				sample = 200
			}
			stored := l.check(t, d, sample, true)
			t.Logf("iteration %d: %d acknowledged, %d sent, %d stored", it, len(l.acked), len(l.sent), stored)
		}
		writeUntilKilled(t, d, l, rng, it, 4)
	}
	d.Start()
	l.check(t, d, 500, true)
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	out, errOut, code := d.Ctl(nil, "verify", "--data-dir", d.DataDir)
	if code != 0 {
		t.Fatalf("verify after the crash loop: exit %d\n%s%s", code, out, errOut)
	}
	if len(l.acked) == 0 {
		t.Fatal("nothing was acknowledged")
	}
}

// TestCrashLoopRotationRetention kills the daemon while it rotates small
// stores, seals them and deletes the oldest (retention): it restarts every
// time, leaves no deletion leftovers, stores only spans that were sent,
// and verifies clean after a final clean stop. (Retention deletes
// acknowledged spans by design, so they are not all required.)
func TestCrashLoopRotationRetention(t *testing.T) {
	iters := crashIterations(t)
	d := daemontest.New(t, "sync = \"batch\"\n[store]\nmax_store_size = \"64KiB\"\nchunk_target_size = \"8KiB\"\n[retention]\nmax_stores = 4")
	l := newSpanLedger()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 8))
	for it := 0; it < iters; it++ {
		d.Start()
		if it > 0 {
			l.check(t, d, 0, false)
			entries, _ := os.ReadDir(d.DataDir)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".deleting-") {
					t.Fatalf("iteration %d: %s left after start-up", it, e.Name())
				}
			}
		}
		writeUntilKilled(t, d, l, rng, it, 3)
	}
	d.Start()
	stored := l.check(t, d, 0, false)
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	out, errOut, code := d.Ctl(nil, "verify", "--data-dir", d.DataDir)
	if code != 0 {
		t.Fatalf("verify after the crash loop: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("%d stored after %d crashes; verify:\n%s", stored, iters, out)
}
