package bench

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/recovery"
)

func recoverInProcess(ctx context.Context, dir string) (int64, int64, error) {
	rep, err := recovery.RecoverDataDir(ctx, dir, recovery.Options{})
	if err != nil {
		return 0, 0, err
	}
	return rep.DataBytes, rep.Spans, nil
}

// TestRunEndToEnd runs every phase against a real daemon at a small size
// and checks what the report says against what was sent. Rounds of at
// most 64 KiB of bodies make every ingest phase run many untimed
// generate / timed send rounds.
func TestRunEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := filepath.Join(daemontest.Binaries(t), "ztsd")
	work := t.TempDir()
	var progress bytes.Buffer
	cfg := Config{ZtsdPath: bin, WorkDir: work, Keep: true, Pprof: true, ProfileDir: filepath.Join(work, "prof"), ProfileSeconds: 1,
		Workload: Workload{Seed: 5}, Spans: 3000, Clients: 4, BatchSpans: 200, Gets: 300, Searches: 20,
		ProbeBytes: 2 << 20, FsyncFor: 50 * time.Millisecond, LZ4For: 20 * time.Millisecond,
		UnbatchedFor: 300 * time.Millisecond, SpaceSpans: 2000, KeySpace: true, OTLPFor: 500 * time.Millisecond, OTLPSenders: 2,
		RoundBytes: 64 << 10, Recover: recoverInProcess, Progress: &progress}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	t.Logf("\n%s", table.String())
	if rep.Spans < 3000 || rep.Spans > 3000+12 || rep.Records < 10*rep.Spans/2 || rep.IngestRequests < 15 {
		t.Errorf("ingest: %d spans, %d records in %d requests", rep.Spans, rep.Records, rep.IngestRequests)
	}
	// The main phase, then Trace JSON (a quarter as many spans) and the
	// unbatched writers into the same store.
	if len(rep.Phases) != 3 || rep.Phases[0].Name != "batched cbor" || rep.Phases[1].Name != "batched json" ||
		rep.Phases[2].Name != PhaseUnbatched || rep.Phases[1].Spans < 750 || rep.Phases[2].Spans == 0 ||
		rep.Phases[2].BatchSpans != 1 || rep.Phases[2].Clients != 2 {
		t.Errorf("phases: %+v", rep.Phases)
	}
	if sum := rep.Phases[0].Spans + rep.Phases[1].Spans + rep.Phases[2].Spans; rep.StoredSpans != sum {
		t.Errorf("stored spans %d, phases sent %d", rep.StoredSpans, sum)
	}
	if rep.RecoverSpans != rep.StoredSpans || rep.RecoverMBPerS <= 0 || rep.RecoverDataBytes != rep.DataBytes {
		t.Errorf("recovery indexed %d spans of %d data bytes (the store holds %d spans, %d data bytes)",
			rep.RecoverSpans, rep.RecoverDataBytes, rep.StoredSpans, rep.DataBytes)
	}
	if rep.RestartHealthzMs <= 0 || rep.RestartFirstReadMs < rep.RestartHealthzMs {
		t.Errorf("restart after kill -9: healthz %v ms, first read %v ms", rep.RestartHealthzMs, rep.RestartFirstReadMs)
	}
	// Both OTLP loads ran; the OTLP/gRPC store gave the bytes per span (the
	// CBOR span store was not needed).
	if len(rep.OTLP) != 2 || rep.OTLP[0].Protocol != OTLPGRPC || rep.OTLP[1].Protocol != OTLPHTTP ||
		rep.OTLP[0].Spans < 100 || rep.OTLP[1].Spans < 100 || rep.OTLP[0].DaemonCPUUsPerSpan <= 0 {
		t.Errorf("OTLP: %+v", rep.OTLP)
	}
	if rep.SpanSpaceOf != "the OTLP/gRPC load's store" || rep.SpanSpaceSpans < rep.OTLP[0].Spans || rep.SpanSpace.Spans != rep.SpanSpaceSpans {
		t.Errorf("space per span measured on %q: %d spans, %d acknowledged in the measured time", rep.SpanSpaceOf, rep.SpanSpaceSpans, rep.OTLP[0].Spans)
	}
	if rep.SpanSpace.DataBytes <= 0 || rep.SpanSpace.MetaBytes <= 0 ||
		math.Abs(rep.SpanSpaceBytesPerSpan*float64(rep.SpanSpaceSpans)-float64(rep.SpanSpace.TotalBytes)) > 0.5 || rep.RecordMarginalBytes <= 0 {
		t.Errorf("space per span: %d spans, %+v, %v B/span, %v B/record", rep.SpanSpaceSpans, rep.SpanSpace, rep.SpanSpaceBytesPerSpan, rep.RecordMarginalBytes)
	}
	kinds := map[string]KeySpace{}
	for _, ks := range rep.KeySpace {
		kinds[ks.Index+" "+ks.Prefix] = ks
		if ks.Keys <= 0 || ks.ZstdBytes <= 0 || ks.NoneBytes <= 0 || ks.KeyBytes < ks.Keys {
			t.Errorf("key space %+v", ks)
		}
	}
	// Every span has a trace record and strings; six attributes each (in
	// the open block's rows until its block of spans is full).
	if tr, r, s := kinds["meta t"], kinds["meta r"], kinds["text s"]; tr.ValueBytes < rep.StoredSpans || r.Keys == 0 || s.Keys == 0 {
		t.Errorf("key space by kind: %+v", rep.KeySpace)
	}
	if rep.EncodeMBPerS <= 0 || rep.DecodeSpansPerS <= 0 {
		t.Errorf("CBOR probe: %+v", rep.CBORLimits)
	}
	if rep.Gets != 300 || rep.GetP50Ms <= 0 || rep.GetP99Ms < rep.GetP50Ms {
		t.Errorf("gets: %d, p50 %v p99 %v", rep.Gets, rep.GetP50Ms, rep.GetP99Ms)
	}
	if len(rep.Searches) != len(searchKinds) {
		t.Errorf("%d search kinds, want %d", len(rep.Searches), len(searchKinds))
	}
	for _, s := range rep.Searches {
		if s.Count != 20 || s.MeanResults <= 0 || s.MeanResults > 100 {
			t.Errorf("search %s: %+v", s.Kind, s)
		}
	}
	if rep.TotalBytes <= rep.DataBytes || rep.PayloadBytes <= rep.StoredBytes || rep.Chunks < int64(rep.IngestRequests) {
		t.Errorf("space: %+v", rep.Space)
	}
	if rep.WriteMBPerS <= 0 || rep.CompressMBPerS <= 0 || rep.IngestDaemonCPUSeconds <= 0 {
		t.Errorf("limits or CPU not measured: %+v %+v cpu %v", rep.DiskLimits, rep.CodecLimits, rep.IngestDaemonCPUSeconds)
	}
	for _, name := range []string{"ingest.cpu.pprof", "ingest.heap.pprof", "unbatched.cpu.pprof", "unbatched.trace", "read.cpu.pprof"} {
		if fi, err := os.Stat(filepath.Join(work, "prof", name)); err != nil || fi.Size() == 0 {
			t.Errorf("daemon profile %s: %v", name, err)
		}
	}
	if !strings.Contains(progress.String(), "ingest batched cbor round 1") {
		t.Errorf("no progress lines:\n%s", progress.String())
	}

	// The store read again as an existing one (--existing): nothing sent,
	// the reads find what the first run stored.
	progress.Reset()
	ex := cfg
	ex.Existing, ex.DataDir, ex.WorkDir, ex.Keep, ex.Recover, ex.SkipProbes = true, filepath.Join(work, "data"), t.TempDir(), false, nil, true
	ex.ProfileDir, ex.Pprof, ex.SkipRestart, ex.SpaceSpans, ex.Gets, ex.Searches = "", false, true, -1, 200, 5
	ex.OTLPFor, ex.KeySpace, ex.Settle = -1, false, time.Minute
	rep3, err := Run(context.Background(), ex)
	if err != nil {
		t.Fatalf("existing store: %v\n%s", err, progress.String())
	}
	if rep3.StoredSpans != rep.StoredSpans || rep3.Spans != rep.Spans || rep3.IngestSeconds != 0 || len(rep3.Phases) != 0 || rep3.Gets != 200 {
		t.Errorf("existing store: %d stored spans (want %d), main phase %d spans (want %d) in %v s, phases %+v, %d gets",
			rep3.StoredSpans, rep.StoredSpans, rep3.Spans, rep.Spans, rep3.IngestSeconds, rep3.Phases, rep3.Gets)
	}
	if _, err := os.Stat(filepath.Join(work, "data")); err != nil {
		t.Errorf("the existing data directory is gone: %v", err)
	}
	// --settle: the gets ran once before the wait too, and this small
	// store's indexes settled (two quiet polls half a second apart) well
	// within the minute.
	if rep3.GetBusy.Count != 200 || !rep3.Settled || rep3.SettleSeconds < 0.5 || rep3.SettleSeconds > 30 {
		t.Errorf("existing store with --settle: %d gets before the wait, settled %t after %.1f s", rep3.GetBusy.Count, rep3.Settled, rep3.SettleSeconds)
	}

	// The same seed again sends the same traffic: equal counts and bytes.
	cfg.WorkDir, cfg.ProfileDir, cfg.Keep, cfg.Recover, cfg.SkipProbes = t.TempDir(), "", false, nil, true
	cfg.Pprof, cfg.UnbatchedFor, cfg.SpaceSpans, cfg.SkipRestart = false, -1, -1, true
	cfg.OTLPFor, cfg.KeySpace = -1, false
	rep2, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep2.Spans != rep.Spans || rep2.Records != rep.Records || rep2.IngestBytesSent != rep.IngestBytesSent ||
		rep2.Phases[1].BytesSent != rep.Phases[1].BytesSent {
		t.Errorf("a second run with seed 5 differs: %d/%d/%d/%d vs %d/%d/%d/%d", rep2.Spans, rep2.Records, rep2.IngestBytesSent,
			rep2.Phases[1].BytesSent, rep.Spans, rep.Records, rep.IngestBytesSent, rep.Phases[1].BytesSent)
	}
	if ents, _ := os.ReadDir(cfg.WorkDir); len(ents) != 0 {
		t.Errorf("work directory not cleaned up: %d entries", len(ents))
	}
}

