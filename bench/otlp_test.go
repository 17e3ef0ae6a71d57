package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ztsd/ztsd/internal/daemontest"
)

// TestOTLPSenderRequests decodes what a sender sends: each request holds
// traces × spans spans with 6 attributes each under one resource, trace ids
// are new in every request (and differ between senders), each trace's spans
// share its id, and times move with the clock but keep each span's duration.
func TestOTLPSenderRequests(t *testing.T) {
	cfg := OTLPConfig{Traces: 3, SpansPerTrace: 4, Seed: 9}
	base := time.Now().Add(-time.Hour)
	seen := map[string]bool{}
	for id := range 2 {
		s, err := newOTLPSender(cfg, id, base)
		if err != nil {
			t.Fatal(err)
		}
		var tmpl collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(s.templates[0].body, &tmpl); err != nil {
			t.Fatal(err)
		}
		for range otlpTemplatesPerSender + 2 {
			body, n := s.next(base)
			var req collectortrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				t.Fatalf("request %d of sender %d: %v", s.seq, id, err)
			}
			spans := req.ResourceSpans[0].ScopeSpans[0].Spans
			if n != 12 || len(spans) != 12 {
				t.Fatalf("%d spans (said %d), want 12", len(spans), n)
			}
			if len(req.ResourceSpans[0].Resource.Attributes) == 0 {
				t.Error("no resource attributes")
			}
			for i, sp := range spans {
				if len(sp.Attributes) != OTLPAttrsPerSpan {
					t.Errorf("span %d: %d attributes", i, len(sp.Attributes))
				}
				if sp.StartTimeUnixNano < uint64(base.Add(time.Hour-time.Minute).UnixNano()) || sp.EndTimeUnixNano < sp.StartTimeUnixNano {
					t.Errorf("span %d: start %d end %d, want about now", i, sp.StartTimeUnixNano, sp.EndTimeUnixNano)
				}
				if i%4 != 0 {
					if !bytes.Equal(sp.TraceId, spans[i-1].TraceId) {
						t.Errorf("span %d: trace id %x, its trace's %x", i, sp.TraceId, spans[i-1].TraceId)
					}
					continue
				}
				if seen[string(sp.TraceId)] {
					t.Errorf("trace id %x sent twice", sp.TraceId)
				}
				seen[string(sp.TraceId)] = true
			}
		}
		if s0 := tmpl.ResourceSpans[0].ScopeSpans[0].Spans[0]; s0.StartTimeUnixNano > uint64(base.UnixNano()+int64(time.Second)) {
			t.Errorf("the template changed: start %d", s0.StartTimeUnixNano)
		}
	}
	if len(seen) != 2*(otlpTemplatesPerSender+2)*3 {
		t.Errorf("%d distinct trace ids", len(seen))
	}
}

// TestRunOTLPEndToEnd runs the OTLP load over gRPC and HTTP against a real
// daemon for a moment: spans are acknowledged, the daemon's CPU is
// measured, and the JSON report carries the documented field names.
func TestRunOTLPEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := filepath.Join(daemontest.Binaries(t), "ztsd")
	for _, proto := range []string{OTLPGRPC, OTLPHTTP} {
		t.Run(proto, func(t *testing.T) {
			var progress bytes.Buffer
			rep, err := RunOTLP(context.Background(), OTLPConfig{Protocol: proto, ZtsdPath: bin, WorkDir: t.TempDir(),
				Senders: 2, Traces: 2, SpansPerTrace: 5, Duration: 700 * time.Millisecond, Warmup: -1, Progress: &progress})
			if err != nil {
				t.Fatalf("%v\n%s", err, progress.String())
			}
			if rep.Requests == 0 || rep.Spans != rep.Requests*10 || rep.SpansPerS <= 0 {
				t.Errorf("%d requests, %d spans, %.0f spans/s", rep.Requests, rep.Spans, rep.SpansPerS)
			}
			if rep.DaemonCPUSeconds <= 0 || rep.DaemonCPUUsPerSpan <= 0 || rep.RequestP99 < rep.RequestP50 || rep.RequestP50 <= 0 {
				t.Errorf("daemon CPU %.3f s (%.1f µs/span), p50 %.2f ms, p99 %.2f ms", rep.DaemonCPUSeconds, rep.DaemonCPUUsPerSpan,
					rep.RequestP50, rep.RequestP99)
			}
			var buf bytes.Buffer
			if err := rep.WriteJSON(&buf); err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"otlp_protocol", "otlp_spans_per_s", "otlp_request_p50_ms", "otlp_request_p99_ms", "otlp_daemon_cpu_us_per_span"} {
				if _, ok := m[k]; !ok {
					t.Errorf("JSON report has no %s: %s", k, buf.String())
				}
			}
			if m["otlp_protocol"] != proto {
				t.Errorf("otlp_protocol %v", m["otlp_protocol"])
			}
		})
	}
}
