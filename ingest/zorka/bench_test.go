package zorka

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// benchBody190 builds an LTracer-style trace body: top-level records of
// `width` children with `width` grandchildren each, attributes on the span
// roots and on every tenth record, an exception now and then.
func benchBody190(tb testing.TB, tops, width int) (agd, body []byte, records int) {
	g := newEncGen(7)
	g.zorkaInts = true
	var all []*encRec
	for i := 0; i < tops; i++ {
		root := &encRec{method: g.randMethod(), begin: g.randBegin(), ending: 'e', calls: 1}
		root.attrs = [][]encAttr{{
			{key: "component", keyRef: true, val: encValue{kind: 't', s: "http"}},
			{key: "http.url", keyRef: true, val: encValue{kind: 't', s: fmt.Sprintf("/app/page/%d", i)}},
			{key: "http.status_code", keyRef: true, val: encValue{kind: 'i', i: 200}},
		}}
		t := uint64(10)
		n := 0
		for c := 0; c < width; c++ {
			child := &encRec{method: g.randMethod(), tstart: t, ending: 'e', calls: 1}
			for gc := 0; gc < width; gc++ {
				n++
				leaf := &encRec{method: g.randMethod(), tstart: t + 1, tend: t + 3, ending: 'e', calls: 1}
				if n%10 == 0 {
					leaf.attrs = [][]encAttr{{{key: "db.statement", keyRef: true, val: encValue{kind: 't', s: "select * from t where id = ?"}}}}
				}
				child.children = append(child.children, leaf)
				t += 4
			}
			child.tend = t + 1
			t += 2
			root.children = append(root.children, child)
		}
		root.tend = t + 5
		all = append(all, root)
	}
	g.encodeTrace(all)
	return g.agd, g.trc, g.records
}

func benchDecode(b *testing.B, agd, body []byte, records int) {
	s := NewSessions(Options{})
	if err := s.SubmitAgentData("bench", true, agd); err != nil {
		b.Fatal(err)
	}
	if _, err := s.SubmitTraceData("bench", false, testTraceID, body); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	for i := 0; i < b.N; i++ {
		if _, err := s.SubmitTraceData("bench", false, testTraceID, body); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// cpuMark is the process CPU time when a benchmark loop started.
type cpuMark struct {
	at time.Duration
	ok bool
}

func startCPU() cpuMark {
	at, ok := processCPU()
	return cpuMark{at, ok}
}

// report adds cpu-ns/op: the process CPU time per iteration since the mark.
// With several processes sharing the cores, wall time per op mostly
// measures the others; CPU time per op (and allocations) is what to compare.
func (m cpuMark) report(b *testing.B) {
	now, ok := processCPU()
	if !m.ok || !ok || b.N == 0 {
		return
	}
	b.ReportMetric(float64(now-m.at)/float64(b.N), "cpu-ns/op")
}

// BenchmarkDecodeTrace190 measures the 1.90 decoder on LTracer-style data:
// 100 spans of 1+20+400 records in one body.
func BenchmarkDecodeTrace190(b *testing.B) {
	agd, body, records := benchBody190(b, 100, 20)
	benchDecode(b, agd, body, records)
}

// BenchmarkDecodeTrace190Random measures it on the round-trip generator's
// traces (nested spans, exceptions, nested attribute values).
func BenchmarkDecodeTrace190Random(b *testing.B) {
	g := newEncGen(11)
	var tops []*encRec
	for i := 0; i < 200; i++ {
		tops = append(tops, g.randTrace(60)...)
	}
	g.encodeTrace(tops)
	benchDecode(b, g.agd, g.trc, g.records)
}

// BenchmarkDecodeTrace2x measures the 2.x decoder: the sample's record
// nested 400 times under one span, repeated.
func BenchmarkDecodeTrace2x(b *testing.B) {
	agd := readSample(b, "zico2-traces1-0-agd.cbor")
	var sb strings.Builder
	records := 0
	for i := 0; i < 100; i++ {
		sb.WriteString("c39f 1b000fc83a311e0a0e 01 c5 83 1b 000001705c15121d 19 5e4c 3b 2557cb7e2c05a8a2")
		sb.WriteString("c6 82 18b9 62 6462")
		for j := 0; j < 400; j++ {
			sb.WriteString("c39f 1b000fc83a311e0a0f 01 c6 82 1908a8 6d 43414c4c20534348454d412829 c4 82 1b000fc83a311e0b00 01 ff")
		}
		sb.WriteString("c4 83 1b000fc83a3202fc15 01 19 2108 ff")
		records += 401
	}
	benchDecode(b, agd, hx(b, sb.String()), records)
}

func BenchmarkAgentData(b *testing.B) {
	agd := readSample(b, "zorka-tdb-sampled-tomcat-agd.cbor")
	s := NewSessions(Options{})
	b.SetBytes(int64(len(agd)))
	b.ReportAllocs()
	cpu := startCPU()
	for i := 0; i < b.N; i++ {
		if err := s.SubmitAgentData("bench", true, agd); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// BenchmarkImportDump measures a replay of a request dump: base64 + JSON
// per request on top of decoding.
func BenchmarkImportDump(b *testing.B) {
	agd, body, records := benchBody190(b, 100, 20)
	dump := fmt.Sprintf(`{"uri":"/agent/submit/agd","headers":{"X-Zorka-Session-ID":["s"],"X-Zorka-Session-Reset":["true"]},"body":%q}
{"uri":"/agent/submit/trc","headers":{"X-Zorka-Session-ID":["s"],"X-Zorka-Trace-ID":["%s"]},"body":%q}
`, base64.StdEncoding.EncodeToString(agd), hex.EncodeToString([]byte("0123456789abcdef")), base64.StdEncoding.EncodeToString(body))
	b.SetBytes(int64(len(dump)))
	b.ReportAllocs()
	cpu := startCPU()
	for i := 0; i < b.N; i++ {
		sum, err := Decode(context.Background(), "bench.txt", []byte(dump), ingest.Options{}, func(*trace.Span) error { return nil })
		if err != nil || sum.Records != int64(records) {
			b.Fatalf("%+v %v", sum, err)
		}
	}
	cpu.report(b)
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
