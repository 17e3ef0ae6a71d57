package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ztsd/ztsd/trace"
)

// IngestPhase is the outcome of one ingest load.
type IngestPhase struct {
	Name       string `json:"name"`
	Format     string `json:"format"`
	Clients    int    `json:"clients"`
	BatchSpans int    `json:"batch_spans"`

	Spans     int64   `json:"spans"`
	Records   int64   `json:"records"`
	Requests  int64   `json:"requests"`
	BytesSent int64   `json:"bytes_sent"`
	Seconds   float64 `json:"seconds"`
	// SpansPerS and RecordsPerS count acknowledged (durable) spans and
	// records per second of sending.
	SpansPerS   float64 `json:"spans_per_s"`
	RecordsPerS float64 `json:"records_per_s"`
	P50Ms       float64 `json:"request_p50_ms"`
	P99Ms       float64 `json:"request_p99_ms"`
	P999Ms      float64 `json:"request_p999_ms"`
	// DaemonCPUSeconds is the daemon's CPU time over the phase (0 for a
	// daemon this run did not start), DaemonCPUUsPerSpan the same per
	// span; ClientCPUSeconds is this process's.
	DaemonCPUSeconds   float64 `json:"daemon_cpu_s"`
	DaemonCPUUsPerSpan float64 `json:"daemon_cpu_us_per_span"`
	ClientCPUSeconds   float64 `json:"client_cpu_s"`
}

func (p *IngestPhase) finish() {
	p.SpansPerS = div(float64(p.Spans), p.Seconds)
	p.RecordsPerS = div(float64(p.Records), p.Seconds)
	p.DaemonCPUUsPerSpan = div(p.DaemonCPUSeconds*1e6, float64(p.Spans))
}

// addPhase records an ingest phase into the main daemon's store.
func (r *runner) addPhase(ph IngestPhase) {
	r.rep.StoredSpans += ph.Spans
	r.rep.StoredRecords += ph.Records
	r.rep.Phases = append(r.rep.Phases, ph)
}

// Phase names of the ingest loads besides the main one.
const (
	PhaseUnbatched = "unbatched"
)

// unbatchedRoundRequests bounds the requests of one timed round of the
// unbatched phase (~30 MB of one-span bodies): at 10k spans/s a round
// lasts ~3 s, and the clock stops while the next is generated.
const unbatchedRoundRequests = 1 << 15

