package bench

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func sampleReport() *Report {
	r := &Report{Seed: 1, CPUs: 2, Sync: "batch", Format: FormatCBOR, Clients: 8, BatchSpans: 500,
		Spans: 200_000, Records: 2_000_000, Traces: 60_000,
		IngestRequests: 400, IngestBytesSent: 80_000_000, IngestSeconds: 4,
		IngestP50Ms: 20, IngestP99Ms: 60, IngestDaemonCPUSeconds: 6,
		Gets: 1000, GetP50Ms: 0.2, GetP99Ms: 0.6, GetP999Ms: 2,
		Searches: []SearchResult{{Kind: "attribute", Count: 100, P50Ms: 1, P99Ms: 4, MeanResults: 100},
			{Kind: "text", Count: 100, P50Ms: 3, P99Ms: 11, MeanResults: 100},
			{Kind: "time_range", Count: 100, P50Ms: 2, P99Ms: 9, MeanResults: 100}},
		RestartHealthzMs: 300, RestartFirstReadMs: 1500,
		SpanSpace:      Space{DataBytes: 300_000, MetaBytes: 100_000, TextBytes: 100_000, TotalBytes: 500_000},
		SpanSpaceSpans: 10_000, SpanSpaceBytesPerSpan: 50,
		RecoverSeconds: 2, RecoverDataBytes: 400_000_000, RecoverMBPerS: 200,
		Space: Space{Stores: 1, DataBytes: 40_000_000, MetaBytes: 10_000_000, TextBytes: 20_000_000,
			OtherBytes: 1000, TotalBytes: 70_001_000, Chunks: 400, PayloadBytes: 80_000_000, StoredBytes: 39_990_000},
		DiskLimits:  DiskLimits{WriteMBPerS: 500, FsyncsPerS: 1000, FsyncP50Ms: 1, ReadDirectMBPerS: 1000, ReadDirect: true},
		CodecLimits: CodecLimits{CompressMBPerS: 400, DecompressMBPerS: 2000, Ratio: 2},
		CBORLimits:  CBORLimits{EncodeMBPerS: 300, DecodeMBPerS: 200, DecodeSpansPerS: 500_000},
	}
	r.finish()
	return r
}

func TestReportDerived(t *testing.T) {
	r := sampleReport()
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"records_per_span", r.RecordsPerSpan, 10},
		{"ingest_spans_per_s", r.IngestSpansPerS, 50_000},
		{"ingest_records_per_s", r.IngestRecordsPerS, 500_000},
		{"ingest_mb_per_s", r.IngestMBPerS, 20},
		{"ingest_payload_mb_per_s", r.IngestPayloadMBPerS, 20},
		{"ingest_daemon_cpu_us_per_span", r.IngestDaemonCPUUsPerSpan, 30},
		{"bytes_per_record", r.BytesPerRecord, 35.0005},
		{"bytes_per_span", r.BytesPerSpan, 350.005},
		{"data_bytes_per_record", r.DataBytesPerRecord, 20},
		{"compression_ratio", r.CompressionRatio, 80 / 39.99},
		{"space_budget_ratio", r.SpaceBudgetRatio, 70_001_000 / (60*200_000 + 40*2_000_000.0)},
		{"recover_read_ratio", r.RecoverReadRatio, 0.2},
		{"search_attribute_p99_ms", r.SearchAttributeP99Ms, 4},
		{"search_time_range_p99_ms", r.SearchTimeRangeP99Ms, 9},
		// Ceiling: disk 500 MB/s ÷ 200 B/span = 2.5 M spans/s; LZ4 2 × 400
		// MB/s ÷ 400 B/span = 2 M spans/s; CBOR decode 2 × 500,000 spans/s;
		// the lowest wins.
		{"ingest_ceiling_spans_per_s", r.IngestCeilingSpansPerS, 1_000_000},
		// A record beyond its span: (70,001,000 − 50 × 200,000) B over
		// 1,800,000 records.
		{"record_marginal_bytes", r.RecordMarginalBytes, 60_001_000 / 1_800_000.0},
	} {
		if d := c.got - c.want; d > 1e-6*c.want || d < -1e-6*c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	status := map[string]string{}
	for _, row := range r.Rows {
		status[row.Metric] = row.Status
	}
	for metric, want := range map[string]string{
		"ingest batched cbor spans/s":   "NOT MET",
		"ingest batched cbor records/s": "NOT MET",
		"search attribute p99":          "met (at 200,000 spans)",
		"search text p99":               "NOT MET (at 200,000 spans)",
		"get by id p99":                 "NOT MET (at 200,000 spans)",
		"recover":                       "NOT MET",
		"disk bytes per method-call record (beyond the span)": "met",
		"disk bytes per 6-attribute span (no records)":        "met",
		"restart after kill -9: /healthz":                     "met",
		"restart after kill -9: last span read":               "NOT MET",
		"OTLP/grpc spans/s (4 senders, 10×10 spans)":          "not measured",
		"ingest 2 unbatched writers (1 span/request) spans/s": "not measured",
	} {
		if status[metric] != want {
			t.Errorf("row %q status %q, want %q", metric, status[metric], want)
		}
	}
}

