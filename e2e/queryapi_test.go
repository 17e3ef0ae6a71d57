package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/internal/querytest"
)

// Issue 15: the Jaeger and Tempo query APIs of a real daemon, on the TCP
// listener (where Grafana connects) and on the socket, over OTLP, a Zorka
// agent's submissions and an imported WTF trace.
func TestQueryAPIs(t *testing.T) {
	addr := freePort(t)
	d := daemontest.New(t, fmt.Sprintf("listen = %q", addr))
	d.Start()
	hc := socketHTTP(d.Socket)

	// OTLP to the TCP listener; a Zorka agent and a WTF import on the socket.
	body, err := proto.Marshal(querytest.Load())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+addr+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("OTLP post: %d", resp.StatusCode)
	}
	submit(t, hc, "1", true, "", readSample(t, "zorka", "traces1-0-agd.cbor"))
	submit(t, hc, "1", false, traces1ID, readSample(t, "zorka", "traces1-1-trc.cbor"))
	ctlImport(t, d, sample("wtf", "cff-js-node.wtf-trace"))

	tcp := func(path string, header map[string]string) response {
		t.Helper()
		return send(t, http.DefaultClient, http.MethodGet, "http://"+addr+path, header, nil)
	}
	sock := func(path string, header map[string]string) response {
		t.Helper()
		return send(t, hc, http.MethodGet, "http://ztsd"+path, header, nil)
	}

	// Grafana's Jaeger "Save & test" and service picker, over TCP.
	r := tcp("/api/services", map[string]string{"Accept": "application/json, text/plain, */*"})
	var services struct{ Data []string }
	if err := json.Unmarshal(r.body, &services); err != nil || r.status != 200 {
		t.Fatalf("/api/services: %d %s", r.status, r.body)
	}
	for _, want := range []string{"checkout", "payments", "zorka http", "wtf cff-js-node.wtf-trace"} {
		if !strings.Contains(string(r.body), `"`+want+`"`) {
			t.Errorf("services %v lack %q", services.Data, want)
		}
	}

	// The Zorka agent's trace through the Jaeger search, on the socket.
	r = sock("/api/traces?service="+url.QueryEscape("zorka http")+"&limit=20", nil)
	var traces struct {
		Data []struct {
			TraceID string
			Spans   []struct {
				OperationName string
				StartTime     int64
				Duration      int64
			}
		}
	}
	if err := json.Unmarshal(r.body, &traces); err != nil || r.status != 200 || len(traces.Data) != 1 {
		t.Fatalf("zorka search: %d %s", r.status, r.body)
	}
	if z := traces.Data[0]; z.TraceID != traces1ID || z.Spans[0].OperationName != traces1Meth ||
		z.Spans[0].StartTime != traces1Start/1000 || z.Spans[0].Duration != traces1Dur/1000 {
		t.Errorf("zorka trace: %+v", z)
	}
	zorkaSpans := len(traces.Data[0].Spans)

	// The WTF trace's scopes as child spans, through Jaeger trace by id.
	r = tcp("/api/traces?service="+url.QueryEscape("wtf cff-js-node.wtf-trace")+"&minDuration=1us&limit=1", nil)
	if err := json.Unmarshal(r.body, &traces); err != nil || r.status != 200 || len(traces.Data) != 1 {
		t.Fatalf("wtf search: %d %s", r.status, r.body)
	}
	r = tcp("/api/traces/"+traces.Data[0].TraceID, nil)
	if r.status != 200 || !strings.Contains(string(r.body), `"ztsd.record"`) {
		t.Errorf("wtf trace: %d, want record-spans: %.400s", r.status, r.body)
	}

	// Jaeger UI 2.19+'s search list: the summary of the Zorka agent's
	// trace on the socket counts the spans the Jaeger search showed.
	r = sock("/api/v3/trace-summaries?query.service_name="+url.QueryEscape("zorka http")+
		"&query.start_time_min=1970-01-01T00:00:00Z&query.start_time_max=2100-01-01T00:00:00Z&query.num_traces=20", nil)
	var sums struct {
		Summaries []struct {
			TraceID                                  string `json:"traceId"`
			RootServiceName, RootOperationName       string
			MinStartTimeUnixNano, MaxEndTimeUnixNano string
			SpanCount                                int
			Services                                 []struct{ Name string }
		}
	}
	if err := json.Unmarshal(r.body, &sums); err != nil || r.status != 200 || len(sums.Summaries) != 1 {
		t.Fatalf("trace summaries: %d %s", r.status, r.body)
	}
	if s := sums.Summaries[0]; s.TraceID != traces1ID || s.RootServiceName != "zorka http" || s.RootOperationName != traces1Meth ||
		s.MinStartTimeUnixNano != fmt.Sprint(traces1Start) || s.MaxEndTimeUnixNano != fmt.Sprint(traces1Start+traces1Dur) ||
		s.SpanCount != zorkaSpans || len(s.Services) != 1 || s.Services[0].Name != "zorka http" {
		t.Errorf("zorka trace summary: %s", r.body)
	}

	// Tempo: echo, a TraceQL search and the protobuf trace view, over TCP.
	if r = tcp("/api/echo", nil); r.status != 200 || string(r.body) != "echo" {
		t.Errorf("/api/echo: %d %q", r.status, r.body)
	}
	start, end := querytest.Base.Add(-time.Hour).Unix(), querytest.Base.Add(time.Hour).Unix()
	q := url.Values{"q": {`{ resource.service.name = "payments" && status = error }`}, "limit": {"20"}, "spss": {"3"},
		"start": {fmt.Sprint(start)}, "end": {fmt.Sprint(end)}}
	r = tcp("/api/search?"+q.Encode(), map[string]string{"Accept": "application/json"})
	var sr struct {
		Traces []struct{ TraceID, RootServiceName, RootTraceName string }
	}
	if err := json.Unmarshal(r.body, &sr); err != nil || r.status != 200 || len(sr.Traces) != 2 || sr.Traces[0].RootTraceName != "GET /checkout" {
		t.Fatalf("tempo search: %d %s", r.status, r.body)
	}
	r = tcp("/api/v2/traces/"+traces1ID, map[string]string{"Accept": "application/protobuf"})
	if r.status != 200 {
		t.Fatalf("tempo trace: %d %s", r.status, r.body)
	}
	_, _, n := protowire.ConsumeTag(r.body)
	inner, _ := protowire.ConsumeBytes(r.body[n:])
	var td tracepb.TracesData
	if err := proto.Unmarshal(inner, &td); err != nil || len(td.ResourceSpans) != 1 {
		t.Fatalf("tempo trace: %v, %d resource spans", err, len(td.ResourceSpans))
	}
	if sp := td.ResourceSpans[0].ScopeSpans[0].Spans[0]; sp.Name != traces1Meth || sp.StartTimeUnixNano != traces1Start {
		t.Errorf("zorka span as OTLP: %s at %d", sp.Name, sp.StartTimeUnixNano)
	}
}
