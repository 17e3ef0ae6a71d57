package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"
)

// The budget of DESIGN.md "Performance budget" (issue 19's goals).
const (
	// JaegerBadgerSpansPerS is Jaeger v2.20 + Badger's acknowledged spans/s
	// on the OTLP/gRPC load, measured side by side on the reference 2-core
	// machine (DESIGN.md); the OTLP goal is 5 times it.
	JaegerBadgerSpansPerS        = 17_400
	BudgetOTLPSpansPerS          = 5 * JaegerBadgerSpansPerS
	BudgetOTLPDaemonCPUUsPerSpan = 15
	BudgetIngestSpansPerS        = 150_000
	BudgetIngestRecordsPerS      = 1_500_000
	BudgetUnbatchedSpansPerS     = 10_000
	BudgetGetP99Ms               = 0.5
	BudgetReadSpans              = 10_000_000 // the read budgets hold with this many spans stored
	BudgetSearchAttributeP99Ms   = 5
	BudgetSearchTextP99Ms        = 10
	BudgetRecoverReadRatio       = 0.5
	BudgetRestartMs              = 1000
	BudgetBytesPerSpan           = 60
	BudgetBytesPerRecord         = 40
)

// Row statuses.
const (
	StatusMet         = "met"
	StatusNotMet      = "NOT MET"
	StatusNotMeasured = "not measured"
)