func TestRunConfigErrors(t *testing.T) {
	if _, err := Run(context.Background(), Config{}); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("no daemon: %v", err)
	}
	if _, err := Run(context.Background(), Config{Socket: "x", Format: "xml"}); err == nil || !strings.Contains(err.Error(), "xml") {
		t.Errorf("bad format: %v", err)
	}
	// A socket nobody listens on: the first request fails, naming it.
	_, err := Run(context.Background(), Config{Socket: filepath.Join(t.TempDir(), "none.sock"), Spans: 10, SkipProbes: true})
	if err == nil || !strings.Contains(err.Error(), "ingest") {
		t.Errorf("dead socket: %v", err)
	}
	// A data directory that already holds something is refused.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), nil, 0o644)
	_, err = Run(context.Background(), Config{ZtsdPath: "/nonexistent/ztsd", DataDir: dir, WorkDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("non-empty data dir: %v", err)
	}
	// A daemon that does not start: the error names the binary, and the
	// files the run created are gone (the given work directory stays).
	work := t.TempDir()
	os.WriteFile(filepath.Join(work, "mine"), nil, 0o644)
	_, err = Run(context.Background(), Config{ZtsdPath: "/nonexistent/ztsd", WorkDir: work})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/ztsd") {
		t.Errorf("missing binary: %v", err)
	}
	if ents, _ := os.ReadDir(work); len(ents) != 1 || ents[0].Name() != "mine" {
		t.Errorf("work directory after a failed start holds %v, want only the caller's file", ents)
	}
}

func TestDaemonConfig(t *testing.T) {
	got := DaemonConfig("/d a/t\"a", "/tmp/s.sock", "batch", true, "[store]\nchunk_target_size = \"256KiB\"")
	for _, want := range []string{`data_dir = "/d a/t\"a"`, `socket = "/tmp/s.sock"`, `sync = "batch"`, "pprof = true",
		`log_level = "warn"`, "[store]\nchunk_target_size"} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
}