// TestReportJSON: one object, every field name snake_case, the names the
// issue lists present with their units in the name.
func TestReportJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(buf.Bytes(), &obj); err != nil {
		t.Fatal(err)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	for k := range obj {
		if !snake.MatchString(k) {
			t.Errorf("field %q is not snake_case", k)
		}
	}
	for _, k := range []string{"ingest_records_per_s", "ingest_spans_per_s", "ingest_mb_per_s", "ingest_request_p50_ms",
		"ingest_request_p99_ms", "get_p50_ms", "get_p99_ms", "get_p999_ms", "search_attribute_p50_ms",
		"search_text_p99_ms", "search_duration_p99_ms", "search_errors_p99_ms", "search_time_range_p99_ms",
		"recover_mb_per_s", "bytes_per_record", "bytes_per_span", "data_bytes_per_record", "meta_bytes_per_record",
		"text_bytes_per_record", "compression_ratio", "disk_write_mb_per_s", "disk_fsyncs_per_s",
		"disk_read_direct_mb_per_s", "lz4_compress_mb_per_s", "disk_total_bytes", "table", "cbor_encode_mb_per_s",
		"cbor_decode_spans_per_s", "ingest_phases", "restart_healthz_ms", "span_space_bytes_per_span", "stored_spans"} {
		if _, ok := obj[k]; !ok {
			t.Errorf("JSON report lacks %q", k)
		}
	}
	if got := obj["get_p99_ms"].(float64); got != 0.6 {
		t.Errorf("get_p99_ms = %v", got)
	}
}

func TestReportTable(t *testing.T) {
	r := sampleReport()
	r.Notes = []string{"a note"}
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(r.Rows)+3 { // summary, header, rows, note
		t.Fatalf("%d lines for %d rows:\n%s", len(lines), len(r.Rows), out)
	}
	for _, want := range []string{"ingest batched cbor spans/s      ", "50,000", "1,000,000", "≥ 150,000", "NOT MET", "get by id p99",
		"limit: CBOR decode, 1 core", "≥ 87,000 (5 × Jaeger 17,400)",
		"limit: LZ4 compress, 1 core", "note: a note", "200,000 spans (2,000,000 records, 10.0 per span)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Columns line up: the result column ends at the same place in every row.
	header := lines[1]
	end := strings.Index(header, "result") + len("result")
	for _, l := range lines[2 : len(lines)-1] {
		if r := []rune(l); len(r) < end || r[end-1] == ' ' {
			t.Errorf("row not aligned with the header:\n%s\n%s", header, l)
		}
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.1234: "0.123", 1.234: "1.23", 12.34: "12.3", 123.4: "123",
		1234: "1,234", 1234567.8: "1,234,568", -4321: "-4,321"} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
}
