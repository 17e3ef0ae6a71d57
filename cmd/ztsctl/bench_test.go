package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/internal/daemontest"
)

// TestBenchCLI runs `ztsctl bench` against a daemon it starts, at a tiny
// size, and checks the JSON report and the table.
func TestBenchCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	ztsd := filepath.Join(daemontest.Binaries(t), "ztsd")
	jsonOut := filepath.Join(t.TempDir(), "bench.json")
	out, errOut, code := ctl(t, "bench", "--ztsd", ztsd, "--spans", "2000", "--clients", "2", "--batch", "100",
		"--gets", "100", "--searches", "5", "--probe-mib", "2", "--format", "json", "--json-out", jsonOut,
		"--unbatched-for", "300ms", "--space-spans", "1000", "--other-format-spans", "300", "--otlp-for", "300ms", "--senders", "2")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"ingest batched json spans/s", "ingest batched cbor spans/s", "2 unbatched writers",
		"get by id p99", "search text p99", "recover", "disk bytes per 6-attribute span", "disk bytes per method-call record",
		"restart after kill -9: /healthz", "OTLP/grpc spans/s", "OTLP/http daemon CPU per span", "limit: disk read (O_DIRECT)", "limit: CBOR decode, 1 core", "2 json clients × 100 spans/request"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep["ingest_format"] != "json" || rep["spans"].(float64) < 2000 || rep["stored_spans"].(float64) < 2300 ||
		rep["recover_spans"] != rep["stored_spans"] {
		t.Errorf("report: format %v, spans %v, stored %v, recovered %v", rep["ingest_format"], rep["spans"], rep["stored_spans"], rep["recover_spans"])
	}
	for _, k := range []string{"ingest_records_per_s", "get_p99_ms", "bytes_per_record", "disk_write_mb_per_s", "lz4_compress_mb_per_s",
		"cbor_decode_mb_per_s", "span_space_bytes_per_span", "restart_healthz_ms", "record_marginal_bytes"} {
		if v, ok := rep[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v", k, rep[k])
		}
	}
}

func TestBenchCLIErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"bench", "--socket", "/nonexistent/z.sock", "--format", "xml"}, exitUsage, "xml"},
		{[]string{"bench", "--socket", "/nonexistent/z.sock", "--spans", "10", "--no-probes"}, exitFailure, "ingest"},
		{[]string{"bench", "--ztsd", "/nonexistent/ztsd", "--no-probes"}, exitFailure, "/nonexistent/ztsd"},
		{[]string{"bench", "extra"}, exitUsage, "argument"},
		{[]string{"bench", "--otlp", "thrift", "--socket", "/nonexistent/z.sock"}, exitUsage, "thrift"},
		{[]string{"bench", "--otlp", "grpc", "--socket", "/nonexistent/z.sock"}, exitUsage, "otlp_grpc_listen"},
		{[]string{"bench", "--otlp", "http", "--socket", "/nonexistent/z.sock", "--duration", "1s", "--warmup", "0"}, exitFailure, "/v1/traces"},
	} {
		out, errOut, code := ctl(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.msg) {
			t.Errorf("%v: exit %d (want %d), stderr %q, stdout %q", c.args, code, c.code, errOut, out)
		}
	}
}

// TestBenchCLIOTLP runs `ztsctl bench --otlp grpc` against a daemon it
// starts for a moment and checks the JSON report.
func TestBenchCLIOTLP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	ztsd := filepath.Join(daemontest.Binaries(t), "ztsd")
	out, errOut, code := ctl(t, "bench", "--ztsd", ztsd, "--otlp", "grpc", "--senders", "2", "--otlp-traces", "2",
		"--otlp-spans", "3", "--duration", "500ms", "--warmup", "0", "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rep["otlp_protocol"] != "grpc" || rep["otlp_senders"] != 2.0 || rep["otlp_spans_per_trace"] != 3.0 {
		t.Errorf("report: %s", out)
	}
	for _, k := range []string{"otlp_spans", "otlp_spans_per_s", "otlp_request_p99_ms", "otlp_daemon_cpu_us_per_span"} {
		if v, ok := rep[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v", k, rep[k])
		}
	}
}
