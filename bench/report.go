package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"
)

// The budget of DESIGN.md "Performance budget".
const (
	BudgetIngestSpansPerS      = 100_000
	BudgetIngestRecordsPerS    = 1_000_000
	BudgetGetP99Ms             = 0.5
	BudgetGetSpans             = 10_000_000 // the get budget holds with this many spans stored
	BudgetSearchAttributeP99Ms = 5
	BudgetRecoverReadRatio     = 0.5
	BudgetBytesPerSpan         = 60
	BudgetBytesPerRecord       = 40
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

	Spans          int64   `json:"spans"`
	Records        int64   `json:"records"`
	Traces         int64   `json:"traces"`
	RecordsPerSpan float64 `json:"records_per_span"`

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
	GetDaemonCPUSeconds    float64 `json:"get_daemon_cpu_s"`
	GetDaemonCPUUsPerGet   float64 `json:"get_daemon_cpu_us_per_get"`
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
	CodecLimits

	Rows  []Row    `json:"table"`
	Notes []string `json:"notes"`
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
	// Budget is the DESIGN.md target; Status is "ok", "MISSED", or empty
	// when the metric has no budget.
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
	secs := r.IngestSeconds
	r.RecordsPerSpan = div(float64(r.Records), float64(r.Spans))
	r.IngestSpansPerS = div(float64(r.Spans), secs)
	r.IngestRecordsPerS = div(float64(r.Records), secs)
	r.IngestMBPerS = div(float64(r.IngestBytesSent)/1e6, secs)
	r.IngestPayloadMBPerS = div(float64(r.PayloadBytes)/1e6, secs)
	r.IngestStoredMBPerS = div(float64(r.DataBytes)/1e6, secs)
	r.IngestDaemonCPUUsPerSpan = div(r.IngestDaemonCPUSeconds*1e6, float64(r.Spans))
	r.GetDaemonCPUUsPerGet = div(r.GetDaemonCPUSeconds*1e6, float64(r.Gets))
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
	spans, recs := float64(r.Spans), float64(r.Records)
	if r.TotalBytes > 0 {
		r.BytesPerSpan = div(float64(r.TotalBytes), spans)
		r.BytesPerRecord = div(float64(r.TotalBytes), recs)
		r.DataBytesPerRecord = div(float64(r.DataBytes), recs)
		r.MetaBytesPerRecord = div(float64(r.MetaBytes), recs)
		r.TextBytesPerRecord = div(float64(r.TextBytes), recs)
		r.PayloadBytesPerRecord = div(float64(r.PayloadBytes), recs)
		r.CompressionRatio = div(float64(r.PayloadBytes), float64(r.StoredBytes))
		r.SpaceBudgetRatio = div(float64(r.TotalBytes), BudgetBytesPerSpan*spans+BudgetBytesPerRecord*recs)
	}
	r.RecoverReadRatio = div(r.RecoverMBPerS, r.ReadDirectMBPerS)
	if r.DataBytes > 0 && r.PayloadBytes > 0 {
		var ceilings []float64
		if r.WriteMBPerS > 0 {
			ceilings = append(ceilings, r.WriteMBPerS*1e6/(float64(r.DataBytes)/spans))
		}
		if r.CompressMBPerS > 0 {
			ceilings = append(ceilings, float64(r.CPUs)*r.CompressMBPerS*1e6/(float64(r.PayloadBytes)/spans))
		}
		if len(ceilings) > 0 {
			c := ceilings[0]
			for _, x := range ceilings[1:] {
				c = math.Min(c, x)
			}
			r.IngestCeilingSpansPerS = c
			r.IngestCeilingRecordsPerS = c * r.RecordsPerSpan
		}
	}
	r.Rows = r.rows()
}

func atLeast(v, budget float64) string {
	if v >= budget {
		return "ok"
	}
	return "MISSED"
}

func atMost(v, budget float64) string {
	if v <= budget {
		return "ok"
	}
	return "MISSED"
}

