package zorka

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// samplesDir holds the shared real captures, read in place.
const samplesDir = "../../../shared/testdata/zorka"

func readSample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(samplesDir, name))
	if err != nil {
		t.Fatalf("sample %s: %v", name, err)
	}
	return b
}

func wantAttrs(t *testing.T, where string, got trace.Attrs, want map[string]trace.Value) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d attributes %v, want %d", where, len(got), got, len(want))
	}
	for k, v := range want {
		g, ok := got.Get(k)
		if !ok || !g.Equal(v) {
			t.Errorf("%s: attribute %q = %#v (present %v), want %#v", where, k, g, ok, v)
		}
	}
}

func str(s string) trace.Value { return trace.String(s) }

// The README's acceptance case: traces1-0-agd then traces1-1-trc.
func TestSampleTraces1(t *testing.T) {
	s := NewSessions(Options{})
	if err := s.SubmitAgentData("f903c4a69b4624af", true, readSample(t, "traces1-0-agd.cbor")); err != nil {
		t.Fatal(err)
	}
	spans, err := s.SubmitTraceData("f903c4a69b4624af", false, "7f128efec83c68ec733c1116ad0c9105", readSample(t, "traces1-1-trc.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	sp := spans[0]
	const method = "void org.apache.catalina.core.StandardEngineValve.invoke(Request, Response)"
	if sp.TraceID.String() != "7f128efec83c68ec733c1116ad0c9105" {
		t.Errorf("trace id %s", sp.TraceID)
	}
	if sp.StartNS != 1556820267280*1e6 || sp.DurationNS != 6225920 || sp.Calls != 1 || sp.Recs != 1 || sp.Errors != 0 || sp.Error {
		t.Errorf("span summary: start %d duration %d calls %d recs %d errors %d error %v",
			sp.StartNS, sp.DurationNS, sp.Calls, sp.Recs, sp.Errors, sp.Error)
	}
	if sp.SpanID == 0 || sp.ParentID != 0 || sp.ChunkNum != 0 || sp.Source != trace.SourceZorka || sp.Type != "" {
		t.Errorf("span ids/source: %+v", sp)
	}
	zorkaAttrs := map[string]trace.Value{
		"component":                        str("http"),
		"http.url":                         str("/index.jsp"),
		"http.status_code":                 str("200"),
		"http.method":                      str("GET"),
		"http.header.in.x-some-header.0":   str("xxx"),
		"http.header.out.x-other-header.0": str("yyy"),
	}
	r := sp.Root
	if r == nil || r.Method != method || r.StartNS != 0 || r.DurationNS != 6225920 || r.Calls != 1 || r.Open || len(r.Children) != 0 {
		t.Fatalf("root record %+v", r)
	}
	wantAttrs(t, "root record", r.Attrs, zorkaAttrs)
	zorkaAttrs["call.method"] = str(method)
	zorkaAttrs["source.format"] = str("zorka")
	wantAttrs(t, "span", sp.Attrs, zorkaAttrs)
	if err := sp.Validate(); err != nil {
		t.Fatal(err)
	}

	// Resubmitting the same bytes yields the same generated span id.
	again, err := s.SubmitTraceData("f903c4a69b4624af", false, "7f128efec83c68ec733c1116ad0c9105", readSample(t, "traces1-1-trc.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	if again[0].SpanID != sp.SpanID {
		t.Errorf("generated span id changed: %s then %s", sp.SpanID, again[0].SpanID)
	}
}

// The 2017 Tomcat capture: 7 nested records, 4 levels deep, 12 attributes.
func TestSampleTomcat2017(t *testing.T) {
	s := NewSessions(Options{})
	if err := s.SubmitAgentData("tomcat", true, readSample(t, "zorka-tdb-sampled-tomcat-agd.cbor")); err != nil {
		t.Fatal(err)
	}
	spans, err := s.SubmitTraceData("tomcat", false, "00000000000000420000000000000024", readSample(t, "zorka-tdb-sampled-tomcat-trc.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	sp := spans[0]
	if err := sp.Validate(); err != nil {
		t.Fatal(err)
	}
	maxDepth := 0
	var got []string
	sp.Root.Walk(func(r *trace.Record, depth int) bool {
		maxDepth = max(maxDepth, depth)
		got = append(got, strings.Repeat(" ", depth-1)+r.Method)
		return true
	})
	want := []string{
		"void org.apache.catalina.core.StandardEngineValve.invoke(Request, Response)",
		" void org.apache.catalina.core.StandardContextValve.invoke(Request, Response)",
		"  ApplicationFilterChain org.apache.catalina.core.ApplicationFilterFactory.createFilterChain(ServletRequest, Wrapper, Servlet)",
		"  void org.apache.catalina.core.ApplicationFilterChain.doFilter(ServletRequest, ServletResponse)",
		"   Object org.apache.catalina.core.DefaultInstanceManager.newInstance(String, ClassLoader)",
		"   void org.apache.jsp.index_jsp._jspInit()",
		"   void org.apache.jsp.index_jsp._jspService(HttpServletRequest, HttpServletResponse)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("record tree\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if sp.Recs != 7 || maxDepth != 4 {
		t.Errorf("recs %d depth %d, want 7 and 4", sp.Recs, maxDepth)
	}
	// Times from the capture: root 0 → 0x55a ticks, calls 12.
	if sp.DurationNS != 0x55a<<16 || sp.Calls != 12 || sp.StartNS != 1503386715154*1e6 {
		t.Errorf("span duration %d calls %d start %d", sp.DurationNS, sp.Calls, sp.StartNS)
	}
	// This 2017 agent wrote prolog tstart in nanoseconds (epilog tstop =
	// tstart + duration in ticks): read as ticks, doFilter would start at
	// +12m40s inside an 89.8 ms trace. Read as ns, every record nests and
	// follows its earlier sibling: createFilterChain ends at 0xb1 ticks =
	// 11.600 ms, doFilter starts at 0xb11cfb ns = 11.607 ms.
	doFilter := sp.Root.Children[0].Children[1]
	if doFilter.StartNS != 0xb11cfb || doFilter.DurationNS != (0xb1205c-0xb11cfb)<<16 || doFilter.Calls != 4 || len(doFilter.Children) != 3 {
		t.Errorf("doFilter record %+v", doFilter)
	}
	jspService := doFilter.Children[2]
	if jspService.StartNS != 0x15f8282 || jspService.DurationNS != (0x15f84ab-0x15f8282)<<16 {
		t.Errorf("_jspService record %+v", jspService)
	}
	var outside []string
	var check func(parent *trace.Record)
	check = func(parent *trace.Record) {
		prevEnd := parent.StartNS
		for _, c := range parent.Children {
			if c.StartNS < prevEnd-1<<16 || c.StartNS+c.DurationNS > parent.StartNS+parent.DurationNS+1<<16 {
				outside = append(outside, c.Method)
			}
			prevEnd = c.StartNS + c.DurationNS
			check(c)
		}
	}
	check(sp.Root)
	if len(outside) > 0 {
		t.Errorf("records outside their parent or before their earlier sibling: %v", outside)
	}
	rootAttrs := map[string]trace.Value{
		"URI":                              str("/"),
		"STATUS":                           str("200"),
		"HdrIn__host":                      str("localhost:8080"),
		"HdrIn__connection":                str("keep-alive"),
		"HdrIn__pragma":                    str("no-cache"),
		"HdrIn__cache-control":             str("no-cache"),
		"HdrIn__upgrade-insecure-requests": str("1"),
		"HdrIn__user-agent":                str("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/60.0.3112.101 Safari/537.36"),
		"HdrIn__accept":                    str("text/html,application/xhtml+xml,application/xml;q=0.9,image/webp,image/apng,*/*;q=0.8"),
		"HdrIn__dnt":                       str("1"),
		"HdrIn__accept-encoding":           str("gzip, deflate, br"),
		"HdrIn__accept-language":           str("en-US,en;q=0.8,pl;q=0.6,ru;q=0.4"),
	}
	wantAttrs(t, "root record", sp.Root.Attrs, rootAttrs)
	// [clock, 32]: 32 is the old agent's trace type, not a span id.
	if sp.Type != "" || sp.SpanID == 32 || sp.SpanID == 0 {
		t.Errorf("type %q span id %d", sp.Type, sp.SpanID)
	}
	rootAttrs["call.method"] = str(want[0])
	rootAttrs["source.format"] = str("zorka")
	rootAttrs["zorka.trace_type"] = trace.Int(32)
	rootAttrs["zorka.tstart_unit"] = str("ns")
	wantAttrs(t, "span", sp.Attrs, rootAttrs)
}

// The Zorka 2.x capture: one span with the JDBC statement.
func TestSample2x(t *testing.T) {
	s := NewSessions(Options{})
	if err := s.SubmitAgentData("28db0db67003c823", true, readSample(t, "zico2-traces1-0-agd.cbor")); err != nil {
		t.Fatal(err)
	}
	spans, err := s.SubmitTraceData("28db0db67003c823", false, "e510919ee436643e6ff5f80e5f8357a2", readSample(t, "zico2-traces1-1-trc.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	sp := spans[0]
	if err := sp.Validate(); err != nil {
		t.Fatal(err)
	}
	const method = "ResultSet org.h2.jdbc.JdbcPreparedStatement.executeQuery()"
	spanID := int64(-2690843045142046883)
	if sp.SpanID != trace.SpanID(uint64(spanID)) || sp.ParentID != 0 || sp.Type != "db" ||
		sp.StartNS != 1582092849693*1e6 || sp.DurationNS != 4442276923374613-4442276908370446 ||
		sp.Calls != 1 || sp.Recs != 1 || sp.Error || sp.Errors != 0 {
		t.Errorf("span %+v", sp)
	}
	if sp.Root.Method != method || sp.Root.StartNS != 0 || sp.Root.DurationNS != sp.DurationNS {
		t.Errorf("root %+v", sp.Root)
	}
	attrs := map[string]trace.Value{
		"component":     str("db"),
		"thread.id":     str("1"),
		"thread.name":   str("main"),
		"local.service": str("audit"),
		"db.statement":  str("CALL SCHEMA()"),
		"db.type":       str("sql"),
		"db.url":        str("jdbc:h2:mem:audit"),
		"local.host":    str("BROMBA"),
		"local.pid":     str("4340"),
	}
	wantAttrs(t, "root record", sp.Root.Attrs, attrs)
	attrs["call.method"] = str(method)
	attrs["source.format"] = str("zorka")
	wantAttrs(t, "span", sp.Attrs, attrs)
}

func TestImportDumps(t *testing.T) {
	tests := []struct {
		file    string
		traceID string
		method  string
		attr    string
		value   string
		thread  string
	}{
		{"zico-testdata-traces1.txt", "7f128efec83c68ec733c1116ad0c9105",
			"void org.apache.catalina.core.StandardEngineValve.invoke(Request, Response)", "http.url", "/index.jsp", ""},
		{"zico-2-testdata-traces1.txt", "e510919ee436643e6ff5f80e5f8357a2",
			"ResultSet org.h2.jdbc.JdbcPreparedStatement.executeQuery()", "db.statement", "CALL SCHEMA()", "main"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join(samplesDir, tc.file)
			head := readSample(t, tc.file)
			if !Sniff(head[:min(64, len(head))]) {
				t.Errorf("Sniff does not recognise %s", tc.file)
			}
			var spans []*trace.Span
			sum, err := Import(context.Background(), path, ingest.Options{}, func(s *trace.Span) error {
				spans = append(spans, s)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Format != "zorka" || sum.Source != path || sum.Events != 2 || sum.Traces != 1 || sum.Records != 1 ||
				sum.Warnings == nil || len(sum.Warnings) != 0 {
				t.Errorf("summary %+v", sum)
			}
			if sum.Details["agent_data"] != int64(1) || sum.Details["trace_data"] != int64(1) {
				t.Errorf("details %v", sum.Details)
			}
			if len(spans) != 1 {
				t.Fatalf("%d spans", len(spans))
			}
			sp := spans[0]
			if sp.TraceID.String() != tc.traceID || sp.Root.Method != tc.method {
				t.Errorf("span %s %q", sp.TraceID, sp.Root.Method)
			}
			if v, _ := sp.Attrs.Get(tc.attr); v.Str != tc.value {
				t.Errorf("%s = %q", tc.attr, v.Str)
			}
			if v, _ := sp.Attrs.Get("source.file"); v.Str != tc.file {
				t.Errorf("source.file = %q", v.Str)
			}
			if v, ok := sp.Attrs.Get("thread"); ok != (tc.thread != "") || v.Str != tc.thread {
				t.Errorf("thread = %q (present %v), want %q", v.Str, ok, tc.thread)
			}
			// Deterministic: a second import yields the same ids.
			var again []*trace.Span
			if _, err := Import(context.Background(), path, ingest.Options{}, func(s *trace.Span) error {
				again = append(again, s)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if again[0].SpanID != sp.SpanID || again[0].TraceID != sp.TraceID {
				t.Errorf("ids differ between imports")
			}
		})
	}
}

func TestSniff(t *testing.T) {
	tests := []struct {
		head string
		want bool
	}{
		{`{"headers":{"X-Zorka-Session-ID":["f903c4a69b4624af"]`, true},
		{`{"uri":"\/agent\/submit\/agd","headers":{}`, true},
		{"\xef\xbb\xbf  \n{\"uri\": \"/agent/submit/trc\"}", true},
		{`{"trace_id":"0123","span_id":"01"}`, false},
		{`[{"uri":"x"}]`, false},
		{"\xc8\x9f\xca\x48", false},
		{"", false},
		{`{"version": 2, "events": []}`, false},
	}
	for _, tc := range tests {
		if got := Sniff([]byte(tc.head)); got != tc.want {
			t.Errorf("Sniff(%q) = %v, want %v", tc.head, got, tc.want)
		}
	}
}

func TestUnknownSessionAndRequestErrors(t *testing.T) {
	s := NewSessions(Options{})
	agd := readSample(t, "traces1-0-agd.cbor")
	trc := readSample(t, "traces1-1-trc.cbor")
	if err := s.SubmitAgentData("a", false, agd); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("agent data without reset for a new session: %v", err)
	}
	if _, err := s.SubmitTraceData("a", false, "7f128efec83c68ec733c1116ad0c9105", trc); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("trace data for a new session: %v", err)
	}
	if err := s.SubmitAgentData("", true, agd); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("empty session id: %v", err)
	}
	if err := s.SubmitAgentData("a", true, agd); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SubmitTraceData("a", false, "xyz", trc); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("bad trace id: %v", err)
	}
	// 16 hex digits fill the high half; an absent id gets a random one.
	spans, err := s.SubmitTraceData("a", false, "7f128efec83c68ec", trc)
	if err != nil || spans[0].TraceID.String() != "7f128efec83c68ec0000000000000000" {
		t.Errorf("16-digit trace id: %v %v", spans, err)
	}
	spans, err = s.SubmitTraceData("a", false, "", trc)
	if err != nil || spans[0].TraceID.IsZero() {
		t.Errorf("absent trace id: %v %v", spans, err)
	}
	// Reset on a trace submission clears the symbols: the method id is
	// then undefined, and that is a 400, not an unknown session.
	_, err = s.SubmitTraceData("a", true, "7f128efec83c68ec733c1116ad0c9105", trc)
	var de *DecodeError
	if !errors.As(err, &de) || de.Offset != 2 || !strings.Contains(de.Msg, "undefined method id 1") {
		t.Errorf("trace data after reset: %v", err)
	}
}
