package main

import (
	"runtime/debug"
	"testing"
)

// gcPercent reads the collector's current target.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestDaemonGCPercent(t *testing.T) {
	defer debug.SetGCPercent(gcPercent())

	debug.SetGCPercent(100)
	daemonGC(func(string) string { return "" })
	if got := gcPercent(); got != daemonGCPercent {
		t.Fatalf("GOGC unset: collector target %d, want %d", got, daemonGCPercent)
	}

	// A GOGC from the environment has been applied by the runtime: the
	// daemon leaves it as it is.
	debug.SetGCPercent(50)
	daemonGC(func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	})
	if got := gcPercent(); got != 50 {
		t.Fatalf("GOGC=50 set: collector target %d, want 50 kept", got)
	}
}