func (r *Report) rows() []Row {
	var rows []Row
	add := func(row Row) {
		if row.Limit > 0 {
			row.Ratio = row.Value / row.Limit
		}
		rows = append(rows, row)
	}
	ceiling := "disk write ÷ B/span, or cores × LZ4 ÷ payload B/span"
	add(Row{Metric: "ingest spans/s", Value: r.IngestSpansPerS, Unit: "spans/s", Limit: r.IngestCeilingSpansPerS, LimitOf: ceiling,
		Budget: "≥ 100,000", Status: atLeast(r.IngestSpansPerS, BudgetIngestSpansPerS)})
	add(Row{Metric: "ingest records/s", Value: r.IngestRecordsPerS, Unit: "records/s", Limit: r.IngestCeilingRecordsPerS, LimitOf: ceiling,
		Budget: "≥ 1,000,000", Status: atLeast(r.IngestRecordsPerS, BudgetIngestRecordsPerS)})
	if r.IngestDaemonCPUSeconds > 0 {
		perSpan := float64(r.CPUs) / BudgetIngestSpansPerS * 1e6
		add(Row{Metric: "ingest daemon CPU per span", Value: r.IngestDaemonCPUUsPerSpan, Unit: "µs",
			Budget: fmt.Sprintf("≤ %.0f (%d cores ÷ 100,000/s)", perSpan, r.CPUs), Status: atMost(r.IngestDaemonCPUUsPerSpan, perSpan)})
	}
	add(Row{Metric: "ingest sent (" + r.Format + ")", Value: r.IngestMBPerS, Unit: "MB/s"})
	add(Row{Metric: "ingest payload into LZ4", Value: r.IngestPayloadMBPerS, Unit: "MB/s",
		Limit: float64(r.CPUs) * r.CompressMBPerS, LimitOf: fmt.Sprintf("LZ4 compress × %d cores", r.CPUs)})
	add(Row{Metric: "ingest written to data files", Value: r.IngestStoredMBPerS, Unit: "MB/s", Limit: r.WriteMBPerS, LimitOf: "disk sequential write + fsync"})
	add(Row{Metric: "ingest request p50", Value: r.IngestP50Ms, Unit: "ms", Limit: r.FsyncP50Ms, LimitOf: "one append + fdatasync (p50)"})
	add(Row{Metric: "ingest request p99", Value: r.IngestP99Ms, Unit: "ms", Limit: r.FsyncP50Ms, LimitOf: "one append + fdatasync (p50)"})
	getBudget, getStatus := "≤ 0.5 @ 10 M spans", atMost(r.GetP99Ms, BudgetGetP99Ms)
	if r.Spans < BudgetGetSpans {
		getStatus += fmt.Sprintf(" (%s spans)", humanCount(float64(r.Spans)))
	}
	add(Row{Metric: "get by id p50", Value: r.GetP50Ms, Unit: "ms"})
	add(Row{Metric: "get by id p99", Value: r.GetP99Ms, Unit: "ms", Budget: getBudget, Status: getStatus})
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
		if s.Kind == "attribute" {
			row.Budget, row.Status = "≤ 5 (limit 100)", atMost(s.P99Ms, BudgetSearchAttributeP99Ms)
		}
		add(row)
	}
	if r.RecoverMBPerS > 0 {
		row := Row{Metric: "recover", Value: r.RecoverMBPerS, Unit: "MB/s", Limit: r.ReadDirectMBPerS, LimitOf: "disk sequential read (O_DIRECT)",
			Budget: "≥ 0.5 × disk read"}
		if r.ReadDirectMBPerS > 0 {
			row.Status = atLeast(r.RecoverReadRatio, BudgetRecoverReadRatio)
		}
		add(row)
	}
	if r.TotalBytes > 0 {
		spanBudget := BudgetBytesPerSpan + BudgetBytesPerRecord*r.RecordsPerSpan
		add(Row{Metric: "disk bytes/record (all)", Value: r.BytesPerRecord, Unit: "B", Budget: "≤ 40", Status: atMost(r.BytesPerRecord, BudgetBytesPerRecord)})
		add(Row{Metric: "disk bytes/span (all)", Value: r.BytesPerSpan, Unit: "B",
			Budget: fmt.Sprintf("≤ 60 + 40 × %.1f rec", r.RecordsPerSpan), Status: atMost(r.BytesPerSpan, spanBudget)})
		add(Row{Metric: "  data file bytes/record", Value: r.DataBytesPerRecord, Unit: "B"})
		add(Row{Metric: "  metadata index bytes/record", Value: r.MetaBytesPerRecord, Unit: "B"})
		add(Row{Metric: "  text index bytes/record", Value: r.TextBytesPerRecord, Unit: "B"})
		add(Row{Metric: "compression ratio (payload/stored)", Value: r.CompressionRatio, Unit: "×"})
	}
	add(Row{Metric: "limit: disk write + fsync", Value: r.WriteMBPerS, Unit: "MB/s"})
	add(Row{Metric: "limit: fsyncs", Value: r.FsyncsPerS, Unit: "/s"})
	add(Row{Metric: "limit: disk read (O_DIRECT)", Value: r.ReadDirectMBPerS, Unit: "MB/s"})
	add(Row{Metric: "limit: LZ4 compress, 1 core", Value: r.CompressMBPerS, Unit: "MB/s"})
	add(Row{Metric: "limit: LZ4 decompress, 1 core", Value: r.DecompressMBPerS, Unit: "MB/s"})
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