// unbatched runs cfg.UnbatchedClients clients in a closed loop for
// cfg.UnbatchedFor of timed rounds, each client sending requests of one
// span (cfg.Format) of the main workload. As in the batched phases, each
// round's requests are generated and encoded before its clock starts
// (bounded by unbatchedRoundRequests and cfg.RoundBytes), so the
// clients' CPU on the shared cores is only what sending costs. It
// returns the trace id of the last span acknowledged.
func (r *runner) unbatched(ctx context.Context) (trace.TraceID, error) {
	cfg := r.cfg
	ph := IngestPhase{Name: PhaseUnbatched, Format: cfg.Format, Clients: cfg.UnbatchedClients, BatchSpans: 1}
	contentType := "application/cbor"
	if cfg.Format == FormatJSON {
		contentType = "application/x-ndjson"
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type one struct {
		body []byte
		id   trace.TraceID
		recs int64
	}
	var (
		enc     trace.ChunkEncoder
		round   []one
		pending []*trace.Span // spans of the last trace generated, not yet in a round
	)
	// generate fills round with the next requests, untimed.
	generate := func() error {
		round = round[:0]
		var roundBytes int64
		for len(round) < unbatchedRoundRequests && roundBytes < cfg.RoundBytes {
			if len(pending) == 0 {
				pending = r.gen.Trace()
			}
			sp := pending[0]
			pending = pending[1:]
			var body []byte
			var err error
			if cfg.Format == FormatCBOR {
				body, err = enc.Encode(nil, []*trace.Span{sp})
			} else {
				body, err = encodeJSONLines([]*trace.Span{sp})
			}
			if err != nil {
				return fmt.Errorf("unbatched: encode span %s/%s: %w", sp.TraceID, sp.SpanID, err)
			}
			round = append(round, one{body, sp.TraceID, sp.Recs})
			roundBytes += int64(len(body))
		}
		return nil
	}
	r.logf("ingest %s: %d clients × 1 span/request for %v", PhaseUnbatched, cfg.UnbatchedClients, cfg.UnbatchedFor)
	lats := make([]Latencies, cfg.UnbatchedClients)
	var spans, records, sent atomic.Int64
	var lastMu sync.Mutex
	var last trace.TraceID
	var elapsed time.Duration
	for elapsed < cfg.UnbatchedFor && ctx.Err() == nil {
		if err := generate(); err != nil {
			return last, err
		}
		var next atomic.Int64
		cpu0 := r.cpuTimes()
		start := time.Now()
		deadline := start.Add(cfg.UnbatchedFor - elapsed)
		var wg sync.WaitGroup
		for c := range lats {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out bytes.Buffer
				for time.Now().Before(deadline) && ctx.Err() == nil {
					i := next.Add(1) - 1
					if i >= int64(len(round)) {
						return
					}
					q := round[i]
					t0 := time.Now()
					if err := r.hc.do(ctx, "POST", "/v1/traces", contentType, q.body, &out); err != nil {
						cancel(fmt.Errorf("unbatched request: %w", err))
						return
					}
					lats[c].Add(time.Since(t0))
					spans.Add(1)
					records.Add(q.recs)
					sent.Add(int64(len(q.body)))
					lastMu.Lock()
					last = q.id
					lastMu.Unlock()
				}
			}()
		}
		wg.Wait()
		elapsed += time.Since(start)
		r.addCPU(cpu0, &ph.DaemonCPUSeconds, &ph.ClientCPUSeconds)
	}
	if err := context.Cause(ctx); err != nil {
		return last, err
	}
	var all Latencies
	for i := range lats {
		all.Merge(&lats[i])
	}
	s := all.Summary()
	ph.Spans, ph.Records, ph.Requests, ph.BytesSent = spans.Load(), records.Load(), spans.Load(), sent.Load()
	ph.Seconds = elapsed.Seconds()
	ph.P50Ms, ph.P99Ms, ph.P999Ms = s.P50Ms, s.P99Ms, s.P999Ms
	ph.finish()
	r.addPhase(ph)
	r.logf("ingest %s: %d spans in %.2f s", PhaseUnbatched, ph.Spans, ph.Seconds)
	return last, nil
}

