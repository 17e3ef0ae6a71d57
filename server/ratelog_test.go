package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestRateLog: a burst of 503s of one code logs one WARN line per interval,
// the next line carrying how many were suppressed; codes are independent.
func TestRateLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	now := time.Unix(1000, 0)
	r := newRateLog(10 * time.Second)
	r.now = func() time.Time { return now }
	for i := 0; i < 1000; i++ { // 1000 answers in 5 s
		r.log(log, "disk_full", "request answered 503")
		now = now.Add(5 * time.Millisecond)
	}
	r.log(log, "shutting_down", "request answered 503")
	now = now.Add(6 * time.Second)
	r.log(log, "disk_full", "request answered 503")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "suppressed_since_last=0") {
		t.Fatalf("first line: %s", lines[0])
	}
	if !strings.Contains(lines[2], "suppressed_since_last=999") {
		t.Fatalf("the line after the interval does not count the suppressed ones: %s", lines[2])
	}
}