// SearchResult is the latency of one kind of search.
type SearchResult struct {
	Kind        string  `json:"kind"`
	Count       int     `json:"count"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	MeanResults float64 `json:"mean_results"`
}

// Report is the outcome of a Run. It marshals to one flat JSON object
// (the embedded Space, DiskLimits and CodecLimits fields are promoted),
// field names in snake_case with their unit in the name.
type Report struct {
	Seed       uint64 `json:"seed"`
	CPUs       int    `json:"cpus"`
	Sync       string `json:"sync"`
	Format     string `json:"ingest_format"`
	Clients    int    `json:"ingest_clients"`
	BatchSpans int    `json:"ingest_batch_spans"`

	// Spans, Records and the ingest_* fields are the main ingest phase;
	// StoredSpans and StoredRecords count what every phase stored in the
	// main daemon (its bytes on disk and recovery are of these), Phases
	// lists every phase (the main one first).
	Spans          int64         `json:"spans"`
	Records        int64         `json:"records"`
	StoredSpans    int64         `json:"stored_spans"`
	StoredRecords  int64         `json:"stored_records"`
	Phases         []IngestPhase `json:"ingest_phases"`
	Traces         int64         `json:"traces"`
	RecordsPerSpan float64       `json:"records_per_span"`

	IngestRequests  int64   `json:"ingest_requests"`
	IngestBytesSent int64   `json:"ingest_bytes_sent"`
	IngestSeconds   float64 `json:"ingest_seconds"`
	// IngestSpansPerS and IngestRecordsPerS count acknowledged (durable)
	// spans and records per second of sending.
	IngestSpansPerS   float64 `json:"ingest_spans_per_s"`
	IngestRecordsPerS float64 `json:"ingest_records_per_s"`
	// IngestMBPerS is request body megabytes (10^6) sent per second.
	IngestMBPerS float64 `json:"ingest_mb_per_s"`
	// IngestPayloadMBPerS is chunk payload (uncompressed CBOR) and
	// IngestStoredMBPerS data-file megabytes written per second.
	IngestPayloadMBPerS float64 `json:"ingest_payload_mb_per_s"`
	IngestStoredMBPerS  float64 `json:"ingest_stored_mb_per_s"`
	IngestP50Ms         float64 `json:"ingest_request_p50_ms"`
	IngestP99Ms         float64 `json:"ingest_request_p99_ms"`
	IngestP999Ms        float64 `json:"ingest_request_p999_ms"`
	// IngestCeilingSpansPerS is what this machine's disk and LZ4 limits
	// allow: min(disk write ÷ stored bytes per span, cores × LZ4 compress
	// ÷ payload bytes per span); likewise per record.
	IngestCeilingSpansPerS   float64 `json:"ingest_ceiling_spans_per_s"`
	IngestCeilingRecordsPerS float64 `json:"ingest_ceiling_records_per_s"`

	// IngestDaemonCPUSeconds is the CPU time (user+system, all threads)
	// the daemon used while the ingest requests were sent (0 for a daemon
	// this run did not start); IngestClientCPUSeconds is this process's.
	// Per span, it measures cost independently of other load on the
	// machine: 2 cores at 100,000 spans/s leave 20 µs per span.
	IngestDaemonCPUSeconds   float64 `json:"ingest_daemon_cpu_s"`
	IngestClientCPUSeconds   float64 `json:"ingest_client_cpu_s"`
	IngestDaemonCPUUsPerSpan float64 `json:"ingest_daemon_cpu_us_per_span"`

	Gets      int     `json:"gets"`
	GetP50Ms  float64 `json:"get_p50_ms"`
	GetP99Ms  float64 `json:"get_p99_ms"`
	GetP999Ms float64 `json:"get_p999_ms"`
	GetMaxMs  float64 `json:"get_max_ms"`
	// GetDaemonCPUSeconds and SearchDaemonCPUSeconds are the daemon's CPU
	// time during the get and search phases; per request in the *_us fields.
	GetDaemonCPUSeconds  float64 `json:"get_daemon_cpu_s"`
	GetDaemonCPUUsPerGet float64 `json:"get_daemon_cpu_us_per_get"`
	// With --settle: GetBusy are the gets run right after ingest, while
	// the indexes still compacted, and their daemon CPU; SettleSeconds is
	// how long the compactions then took to finish (Settled: they did,
	// within --settle), before the read phases above ran.
	GetBusy                  LatencySummary `json:"get_busy"`
	GetBusyDaemonCPUSeconds  float64        `json:"get_busy_daemon_cpu_s"`
	GetBusyDaemonCPUUsPerGet float64        `json:"get_busy_daemon_cpu_us_per_get"`
	SettleSeconds            float64        `json:"settle_s"`
	Settled                  bool           `json:"settled"`
	// SettleDebtBytes is Pebble's compaction debt estimate left at rest
	// (tables in L0 that wait for more before they are compacted).
	SettleDebtBytes        int64   `json:"settle_debt_bytes"`
	SearchDaemonCPUSeconds float64 `json:"search_daemon_cpu_s"`
	SearchDaemonCPUUsPerOp float64 `json:"search_daemon_cpu_us_per_search"`

	SearchAttributeP50Ms float64        `json:"search_attribute_p50_ms"`
	SearchAttributeP99Ms float64        `json:"search_attribute_p99_ms"`
	SearchTextP50Ms      float64        `json:"search_text_p50_ms"`
	SearchTextP99Ms      float64        `json:"search_text_p99_ms"`
	SearchDurationP50Ms  float64        `json:"search_duration_p50_ms"`
	SearchDurationP99Ms  float64        `json:"search_duration_p99_ms"`
	SearchErrorsP50Ms    float64        `json:"search_errors_p50_ms"`
	SearchErrorsP99Ms    float64        `json:"search_errors_p99_ms"`
	SearchTimeRangeP50Ms float64        `json:"search_time_range_p50_ms"`
	SearchTimeRangeP99Ms float64        `json:"search_time_range_p99_ms"`
	Searches             []SearchResult `json:"searches"`

	RecoverSeconds   float64 `json:"recover_seconds"`
	RecoverDataBytes int64   `json:"recover_data_bytes"`
	RecoverMBPerS    float64 `json:"recover_mb_per_s"`
	RecoverSpans     int64   `json:"recover_spans"`
	// RecoverReadRatio is recovery throughput over direct sequential read.
	RecoverReadRatio float64 `json:"recover_read_ratio"`

	// RestartHealthzMs is the time from starting the daemon again after a
	// kill -9 (after the read phases) until /healthz answers, and
	// RestartFirstReadMs until the last span acknowledged before the kill
	// is read by id.
	RestartHealthzMs   float64 `json:"restart_healthz_ms"`
	RestartFirstReadMs float64 `json:"restart_first_read_ms"`

	// OTLP holds the OTLP loads of issue 19 (4 senders, 10 traces × 10
	// spans of six attributes per request), one per protocol.
	OTLP []OTLPResult `json:"otlp,omitempty"`

	// SpanSpace is the store of SpanSpaceSpans six-attribute spans: the
	// OTLP/gRPC load's, or else OTLP-shaped spans sent as CBOR
	// (Config.SpaceSpans), as SpanSpaceOf says; SpanSpaceBytesPerSpan is
	// its bytes on disk per span.
	SpanSpace             Space   `json:"span_space"`
	SpanSpaceOf           string  `json:"span_space_of"`
	SpanSpaceSpans        int64   `json:"span_space_spans"`
	SpanSpaceBytesPerSpan float64 `json:"span_space_bytes_per_span"`
	// RecordMarginalBytes is what a method-call record adds: the main
	// store's bytes less SpanSpaceBytesPerSpan per span, over its records
	// beyond one per span.
	RecordMarginalBytes float64 `json:"record_marginal_bytes"`

	// KeySpace is the main store's index bytes by kind of key
	// (Config.KeySpace).
	KeySpace []KeySpace `json:"key_space,omitempty"`

	Space
	BytesPerSpan          float64 `json:"bytes_per_span"`
	BytesPerRecord        float64 `json:"bytes_per_record"`
	DataBytesPerRecord    float64 `json:"data_bytes_per_record"`
	MetaBytesPerRecord    float64 `json:"meta_bytes_per_record"`
	TextBytesPerRecord    float64 `json:"text_bytes_per_record"`
	PayloadBytesPerRecord float64 `json:"payload_bytes_per_record"`
	CompressionRatio      float64 `json:"compression_ratio"`
	// SpaceBudgetRatio is total bytes on disk over the budget
	// (60 bytes per span + 40 bytes per record); ≤ 1 meets it.
	SpaceBudgetRatio float64 `json:"space_budget_ratio"`

	DiskLimits
	HTTPCommitLimit
	CodecLimits
	CBORLimits

	Rows  []Row    `json:"table"`
	Notes []string `json:"notes"`
}

// OTLPResult is one OTLP load's outcome.
type OTLPResult struct {
	Protocol           string  `json:"protocol"`
	Spans              int64   `json:"spans"`
	Seconds            float64 `json:"seconds"`
	SpansPerS          float64 `json:"spans_per_s"`
	DaemonCPUUsPerSpan float64 `json:"daemon_cpu_us_per_span"`
	RequestP50Ms       float64 `json:"request_p50_ms"`
	RequestP99Ms       float64 `json:"request_p99_ms"`
}

// Row is one line of the report table: a result, the machine limit or
// budget it is compared with, and the ratio.
type Row struct {
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	// Limit is what this machine allows for the metric (0: none measured),
	// LimitOf says what it is, Ratio is Value/Limit.
	Limit   float64 `json:"limit,omitempty"`
	LimitOf string  `json:"limit_of,omitempty"`
	Ratio   float64 `json:"ratio,omitempty"`
	// Budget is the DESIGN.md target; Status is StatusMet, StatusNotMet,
	// StatusNotMeasured (with a budget), or empty when the metric has no
	// budget.
	Budget string `json:"budget,omitempty"`
	Status string `json:"status,omitempty"`
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// finish derives rates, per-unit sizes, ratios and the table.
func (r *Report) finish() {
	if r.StoredSpans == 0 { // a report built by hand (tests): only the main phase
		r.StoredSpans, r.StoredRecords = r.Spans, r.Records
	}
	if len(r.Phases) == 0 && r.IngestSeconds > 0 {
		p := IngestPhase{Name: "batched " + r.Format, Format: r.Format, Clients: r.Clients, BatchSpans: r.BatchSpans,
			Spans: r.Spans, Records: r.Records, Requests: r.IngestRequests, BytesSent: r.IngestBytesSent, Seconds: r.IngestSeconds,
			P50Ms: r.IngestP50Ms, P99Ms: r.IngestP99Ms, P999Ms: r.IngestP999Ms,
			DaemonCPUSeconds: r.IngestDaemonCPUSeconds, ClientCPUSeconds: r.IngestClientCPUSeconds}
		p.finish()
		r.Phases = []IngestPhase{p}
	}
	// Payload and data bytes written during the main phase, at its share of
	// the spans stored.
	mainShare := div(float64(r.Spans), float64(r.StoredSpans))
	secs := r.IngestSeconds
	r.RecordsPerSpan = div(float64(r.Records), float64(r.Spans))
	r.IngestSpansPerS = div(float64(r.Spans), secs)
	r.IngestRecordsPerS = div(float64(r.Records), secs)
	r.IngestMBPerS = div(float64(r.IngestBytesSent)/1e6, secs)
	r.IngestPayloadMBPerS = div(mainShare*float64(r.PayloadBytes)/1e6, secs)
	r.IngestStoredMBPerS = div(mainShare*float64(r.DataBytes)/1e6, secs)
	r.IngestDaemonCPUUsPerSpan = div(r.IngestDaemonCPUSeconds*1e6, float64(r.Spans))
	r.GetDaemonCPUUsPerGet = div(r.GetDaemonCPUSeconds*1e6, float64(r.Gets))
	r.GetBusyDaemonCPUUsPerGet = div(r.GetBusyDaemonCPUSeconds*1e6, float64(r.GetBusy.Count))
	searches := 0
	for _, s := range r.Searches {
		searches += s.Count
	}
	r.SearchDaemonCPUUsPerOp = div(r.SearchDaemonCPUSeconds*1e6, float64(searches))
	for _, s := range r.Searches {
		switch s.Kind {
		case "attribute":
			r.SearchAttributeP50Ms, r.SearchAttributeP99Ms = s.P50Ms, s.P99Ms
		case "text":
			r.SearchTextP50Ms, r.SearchTextP99Ms = s.P50Ms, s.P99Ms
		case "duration":
			r.SearchDurationP50Ms, r.SearchDurationP99Ms = s.P50Ms, s.P99Ms
		case "errors":
			r.SearchErrorsP50Ms, r.SearchErrorsP99Ms = s.P50Ms, s.P99Ms
		case "time_range":
			r.SearchTimeRangeP50Ms, r.SearchTimeRangeP99Ms = s.P50Ms, s.P99Ms
		}
	}
	spans, recs := float64(r.StoredSpans), float64(r.StoredRecords)
	if r.TotalBytes > 0 {
		r.BytesPerSpan = div(float64(r.TotalBytes), spans)
		r.BytesPerRecord = div(float64(r.TotalBytes), recs)
		r.DataBytesPerRecord = div(float64(r.DataBytes), recs)
		r.MetaBytesPerRecord = div(float64(r.MetaBytes), recs)
		r.TextBytesPerRecord = div(float64(r.TextBytes), recs)
		r.PayloadBytesPerRecord = div(float64(r.PayloadBytes), recs)
		r.CompressionRatio = div(float64(r.PayloadBytes), float64(r.StoredBytes))
		r.SpaceBudgetRatio = div(float64(r.TotalBytes), BudgetBytesPerSpan*spans+BudgetBytesPerRecord*recs)
		if r.SpanSpaceBytesPerSpan > 0 && recs > spans {
			r.RecordMarginalBytes = (float64(r.TotalBytes) - r.SpanSpaceBytesPerSpan*spans) / (recs - spans)
		}
	}
	r.RecoverReadRatio = div(r.RecoverMBPerS, r.ReadDirectMBPerS)
	r.IngestCeilingSpansPerS = r.ceiling(float64(r.DataBytes)/spans, float64(r.PayloadBytes)/spans, r.DecodeSpansPerS)
	r.IngestCeilingRecordsPerS = r.IngestCeilingSpansPerS * div(recs, spans)
	r.Rows = r.rows()
}

// ceiling is the ingest rate in spans/s this machine's measured limits
// allow for spans of storedPerSpan data-file bytes and payloadPerSpan
// payload bytes: the least of disk write ÷ stored bytes, cores × LZ4
// compress ÷ payload bytes and cores × decodeSpansPerS (one CBOR decode
// of each span; 0 leaves it out). 0 when nothing was measured.
func (r *Report) ceiling(storedPerSpan, payloadPerSpan, decodeSpansPerS float64) float64 {
	var c []float64
	if r.WriteMBPerS > 0 && storedPerSpan > 0 {
		c = append(c, r.WriteMBPerS*1e6/storedPerSpan)
	}
	if r.CompressMBPerS > 0 && payloadPerSpan > 0 {
		c = append(c, float64(r.CPUs)*r.CompressMBPerS*1e6/payloadPerSpan)
	}
	if decodeSpansPerS > 0 {
		c = append(c, float64(r.CPUs)*decodeSpansPerS)
	}
	if len(c) == 0 {
		return 0
	}
	m := c[0]
	for _, x := range c[1:] {
		m = math.Min(m, x)
	}
	return m
}

// status says whether v meets its budget (atLeast: v ≥ budget, else
// v ≤ budget); measured false gives StatusNotMeasured.
func status(measured, atLeast bool, v, budget float64) string {
	switch {
	case !measured:
		return StatusNotMeasured
	case atLeast && v >= budget, !atLeast && v <= budget:
		return StatusMet
	default:
		return StatusNotMet
	}
}

func (r *Report) phase(name string) (IngestPhase, bool) {
	for _, p := range r.Phases {
		if p.Name == name {
			return p, true
		}
	}
	return IngestPhase{}, false
}

func (r *Report) rows() []Row {
	var rows []Row
	add := func(row Row) {
		if row.Limit > 0 {
			row.Ratio = row.Value / row.Limit
		}
		rows = append(rows, row)
	}
	ceilingOf := fmt.Sprintf("min(disk write ÷ B/span, %d cores × LZ4, %d cores × CBOR decode)", r.CPUs, r.CPUs)

	// OTLP ingest.
	spanCeiling := r.ceiling(div(float64(r.SpanSpace.DataBytes), float64(r.SpanSpaceSpans)),
		div(float64(r.SpanSpace.PayloadBytes), float64(r.SpanSpaceSpans)), 0)
	for _, proto := range []string{"grpc", "http"} {
		var o OTLPResult
		for _, x := range r.OTLP {
			if x.Protocol == proto {
				o = x
			}
		}
		measured := o.Spans > 0
		add(Row{Metric: "OTLP/" + proto + " spans/s (4 senders, 10×10 spans)", Value: o.SpansPerS, Unit: "spans/s",
			Limit: spanCeiling, LimitOf: "min(disk write ÷ B/span, cores × LZ4) for 6-attribute spans",
			Budget: fmt.Sprintf("≥ %s (5 × Jaeger %s)", humanCount(BudgetOTLPSpansPerS), humanCount(JaegerBadgerSpansPerS)),
			Status: status(measured, true, o.SpansPerS, BudgetOTLPSpansPerS)})
		add(Row{Metric: "OTLP/" + proto + " daemon CPU per span", Value: o.DaemonCPUUsPerSpan, Unit: "µs",
			Budget: "≤ 15", Status: status(measured && o.DaemonCPUUsPerSpan > 0, false, o.DaemonCPUUsPerSpan, BudgetOTLPDaemonCPUUsPerSpan)})
	}

	// Batched and unbatched ingest of the main workload.
	for _, p := range r.Phases {
		if p.Name == PhaseUnbatched {
			continue
		}
		add(Row{Metric: "ingest " + p.Name + " spans/s", Value: p.SpansPerS, Unit: "spans/s", Limit: r.IngestCeilingSpansPerS, LimitOf: ceilingOf,
			Budget: "≥ 150,000", Status: status(true, true, p.SpansPerS, BudgetIngestSpansPerS)})
		add(Row{Metric: "ingest " + p.Name + " records/s", Value: p.RecordsPerS, Unit: "records/s", Limit: r.IngestCeilingRecordsPerS, LimitOf: ceilingOf,
			Budget: "≥ 1,500,000", Status: status(true, true, p.RecordsPerS, BudgetIngestRecordsPerS)})
		if p.DaemonCPUSeconds > 0 {
			add(Row{Metric: "ingest " + p.Name + " daemon CPU per span", Value: p.DaemonCPUUsPerSpan, Unit: "µs"})
		}
		add(Row{Metric: "ingest " + p.Name + " request p99", Value: p.P99Ms, Unit: "ms", Limit: r.FsyncP50Ms, LimitOf: "one chunk append + fdatasync, as the committer (p50)"})
	}
	if p, ok := r.phase(PhaseUnbatched); ok {
		limit, limitOf := r.FsyncsPerS*float64(p.Clients), "fsyncs/s × writers (one span per writer per group commit)"
		p50Limit, p50LimitOf := r.FsyncP50Ms, "one chunk append + fdatasync, as the committer (p50)"
		if r.HTTPCommitLimit.SpansPerS > 0 && r.HTTPCommitLimit.Writers == p.Clients {
			limit, limitOf = r.HTTPCommitLimit.SpansPerS, "as many net/http writers to a server that only group-commits (fdatasync)"
			p50Limit, p50LimitOf = r.HTTPCommitLimit.P50Ms, "the same probe's request p50"
		}
		add(Row{Metric: fmt.Sprintf("ingest %d unbatched writers (1 span/request) spans/s", p.Clients), Value: p.SpansPerS, Unit: "spans/s",
			Limit: limit, LimitOf: limitOf, Budget: "≥ 10,000", Status: status(true, true, p.SpansPerS, BudgetUnbatchedSpansPerS)})
		add(Row{Metric: "ingest unbatched request p50", Value: p.P50Ms, Unit: "ms", Limit: p50Limit, LimitOf: p50LimitOf})
	} else {
		add(Row{Metric: "ingest 2 unbatched writers (1 span/request) spans/s", Unit: "spans/s", Budget: "≥ 10,000", Status: StatusNotMeasured})
	}
	add(Row{Metric: "ingest payload into LZ4 (main phase)", Value: r.IngestPayloadMBPerS, Unit: "MB/s",
		Limit: float64(r.CPUs) * r.CompressMBPerS, LimitOf: fmt.Sprintf("LZ4 compress × %d cores", r.CPUs)})
	add(Row{Metric: "ingest written to data files (main phase)", Value: r.IngestStoredMBPerS, Unit: "MB/s", Limit: r.WriteMBPerS, LimitOf: "disk sequential write + fsync"})

	// Space.
	if r.SpanSpaceSpans > 0 {
		n := float64(r.SpanSpaceSpans)
		add(Row{Metric: "disk bytes per 6-attribute span (no records)", Value: r.SpanSpaceBytesPerSpan, Unit: "B",
			Budget: "≤ 60", Status: status(true, false, r.SpanSpaceBytesPerSpan, BudgetBytesPerSpan), LimitOf: r.SpanSpaceOf})
		add(Row{Metric: "  data file", Value: float64(r.SpanSpace.DataBytes) / n, Unit: "B"})
		add(Row{Metric: "  metadata index (meta/)", Value: float64(r.SpanSpace.MetaBytes) / n, Unit: "B"})
		add(Row{Metric: "  text index (text/)", Value: float64(r.SpanSpace.TextBytes) / n, Unit: "B"})
	} else {
		add(Row{Metric: "disk bytes per 6-attribute span (no records)", Unit: "B", Budget: "≤ 60", Status: StatusNotMeasured})
	}
	if r.TotalBytes > 0 {
		if r.RecordMarginalBytes > 0 {
			add(Row{Metric: "disk bytes per method-call record (beyond the span)", Value: r.RecordMarginalBytes, Unit: "B",
				Budget: "≤ 40", Status: status(true, false, r.RecordMarginalBytes, BudgetBytesPerRecord)})
			add(Row{Metric: "disk bytes per record (all bytes ÷ records)", Value: r.BytesPerRecord, Unit: "B"})
		} else {
			add(Row{Metric: "disk bytes per record (all bytes ÷ records)", Value: r.BytesPerRecord, Unit: "B",
				Budget: "≤ 40", Status: status(true, false, r.BytesPerRecord, BudgetBytesPerRecord)})
		}
		add(Row{Metric: "  data file bytes/record", Value: r.DataBytesPerRecord, Unit: "B"})
		add(Row{Metric: "  metadata index bytes/record", Value: r.MetaBytesPerRecord, Unit: "B"})
		add(Row{Metric: "  text index bytes/record", Value: r.TextBytesPerRecord, Unit: "B"})
		add(Row{Metric: "disk bytes per span with its records", Value: r.BytesPerSpan, Unit: "B"})
		spans := float64(r.StoredSpans)
		for _, ks := range r.KeySpace {
			add(Row{Metric: fmt.Sprintf("  %s '%s' %s", ks.Index, ks.Prefix, keyKinds[ks.Index+" "+ks.Prefix]),
				Value: float64(ks.ZstdBytes) / spans, Unit: "B/span",
				LimitOf: fmt.Sprintf("zstd sstable; snappy %.1f, none %.1f B/span; %.2f keys/span, logical %.1f B/span",
					float64(ks.SnappyBytes)/spans, float64(ks.NoneBytes)/spans, float64(ks.Keys)/spans,
					float64(ks.KeyBytes+ks.ValueBytes)/spans)})
		}
		add(Row{Metric: "compression ratio (payload/stored)", Value: r.CompressionRatio, Unit: "×"})
	}

	// Recovery and restart.
	row := Row{Metric: "recover", Value: r.RecoverMBPerS, Unit: "MB/s", Limit: r.ReadDirectMBPerS, LimitOf: "disk sequential read (O_DIRECT)",
		Budget: "≥ 0.5 × disk read", Status: status(r.RecoverMBPerS > 0 && r.ReadDirectMBPerS > 0, true, r.RecoverReadRatio, BudgetRecoverReadRatio)}
	add(row)
	add(Row{Metric: "restart after kill -9: /healthz", Value: r.RestartHealthzMs, Unit: "ms",
		Budget: "≤ 1,000", Status: status(r.RestartHealthzMs > 0, false, r.RestartHealthzMs, BudgetRestartMs)})
	add(Row{Metric: "restart after kill -9: last span read", Value: r.RestartFirstReadMs, Unit: "ms",
		Budget: "≤ 1,000", Status: status(r.RestartFirstReadMs > 0, false, r.RestartFirstReadMs, BudgetRestartMs)})

	// Reads.
	at := func(st string) string {
		if st != StatusNotMeasured && r.StoredSpans < BudgetReadSpans {
			st += fmt.Sprintf(" (at %s spans)", humanCount(float64(r.StoredSpans)))
		}
		return st
	}
	if r.GetBusy.Count > 0 {
		add(Row{Metric: "get by id right after ingest p50", Value: r.GetBusy.P50Ms, Unit: "ms"})
		add(Row{Metric: "get by id right after ingest p99", Value: r.GetBusy.P99Ms, Unit: "ms"})
		add(Row{Metric: "get by id right after ingest p99.9", Value: r.GetBusy.P999Ms, Unit: "ms"})
		if r.GetBusyDaemonCPUSeconds > 0 {
			add(Row{Metric: "get by id right after ingest daemon CPU", Value: r.GetBusyDaemonCPUUsPerGet, Unit: "µs"})
		}
		settled := "finished: reads below at rest"
		if !r.Settled {
			settled = "NOT finished (--settle)"
		}
		add(Row{Metric: "index compactions after ingest", Value: r.SettleSeconds, Unit: "s", Status: settled})
		add(Row{Metric: "  compaction debt left at rest (L0 tables Pebble compacts later)", Value: float64(r.SettleDebtBytes) / 1e6, Unit: "MB"})
	}
	add(Row{Metric: "get by id p50", Value: r.GetP50Ms, Unit: "ms"})
	add(Row{Metric: "get by id p99", Value: r.GetP99Ms, Unit: "ms", Budget: "≤ 0.5 @ 10 M spans",
		Status: at(status(r.Gets > 0, false, r.GetP99Ms, BudgetGetP99Ms))})
	add(Row{Metric: "get by id p99.9", Value: r.GetP999Ms, Unit: "ms"})
	if r.GetDaemonCPUSeconds > 0 {
		add(Row{Metric: "get by id daemon CPU", Value: r.GetDaemonCPUUsPerGet, Unit: "µs"})
	}
	if r.SearchDaemonCPUSeconds > 0 {
		add(Row{Metric: "search daemon CPU (all kinds)", Value: r.SearchDaemonCPUUsPerOp, Unit: "µs"})
	}
	for _, s := range r.Searches {
		add(Row{Metric: "search " + s.Kind + " p50", Value: s.P50Ms, Unit: "ms"})
		row := Row{Metric: "search " + s.Kind + " p99", Value: s.P99Ms, Unit: "ms"}
		switch s.Kind {
		case "attribute":
			row.Budget, row.Status = "≤ 5 (limit 100) @ 10 M spans", at(status(true, false, s.P99Ms, BudgetSearchAttributeP99Ms))
		case "text":
			row.Budget, row.Status = "≤ 10 @ 10 M spans", at(status(true, false, s.P99Ms, BudgetSearchTextP99Ms))
		}
		add(row)
	}

	// This machine's limits, measured in the same run.
	add(Row{Metric: "limit: disk write + fsync", Value: r.WriteMBPerS, Unit: "MB/s"})
	add(Row{Metric: fmt.Sprintf("limit: fsyncs (%s-byte chunk into preallocated zeros, as the committer)", humanCount(ProbeChunkBytes)),
		Value: r.FsyncsPerS, Unit: "/s"})
	if r.AppendFsyncsPerS > 0 {
		add(Row{Metric: "limit: fsyncs (4 KiB append growing the file)", Value: r.AppendFsyncsPerS, Unit: "/s"})
	}
	if h := r.HTTPCommitLimit; h.SpansPerS > 0 {
		add(Row{Metric: fmt.Sprintf("limit: %d net/http writers (%s-byte requests), server only group-commits", h.Writers, humanCount(ProbeHTTPCommitBodyBytes)), Value: h.SpansPerS, Unit: "requests/s"})
		add(Row{Metric: "limit: the same, request p50", Value: h.P50Ms, Unit: "ms"})
	}
	add(Row{Metric: "limit: disk read (O_DIRECT)", Value: r.ReadDirectMBPerS, Unit: "MB/s"})
	add(Row{Metric: "limit: LZ4 compress, 1 core", Value: r.CompressMBPerS, Unit: "MB/s"})
	add(Row{Metric: "limit: LZ4 decompress, 1 core", Value: r.DecompressMBPerS, Unit: "MB/s"})
	add(Row{Metric: "limit: CBOR encode, 1 core", Value: r.EncodeMBPerS, Unit: "MB/s"})
	add(Row{Metric: "limit: CBOR encode, 1 core", Value: r.EncodeSpansPerS, Unit: "spans/s"})
	add(Row{Metric: "limit: CBOR decode, 1 core", Value: r.DecodeMBPerS, Unit: "MB/s"})
	add(Row{Metric: "limit: CBOR decode, 1 core", Value: r.DecodeSpansPerS, Unit: "spans/s"})
	return rows
}

// WriteTable prints the report as one aligned table followed by the notes.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "ztsd bench: %s spans (%s records, %.1f per span) in %s traces; %d %s clients × %d spans/request; sync=%s; %d CPUs; seed %d\n",
		humanCount(float64(r.Spans)), humanCount(float64(r.Records)), r.RecordsPerSpan, humanCount(float64(r.Traces)),
		r.Clients, r.Format, r.BatchSpans, r.Sync, r.CPUs, r.Seed)
	cells := [][]string{{"metric", "result", "unit", "limit", "ratio", "budget", "status", "limit is"}}
	for _, row := range r.Rows {
		limit, ratio := "-", "-"
		if row.Limit > 0 {
			limit, ratio = formatValue(row.Limit), fmt.Sprintf("%.2f", row.Ratio)
		}
		budget := row.Budget
		if budget == "" {
			budget = "-"
		}
		cells = append(cells, []string{row.Metric, formatValue(row.Value), row.Unit, limit, ratio, budget, row.Status, row.LimitOf})
	}
	// Numbers (result, limit, ratio) are right-aligned, text left-aligned.
	right := []bool{false, true, false, true, true, false, false, false}
	width := make([]int, len(right))
	for _, c := range cells {
		for i, v := range c {
			width[i] = max(width[i], utf8.RuneCountInString(v))
		}
	}
	var b strings.Builder
	for _, c := range cells {
		b.Reset()
		for i, v := range c {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(v))
			if i > 0 {
				b.WriteString("  ")
			}
			if right[i] {
				b.WriteString(pad + v)
			} else if i < len(c)-1 {
				b.WriteString(v + pad)
			} else {
				b.WriteString(v)
			}
		}
		if _, err := fmt.Fprintln(w, strings.TrimRight(b.String(), " ")); err != nil {
			return err
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

// WriteJSON prints the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// formatValue prints v with three significant digits, thousands
// separated.
func formatValue(v float64) string {
	switch a := math.Abs(v); {
	case v == 0:
		return "0"
	case a >= 1000:
		return humanCount(v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// humanCount prints a count with thousands separators.
func humanCount(v float64) string {
	s := fmt.Sprintf("%.0f", math.Round(v))
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
