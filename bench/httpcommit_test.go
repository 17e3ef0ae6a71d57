package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestProbeHTTPCommit(t *testing.T) {
	dir := t.TempDir()
	lim, err := ProbeHTTPCommit(context.Background(), dir, 2, 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", lim)
	if lim.Writers != 2 || lim.SpansPerS <= 0 || lim.P50Ms <= 0 || lim.SyncsPerS <= 0 {
		t.Errorf("the probe measured nothing: %+v", lim)
	}
	// Every request is answered after a group commit, and a group holds
	// at most one request per writer.
	if lim.SyncsPerS > lim.SpansPerS*1.0001 || lim.SyncsPerS < lim.SpansPerS/2*0.999 {
		t.Errorf("%.0f group commits/s for %.0f requests/s of 2 writers: want between half and all", lim.SyncsPerS, lim.SpansPerS)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("probe left %d files behind", len(ents))
	}
	if _, err := ProbeHTTPCommit(context.Background(), dir, 0, time.Millisecond); err == nil {
		t.Error("a probe of 0 writers succeeded")
	}
}

// TestReportUnbatchedLimit: the unbatched row is set against the HTTP
// commit probe when it ran with as many writers, against fsyncs × writers
// otherwise.
func TestReportUnbatchedLimit(t *testing.T) {
	rowOf := func(r *Report, metric string) Row {
		for _, row := range r.Rows {
			if row.Metric == metric {
				return row
			}
		}
		t.Fatalf("no row %q", metric)
		return Row{}
	}
	const metric = "ingest 2 unbatched writers (1 span/request) spans/s"
	for _, c := range []struct {
		name      string
		probe     HTTPCommitLimit
		wantLimit float64
		wantOf    string
	}{
		{"probe", HTTPCommitLimit{SpansPerS: 6000, P50Ms: 0.3, Writers: 2, SyncsPerS: 3000}, 6000, "net/http writers"},
		{"probe of other writers", HTTPCommitLimit{SpansPerS: 6000, P50Ms: 0.3, Writers: 4, SyncsPerS: 3000}, 2000, "fsyncs/s × writers"},
		{"no probe", HTTPCommitLimit{}, 2000, "fsyncs/s × writers"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := sampleReport()
			r.Rows = nil
			r.Phases = append(r.Phases, IngestPhase{Name: PhaseUnbatched, Format: FormatCBOR, Clients: 2, BatchSpans: 1,
				Spans: 30_000, Requests: 30_000, Seconds: 10, P50Ms: 0.45})
			r.HTTPCommitLimit = c.probe
			r.finish()
			row := rowOf(r, metric)
			if row.Limit != c.wantLimit || !strings.Contains(row.LimitOf, c.wantOf) {
				t.Errorf("limit %v (%q), want %v (%q)", row.Limit, row.LimitOf, c.wantLimit, c.wantOf)
			}
			probeRow := false
			for _, row := range r.Rows {
				probeRow = probeRow || strings.HasPrefix(row.Metric, "limit: 4 net/http writers") || strings.HasPrefix(row.Metric, "limit: 2 net/http writers")
			}
			if probeRow != (c.probe.SpansPerS > 0) {
				t.Errorf("probe's limit row shown: %t, want %t", probeRow, c.probe.SpansPerS > 0)
			}
		})
	}
}