// restartAfterKill kills the daemon with SIGKILL (its indexes' memtables,
// which have no WAL, are lost: the store re-indexes from its watermark),
// starts it again on the same data directory and measures how long until
// it answers /healthz and until it serves a get of trace probe (the last
// one acknowledged).
func (r *runner) restartAfterKill(ctx context.Context, probe trace.TraceID) error {
	cfg := r.cfg
	r.logf("kill -9 and restart")
	r.daemon.Kill()
	r.hc.close()
	t0 := time.Now()
	d, err := StartDaemon(ctx, cfg.ZtsdPath, cfg.WorkDir, cfg.DataDir, cfg.Sync, cfg.Pprof, cfg.ExtraConfig)
	if err != nil {
		r.daemon = nil
		return fmt.Errorf("restart after kill -9: %w", err)
	}
	r.rep.RestartHealthzMs = ms(time.Since(t0))
	r.daemon = d
	r.hc = newHTTPClient(d.Socket, "")
	var out bytes.Buffer
	path := "/v1/traces/" + probe.String()
	for {
		err := r.hc.do(ctx, "GET", path, "", nil, &out)
		if err == nil {
			break
		}
		var se *StatusError
		if !errors.As(err, &se) || time.Since(t0) > 10*time.Minute {
			return fmt.Errorf("get %s after restart: %w", probe, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	r.rep.RestartFirstReadMs = ms(time.Since(t0))
	r.logf("restart: healthz after %.0f ms, trace %s read after %.0f ms", r.rep.RestartHealthzMs, probe, r.rep.RestartFirstReadMs)
	return nil
}

// spanSpace stores cfg.SpaceSpans spans of the OTLP shape (six attributes,
// one root record: Workload.SpansOnly) in a daemon of their own, stops it
// and measures the bytes on disk per span.
func (r *runner) spanSpace(ctx context.Context) error {
	cfg := r.cfg
	work, err := os.MkdirTemp(cfg.WorkDir, "spans-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	data := filepath.Join(work, "data")
	r.logf("space: %d spans of six attributes without method calls, in a daemon of their own", cfg.SpaceSpans)
	d, err := StartDaemon(ctx, cfg.ZtsdPath, work, data, cfg.Sync, false, cfg.ExtraConfig)
	if err != nil {
		return err
	}
	defer d.Kill()
	saved := r.hc
	r.hc = newHTTPClient(d.Socket, "")
	defer func() { r.hc.close(); r.hc = saved }()
	w := cfg.Workload
	w.Seed++
	w.SpansOnly = true
	ph, err := r.ingestPhase(ctx, "space spans", NewGenerator(w), FormatCBOR, cfg.SpaceSpans, cfg.Clients, cfg.BatchSpans, false)
	if err != nil {
		return err
	}
	if err := d.Stop(2 * time.Minute); err != nil {
		return err
	}
	sp, _, err := MeasureSpace(data, 0)
	if err != nil {
		return err
	}
	r.rep.SpanSpace = sp
	r.rep.SpanSpaceSpans = ph.Spans
	r.rep.SpanSpaceBytesPerSpan = div(float64(sp.TotalBytes), float64(ph.Spans))
	r.rep.SpanSpaceOf = "six-attribute spans with one root record each, sent as CBOR"
	return nil
}

// otlp runs the OTLP load over OTLP/gRPC and OTLP/HTTP, each against a
// daemon of its own, and measures the bytes on disk per span of the
// OTLP/gRPC daemon's store.
func (r *runner) otlp(ctx context.Context) error {
	cfg := r.cfg
	for _, proto := range []string{OTLPGRPC, OTLPHTTP} {
		work, err := os.MkdirTemp(cfg.WorkDir, "otlp-")
		if err != nil {
			return err
		}
		data := filepath.Join(work, "data")
		rep, err := RunOTLP(ctx, OTLPConfig{Protocol: proto, ZtsdPath: cfg.ZtsdPath, WorkDir: work, DataDir: data, Keep: true,
			Sync: cfg.Sync, ExtraConfig: cfg.ExtraConfig, Senders: cfg.OTLPSenders, Duration: cfg.OTLPFor,
			Seed: cfg.Workload.Seed, Progress: cfg.Progress})
		if err != nil {
			os.RemoveAll(work)
			return fmt.Errorf("OTLP/%s: %w", proto, err)
		}
		r.rep.OTLP = append(r.rep.OTLP, OTLPResult{Protocol: proto, Spans: rep.Spans, Seconds: rep.Seconds, SpansPerS: rep.SpansPerS,
			DaemonCPUUsPerSpan: rep.DaemonCPUUsPerSpan, RequestP50Ms: rep.RequestP50, RequestP99Ms: rep.RequestP99})
		for _, n := range rep.Notes {
			r.rep.Notes = append(r.rep.Notes, "OTLP/"+proto+": "+n)
		}
		if proto == OTLPGRPC {
			sp, _, err := MeasureSpace(data, 0)
			if err != nil {
				os.RemoveAll(work)
				return fmt.Errorf("OTLP/%s store: %w", proto, err)
			}
			// The store holds the warm-up's spans too: count them all.
			spans := sp.Spans
			r.rep.SpanSpace, r.rep.SpanSpaceSpans = sp, spans
			r.rep.SpanSpaceBytesPerSpan = div(float64(sp.TotalBytes), float64(spans))
			r.rep.SpanSpaceOf = "the OTLP/gRPC load's store"
		}
		os.RemoveAll(work)
	}
	return nil
}
