package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/trace"
)

// Issue 5: the Zorka agent protocol and request-dump import, end to end.

const (
	zorkaCT      = "application/zorka+cbor+v1"
	traces1ID    = "7f128efec83c68ec733c1116ad0c9105"
	traces1Start = 1556820267280 * 1_000_000
	traces1Dur   = 95 << 16 // 95 ticks = 6,225,920 ns
	traces1Meth  = "void org.apache.catalina.core.StandardEngineValve.invoke(Request, Response)"

	// smallStores makes every write after the open store reached 4 KiB
	// rotate to a new store; uncompressed so that sizes are predictable.
	smallStores = "[store]\nmax_store_size = \"4KiB\"\nchunk_target_size = \"4KiB\"\ncompression = \"none\""
)

// traces1Attrs are the span attributes the sample README names.
var traces1Attrs = map[string]string{
	"component":                        "http",
	"http.url":                         "/index.jsp",
	"http.status_code":                 "200",
	"http.method":                      "GET",
	"http.header.in.x-some-header.0":   "xxx",
	"http.header.out.x-other-header.0": "yyy",
	"call.method":                      traces1Meth,
	"source.format":                    "zorka",
}

// agentHeaders are the headers of one agent submission.
func agentHeaders(session string, reset bool, traceID string) map[string]string {
	h := map[string]string{"Content-Type": zorkaCT, "X-Zorka-Session-ID": session}
	if reset {
		h["X-Zorka-Session-Reset"] = "true"
	} else {
		h["X-Zorka-Session-Reset"] = "false"
	}
	if traceID != "" {
		h["X-Zorka-Trace-ID"] = traceID
	}
	return h
}

// submit posts agent data (traceID "") or trace data and requires 202.
func submit(t testing.TB, hc *http.Client, session string, reset bool, traceID string, body []byte) {
	t.Helper()
	path := "/agent/submit/agd"
	if traceID != "" {
		path = "/agent/submit/trc"
	}
	r := post(t, hc, path, agentHeaders(session, reset, traceID), body)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST %s: status %d, want 202: %s", path, r.status, r.body)
	}
}

func readSample(t testing.TB, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(sample(parts...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustTraceID(t testing.TB, s string) trace.TraceID {
	t.Helper()
	id, err := trace.ParseTraceID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// getOne reads a trace that must hold exactly one root span.
func getOne(t testing.TB, c *client.Client, id string) *trace.Span {
	t.Helper()
	roots, err := c.Get(context.Background(), mustTraceID(t, id))
	if err != nil {
		t.Fatalf("GET trace %s: %v", id, err)
	}
	if len(roots) != 1 {
		t.Fatalf("GET trace %s: %d root spans, want 1", id, len(roots))
	}
	return roots[0]
}

// checkTraces1 checks the README's expectations of the traces1 capture
// through the Go client, `ztsctl get` and `ztsctl search`.
func checkTraces1(t *testing.T, d *daemontest.Daemon) {
	t.Helper()
	sp := getOne(t, d.Client, traces1ID)
	if sp.StartNS != traces1Start || traces1Dur != 6_225_920 || sp.DurationNS != traces1Dur || sp.Calls != 1 ||
		sp.Recs != 1 || sp.Errors != 0 || sp.Error || sp.Source != trace.SourceZorka || sp.ParentID != 0 || len(sp.Children) != 0 {
		t.Errorf("span: start %d duration %d calls %d recs %d errors %d error %v source %q parent %s children %d",
			sp.StartNS, sp.DurationNS, sp.Calls, sp.Recs, sp.Errors, sp.Error, sp.Source, sp.ParentID, len(sp.Children))
	}
	wantAttrs(t, "span", sp.Attrs, traces1Attrs)
	if r := sp.Root; r == nil || r.Method != traces1Meth || r.DurationNS != traces1Dur || r.Calls != 1 || len(r.Children) != 0 || r.Open {
		t.Errorf("root record %+v", sp.Root)
	}
	out := ctlGet(t, d, traces1ID)
	for _, want := range []string{"span " + sp.SpanID.String(), "trace " + traces1ID, "2019-05-02T18:04:27.28Z", "6.226ms",
		"calls=1 recs=1", "http.url=/index.jsp", "http.header.out.x-other-header.0=yyy", "+0s         " + traces1Meth} {
		if !strings.Contains(out, want) {
			t.Errorf("ztsctl get: no %q in\n%s", want, out)
		}
	}
	found := ctlSearch(t, d, "--attr", "http.url=/index.jsp", "--attr", "http.method=GET", "--spans")
	if len(found) != 1 || found[0].TraceID.String() != traces1ID || found[0].SpanID != sp.SpanID {
		t.Errorf("ztsctl search --attr http.url=/index.jsp: %d results %v", len(found), spanIDs(found))
	}
}

// TestZorkaTraces1Sample replays the 2019 Tomcat capture as the agent sent
// it, with curl over the socket, and as a ZICO request dump with ztsctl
// import; both give the span the sample README describes.
func TestZorkaTraces1Sample(t *testing.T) {
	t.Parallel()
	t.Run("curl", func(t *testing.T) {
		t.Parallel()
		curl, err := exec.LookPath("curl")
		if err != nil {
			t.Skip("curl is not installed")
		}
		d := daemontest.New(t, "")
		d.Start()
		post := func(path string, headers []string, file string) {
			t.Helper()
			args := []string{"-sS", "--unix-socket", d.Socket, "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
				"-H", "Content-Type: " + zorkaCT, "-H", "X-Zorka-Session-ID: f903c4a69b4624af"}
			for _, h := range headers {
				args = append(args, "-H", h)
			}
			args = append(args, "--data-binary", "@"+sample("zorka", file), "http://ztsd"+path)
			out, err := exec.Command(curl, args...).CombinedOutput()
			if err != nil || string(out) != "202" {
				t.Fatalf("curl %s: %v, status %q", path, err, out)
			}
		}
		post("/agent/submit/agd", []string{"X-Zorka-Session-Reset: true"}, "traces1-0-agd.cbor")
		post("/agent/submit/trc", []string{"X-Zorka-Session-Reset: false", "X-Zorka-Trace-ID: " + traces1ID}, "traces1-1-trc.cbor")
		checkTraces1(t, d)
		if v := attrText(getOne(t, d.Client, traces1ID).Attrs, "source.file"); v != "" {
			t.Errorf("a live submission has source.file %q", v)
		}
	})
	t.Run("import", func(t *testing.T) {
		t.Parallel()
		d := daemontest.New(t, "")
		d.Start()
		sums := ctlImport(t, d, "--format", "zorka", sample("zorka", "zico-testdata-traces1.txt"))
		if len(sums) != 1 || sums[0].Format != "zorka" || sums[0].Events != 2 || sums[0].Traces != 1 || sums[0].Records != 1 ||
			len(sums[0].Warnings) != 0 {
			t.Fatalf("import summary %+v", sums)
		}
		if num(t, sums[0].Details["string_defs"], "string_defs") != 9 || num(t, sums[0].Details["method_defs"], "method_defs") != 1 {
			t.Errorf("import details %v: want the capture's 9 string defs and 1 method def", sums[0].Details)
		}
		checkTraces1(t, d)
		if v := attrText(getOne(t, d.Client, traces1ID).Attrs, "source.file"); v != "zico-testdata-traces1.txt" {
			t.Errorf("source.file = %q", v)
		}
		// The dump's auto-detected format is the same.
		sums = ctlImport(t, d, sample("zorka", "zico-2-testdata-traces1.txt"))
		if len(sums) != 1 || sums[0].Format != "zorka" || sums[0].Traces != 1 {
			t.Fatalf("auto import of the 2.x dump: %+v", sums)
		}
		// The raw captures, given as an agent sent them (agent data, then
		// trace data), replay as one session and give the same span.
		sums = ctlImport(t, d, sample("zorka", "traces1-0-agd.cbor"), sample("zorka", "traces1-1-trc.cbor"))
		if len(sums) != 1 || sums[0].Format != "zorka" || sums[0].Events != 2 || sums[0].Traces != 1 || sums[0].Records != 1 {
			t.Fatalf("import of the raw agd + trc pair: %+v", sums)
		}
		raw := ctlSearch(t, d, "--attr", "source.file=traces1-1-trc.cbor", "--attr", "http.url=/index.jsp")
		if len(raw) != 1 || raw[0].DurationNS != 6225920 || raw[0].StartNS != 1556820267280*1e6 {
			t.Fatalf("the raw pair's trace: %+v", raw)
		}
		// Trace data alone is refused, saying what it needs.
		_, stderr, code := d.Ctl(nil, "import", sample("zorka", "traces1-1-trc.cbor"))
		if code == 0 || !strings.Contains(stderr, "needs the agent data") {
			t.Errorf("import of trace data alone: exit %d, %s", code, stderr)
		}
	})
}

// TestZorkaSamplesOverSocket sends the 2017 Tomcat capture and the Zorka
// 2.x capture to the agent endpoints.
func TestZorkaSamplesOverSocket(t *testing.T) {
	t.Parallel()
	d := daemontest.New(t, "")
	d.Start()
	hc := socketHTTP(d.Socket)

	const tomcatID = "00000000000000420000000000000024"
	submit(t, hc, "tomcat", true, "", readSample(t, "zorka", "zorka-tdb-sampled-tomcat-agd.cbor"))
	submit(t, hc, "tomcat", false, tomcatID, readSample(t, "zorka", "zorka-tdb-sampled-tomcat-trc.cbor"))
	sp := getOne(t, d.Client, tomcatID)
	maxDepth := 0
	var tree []string
	sp.Root.Walk(func(r *trace.Record, depth int) bool {
		maxDepth = max(maxDepth, depth)
		tree = append(tree, strings.Repeat(" ", depth-1)+r.Method)
		return true
	})
	wantTree := []string{
		"void org.apache.catalina.core.StandardEngineValve.invoke(Request, Response)",
		" void org.apache.catalina.core.StandardContextValve.invoke(Request, Response)",
		"  ApplicationFilterChain org.apache.catalina.core.ApplicationFilterFactory.createFilterChain(ServletRequest, Wrapper, Servlet)",
		"  void org.apache.catalina.core.ApplicationFilterChain.doFilter(ServletRequest, ServletResponse)",
		"   Object org.apache.catalina.core.DefaultInstanceManager.newInstance(String, ClassLoader)",
		"   void org.apache.jsp.index_jsp._jspInit()",
		"   void org.apache.jsp.index_jsp._jspService(HttpServletRequest, HttpServletResponse)",
	}
	if strings.Join(tree, "\n") != strings.Join(wantTree, "\n") {
		t.Errorf("record tree\n%s\nwant\n%s", strings.Join(tree, "\n"), strings.Join(wantTree, "\n"))
	}
	if sp.Recs != 7 || maxDepth != 4 || len(sp.Root.Attrs) != 12 {
		t.Errorf("recs %d, depth %d, root attributes %d: want 7, 4, 12", sp.Recs, maxDepth, len(sp.Root.Attrs))
	}
	wantAttrs(t, "tomcat root record", sp.Root.Attrs, map[string]string{"URI": "/", "STATUS": "200",
		"HdrIn__host": "localhost:8080", "HdrIn__dnt": "1", "HdrIn__accept-encoding": "gzip, deflate, br"})
	// ztsctl renders the 4 levels, each indented two more spaces.
	out := ctlGet(t, d, tomcatID)
	for _, line := range wantTree {
		method := strings.TrimLeft(line, " ")
		pad := strings.Repeat("  ", 1+len(line)-len(method))
		if !regexp.MustCompile(`(?m)^` + pad + `\S+ +\S+ +\+\S+ +` + regexp.QuoteMeta(method)).MatchString(out) {
			t.Errorf("ztsctl get: no line %q indented by %d in\n%s", method, len(pad), out)
		}
	}

	const zico2ID = "e510919ee436643e6ff5f80e5f8357a2"
	submit(t, hc, "28db0db67003c823", true, "", readSample(t, "zorka", "zico2-traces1-0-agd.cbor"))
	submit(t, hc, "28db0db67003c823", false, zico2ID, readSample(t, "zorka", "zico2-traces1-1-trc.cbor"))
	sp = getOne(t, d.Client, zico2ID)
	if sp.Root.Method != "ResultSet org.h2.jdbc.JdbcPreparedStatement.executeQuery()" || sp.Type != "db" ||
		sp.StartNS != 1582092849693*1_000_000 || sp.DurationNS != 4442276923374613-4442276908370446 || sp.Recs != 1 {
		t.Errorf("2.x span: method %q type %q start %d duration %d recs %d", sp.Root.Method, sp.Type, sp.StartNS, sp.DurationNS, sp.Recs)
	}
	wantAttrs(t, "2.x span", sp.Attrs, map[string]string{"db.statement": "CALL SCHEMA()", "db.url": "jdbc:h2:mem:audit",
		"component": "db", "thread.name": "main"})
	found := ctlSearch(t, d, "--text", "call schema()", "--spans")
	if len(found) != 1 || found[0].TraceID.String() != zico2ID {
		t.Errorf("ztsctl search --text 'call schema()': %d results", len(found))
	}
	found = ctlSearch(t, d, "--attr", "db.statement=CALL SCHEMA()")
	if len(found) != 1 || found[0].TraceID.String() != zico2ID {
		t.Errorf("ztsctl search --attr db.statement=...: %d results", len(found))
	}
}

// fillStore puts one span with a 6 KiB attribute, so that the open store
// (max_store_size 4 KiB) rotates at the next write.
func fillStore(t testing.TB, d *daemontest.Daemon, n byte) {
	t.Helper()
	sp := &trace.Span{TraceID: trace.TraceID{0xf1, 0x11, n}, SpanID: trace.SpanID(0xf111 + uint64(n)), StartNS: 1_600_000_000_000_000_000,
		DurationNS: 1000, Calls: 1, Recs: 1, Root: &trace.Record{Method: "filler", DurationNS: 1000, Calls: 1}}
	// Digits only, so that no text search of the tests matches it.
	var pad strings.Builder
	for i := 0; pad.Len() < 6<<10; i++ {
		pad.WriteString(strings.Repeat(string(rune('0'+i%10)), 1+i%7))
	}
	sp.Attrs.Set("filler", trace.String(pad.String()))
	if err := d.Client.Put(context.Background(), sp); err != nil {
		t.Fatal(err)
	}
}

func storeCount(t testing.TB, c *client.Client) []client.StoreInfo {
	t.Helper()
	stores, err := c.Stores(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return stores
}

// TestZorkaAgentProtocol: a trace streamed in two submissions across a
// store rotation (and an agent reset) is whole on GET; an unknown session
// gets 412; malformed bodies get 400 naming the offset and change nothing.
func TestZorkaAgentProtocol(t *testing.T) {
	t.Parallel()
	d := daemontest.New(t, smallStores)
	d.Start()
	hc := socketHTTP(d.Socket)
	const sess, tid = "0123456789abcdef", "5eed00000000000000000000000000c1"
	agent := newZorkaAgent()
	root := &zRec{m: zMyMethod, tstart: 1000, tstop: 1400, calls: 3, begin: &zBegin{clockMS: 1_700_000_000_000, spanID: 0x5eed0001},
		attrs: []string{"component", "http", "http.url", "/chunked"}}
	child1 := &zRec{m: zInvoke, tstart: 1010, tstop: 1100}
	child2 := &zRec{m: zExecute, tstart: 1110, tstop: 1200, attrs: []string{"db.statement", "select 2"}}
	chunk0 := agent.record(agent.open(nil, root), child1)
	submit(t, hc, sess, true, "", agent.takeAgentData())
	submit(t, hc, sess, false, tid, chunk0)

	// The first piece is readable at once, its root still open.
	sp := getOne(t, d.Client, tid)
	if !sp.Root.Open || len(sp.Root.Children) != 1 || sp.SpanID != 0x5eed0001 {
		t.Fatalf("after chunk 0: root open %v, %d children, span %s", sp.Root.Open, len(sp.Root.Children), sp.SpanID)
	}
	if out := ctlGet(t, d, tid); !strings.Contains(out, "(not finished)") {
		t.Errorf("ztsctl get of an open trace does not say so:\n%s", out)
	}

	fillStore(t, d, 1)
	before := len(storeCount(t, d.Client))
	// The agent was reset (say, the collector restarted): it resends its
	// symbols with a reset; the open records stay.
	agent.reset()
	chunk1 := agent.close(agent.record(nil, child2), root)
	submit(t, hc, sess, true, "", agent.takeAgentData())

	// Malformed and misdirected submissions in the middle of the stream.
	snap := storeSnapshot(t, d.Client)
	undefinedMethod := []byte{0xc8, 0x9f, 0xca, 0x48, 0, 0x03, 0xe7, 0, 0, 0, 0, 0} // method 999
	cases := []struct {
		name    string
		path    string
		headers map[string]string
		body    []byte
		status  int
		code    string
		msg     string
	}{
		{"unknown session", "/agent/submit/trc", agentHeaders("never-seen", false, tid), chunk1, 412, "unknown_session", "unknown agent session"},
		{"unknown session agd", "/agent/submit/agd", agentHeaders("never-seen", false, ""), []byte{0xc1, 0x83, 0x01, 0x61, 'x', 0x00}, 412, "unknown_session", "X-Zorka-Session-Reset: true"},
		{"truncated continuation", "/agent/submit/trc", agentHeaders(sess, false, tid), chunk1[:len(chunk1)-4], 400, "bad_request",
			fmt.Sprintf("at byte offset %d: epilog", len(chunk1)-11)},
		{"undefined method", "/agent/submit/trc", agentHeaders(sess, false, "5eed00000000000000000000000000c2"), undefinedMethod, 400, "bad_request", "at byte offset 2: undefined method id 999"},
		{"float in 1.90 data", "/agent/submit/trc", agentHeaders(sess, false, tid), []byte{0xc9, 0xa1, 0x61, 'k', 0xfa, 0, 0, 0, 0}, 400, "bad_request", "at byte offset 4:"},
		{"garbage agent data", "/agent/submit/agd", agentHeaders(sess, false, ""), []byte{0xc1, 0x83, 0x01, 0x7a, 0xff, 0xff}, 400, "bad_request", "at byte offset 3: truncated"},
		{"bad trace id", "/agent/submit/trc", agentHeaders(sess, false, "xyz"), chunk1, 400, "bad_request", "trace id"},
		{"no session", "/agent/submit/trc", map[string]string{"Content-Type": zorkaCT, "X-Zorka-Trace-ID": tid}, chunk1, 400, "bad_request", "X-Zorka-Session-ID"},
		{"wrong content type", "/agent/submit/trc", map[string]string{"Content-Type": "text/plain", "X-Zorka-Session-ID": sess}, chunk1, 415, "unsupported_media_type", zorkaCT},
		{"empty body", "/agent/submit/trc", agentHeaders(sess, false, tid), nil, 400, "bad_request", "empty"},
	}
	for _, c := range cases {
		r := post(t, hc, c.path, c.headers, c.body)
		code, msg := r.apiErr(t)
		t.Logf("%s: %d %s", c.name, r.status, msg)
		if r.status != c.status || code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: %d %s %q; want %d %s and a message containing %q", c.name, r.status, code, msg, c.status, c.code, c.msg)
		}
		if strings.Contains(c.msg, "offset") && !regexp.MustCompile(`offset \d+`).MatchString(msg) {
			t.Errorf("%s: message names no offset: %q", c.name, msg)
		}
	}
	if after := storeSnapshot(t, d.Client); after != snap {
		t.Fatalf("rejected submissions changed the store:\nbefore\n%s\nafter\n%s", snap, after)
	}

	// The rest of the stream continues the trace, in a new store.
	submit(t, hc, sess, false, tid, chunk1)
	stores := storeCount(t, d.Client)
	if len(stores) != before+1 || stores[len(stores)-1].Spans != 1 {
		t.Fatalf("stores before chunk 1: %d; after: %+v (want one more, holding chunk 1 only)", before, stores)
	}
	sp = getOne(t, d.Client, tid)
	r := sp.Root
	if r.Open || len(r.Children) != 2 || sp.Calls != 3 || sp.Recs != 3 || sp.DurationNS != 400<<16 || sp.ChunkNum != 0 {
		t.Fatalf("assembled span: open %v children %d calls %d recs %d duration %d", r.Open, len(r.Children), sp.Calls, sp.Recs, sp.DurationNS)
	}
	c1, c2 := r.Children[0], r.Children[1]
	if c1.Method != "int org.catalina.request.Request.invoke(int, int)" || c1.StartNS != 10<<16 || c1.DurationNS != 90<<16 ||
		c2.Method != "void com.mysql.Statement.execute(int)" || c2.StartNS != 110<<16 || c2.DurationNS != 90<<16 ||
		attrText(c2.Attrs, "db.statement") != "select 2" {
		t.Errorf("children %+v %+v", c1, c2)
	}
	if out := ctlGet(t, d, tid); strings.Contains(out, "(not finished)") || !strings.Contains(out, "com.mysql.Statement.execute(int)") {
		t.Errorf("ztsctl get of the assembled trace:\n%s", out)
	}
	// The finished stream is closed: its continuation is rejected.
	if r := post(t, hc, "/agent/submit/trc", agentHeaders(sess, false, tid), chunk1); r.status != 400 {
		t.Errorf("continuation of a finished trace: %d %s", r.status, r.body)
	}
}

// TestZorkaTdbStoreBehaviours ports zorka-tdb's store tests (notes §17.1):
// formatting of a simple trace, traces on both sides of a rotation and
// after a restart, child record offsets, exceptions, indexed agent symbols.
func TestZorkaTdbStoreBehaviours(t *testing.T) {
	t.Parallel()
	d := daemontest.New(t, smallStores)
	d.Start()
	hc := socketHTTP(d.Socket)
	const sess = "feedfacecafe0001"
	const idA, idB, idC = "00000000000000420000000000000024", "00000000000000450000000000000025", "00000000000000460000000000000026"
	const clock = 1_700_000_000_000
	agent := newZorkaAgent()

	// testSubmitSimpleTraceAndCheckForFormatting / RotatingSingleTrace: a
	// ref-keyed and a plain-text attribute, ERROR_MARK, calls 42.
	a := &zRec{m: zMyMethod, tstart: 100, tstop: 300, calls: 42, begin: &zBegin{clockMS: clock, spanID: 1},
		flags: zFlagErrorMark, attrs: []string{"URI", "/my/app"}, plainAttrs: []string{"STATUS", "200"}}
	trcA := agent.record(nil, a)
	submit(t, hc, sess, true, "", agent.takeAgentData())
	submit(t, hc, sess, false, idA, trcA)
	spA, err := d.Client.GetSpan(context.Background(), mustTraceID(t, idA), 1)
	if err != nil {
		t.Fatal(err)
	}
	if spA.Root.Method != "void com.myapp.MyClass.myMethod()" || spA.DurationNS != 200<<16 || spA.Root.DurationNS != 200<<16 ||
		spA.Calls != 42 || spA.Recs != 1 || !spA.Error || attrText(spA.Attrs, "URI") != "/my/app" || attrText(spA.Attrs, "STATUS") != "200" {
		t.Errorf("simple trace: method %q duration %d calls %d recs %d error %v attrs %v",
			spA.Root.Method, spA.DurationNS, spA.Calls, spA.Recs, spA.Error, spA.Attrs)
	}
	// AgentStateSubmission: the agent's class and method names reach the
	// text index in the rendered method.
	for _, text := range []string{"com.myapp.MyClass", "myMethod()"} {
		if got := ctlSearch(t, d, "--text", text, "--spans"); len(got) != 1 || got[0].TraceID.String() != idA {
			t.Errorf("search --text %q: %d results", text, len(got))
		}
	}

	// testSubmitSimpleTracesWithRotation: the next trace lands in a new
	// store, after the agent resent its symbols with a reset.
	fillStore(t, d, 2)
	nStores := len(storeCount(t, d.Client))
	agent.reset()
	// testRetrieveTraceAndCheckOffsets: trc2, a root with two children.
	b := &zRec{m: zMyMethod, tstart: 90, tstop: 150, calls: 3, begin: &zBegin{clockMS: clock + 1, spanID: 1}, children: []*zRec{
		{m: zInvoke, tstart: 100, tstop: 120}, {m: zInvoke, tstart: 120, tstop: 140}}}
	trcB := agent.record(nil, b)
	submit(t, hc, sess, true, "", agent.takeAgentData())
	submit(t, hc, sess, false, idB, trcB)
	if got := len(storeCount(t, d.Client)); got != nStores+1 {
		t.Fatalf("%d stores after the rotation, want %d", got, nStores+1)
	}

	// testSubmitSimpleTraceWithException (ignored upstream; its intent).
	c := &zRec{m: zMyMethod, tstart: 0, tstop: 50, begin: &zBegin{clockMS: clock + 2, spanID: 1}, exc: &zExc{
		class: "org.catalina.request.Request", message: "This is error", stack: []zFrame{
			{"com.myapp.MyClass", "myMethod", "MyClass.java", 42},
			{"org.catalina.request.Request", "invoke", "Request.java", 100},
			{"org.catalina.Server", "process", "Server.java", 200}}}}
	trcC := agent.record(nil, c)
	submit(t, hc, sess, false, "", agent.takeAgentData()) // the exception's new symbols
	submit(t, hc, sess, false, idC, trcC)

	checkAll := func() map[string]string {
		t.Helper()
		got := map[string]string{}
		for _, id := range []string{idA, idB, idC} {
			raw, err := d.Client.GetRaw(context.Background(), mustTraceID(t, id), 0)
			if err != nil {
				t.Fatalf("trace %s: %v", id, err)
			}
			got[id] = string(raw)
		}
		spB := getOne(t, d.Client, idB)
		if len(spB.Root.Children) != 2 || spB.Root.Children[0].StartNS != 10<<16 || spB.Root.Children[0].DurationNS != 20<<16 ||
			spB.Root.Children[1].StartNS != 30<<16 || spB.Root.Children[1].DurationNS != 20<<16 || spB.Recs != 3 {
			t.Errorf("trc2 span: %d children %+v", len(spB.Root.Children), spB.Root.Children)
		}
		spC := getOne(t, d.Client, idC)
		x := spC.Root.Exception
		if x == nil || x.Class != "org.catalina.request.Request" || x.Message != "This is error" || len(x.Stack) != 3 ||
			x.Stack[0] != (trace.StackFrame{Class: "com.myapp.MyClass", Method: "myMethod", File: "MyClass.java", Line: 42}) ||
			spC.Errors != 1 || spC.Error { // an exception without ERROR_MARK counts in errors, it is no failure
			t.Errorf("exception span: errors %d error %v exception %+v", spC.Errors, spC.Error, x)
		}
		return got
	}
	before := checkAll()
	out := ctlGet(t, d, idC)
	for _, want := range []string{"!! org.catalina.request.Request: This is error", "at com.myapp.MyClass.myMethod(MyClass.java:42)",
		"at org.catalina.Server.process(Server.java:200)", "ERROR (1 errors)"} {
		if !strings.Contains(out, want) {
			t.Errorf("ztsctl get of the exception trace: no %q in\n%s", want, out)
		}
	}
	// As in ZICO, the error flag comes from ERROR_MARK only: the exception
	// trace (no ERROR_MARK) is not found by --errors.
	errs := ctlSearch(t, d, "--errors", "--spans", "--attr", "source.format=zorka")
	if len(errs) != 1 || errs[0].TraceID.String() != idA {
		t.Errorf("search --errors: %d results, want the ERROR_MARK trace only", len(errs))
	}

	// testSubmitSimpleTracesWithRotationAndReopen: everything is the same
	// after a restart.
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, d.Stderr())
	}
	d.Start()
	after := checkAll()
	for id, raw := range before {
		if after[id] != raw {
			t.Errorf("trace %s changed across the restart:\n%s\n%s", id, raw, after[id])
		}
	}
}

// zorkaTdbSearchFixture is StoreSearchRetrieveUnitTest's setup (notes
// §17.2): trace 0x42/0x24 with root span 1 (http, ≈1.30 s) holding span 2
// (db, "select 1", ≈65 ms), and a second submission with a bare
// TraceBegin for span 3 (parent 1, http attributes).
func zorkaTdbSearchFixture(t *testing.T, d *daemontest.Daemon) string {
	const sess, tid = "5ea2c4000000abcd", "00000000000000420000000000000024"
	hc := socketHTTP(d.Socket)
	agent := newZorkaAgent()
	root := &zRec{m: zMyMethod, tstart: 100, tstop: 20000, calls: 2, begin: &zBegin{clockMS: 1_700_000_000_100, spanID: 1},
		attrs: []string{"component", "http", "http.method", "GET", "http.status_code", "200", "http.url", "http://localhost:8642/my/app"},
		children: []*zRec{{m: zExecute, tstart: 115, tstop: 1115, begin: &zBegin{clockMS: 1_700_000_000_101, spanID: 2},
			attrs: []string{"component", "db", "db.type", "sql", "db.statement", "select 1", "db.instance", "mydb", "db.user", "myuser"}}}}
	trc1 := agent.record(nil, root)
	trc2 := agent.bareBegin(nil, zBegin{clockMS: 1_700_000_000_102, spanID: 3, parentID: 1},
		"component", "http", "http.method", "POST", "http.url", "http://localhost:8642/other")
	submit(t, hc, sess, true, "", agent.takeAgentData())
	submit(t, hc, sess, false, tid, trc1)
	submit(t, hc, sess, false, tid, trc2)
	return tid
}

// TestZorkaTdbSearchBehaviours ports zorka-tdb's search tests (notes
// §17.2) to ztsd's API: a search result is one span (a summary without
// children, newest first); GET ?span= gives the span with its child spans.
func TestZorkaTdbSearchBehaviours(t *testing.T) {
	t.Parallel()
	t.Run("StoreSearchRetrieve", func(t *testing.T) {
		t.Parallel()
		d := daemontest.New(t, "")
		d.Start()
		tid := zorkaTdbSearchFixture(t, d)
		c := d.Client
		ids := func(q client.Query) []trace.SpanID { return spanIDs(searchAll(t, c, q)) }
		eq := func(name string, got []trace.SpanID, want ...trace.SpanID) {
			t.Helper()
			if len(got) != len(want) {
				t.Errorf("%s: spans %v, want %v", name, got, want)
				return
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("%s: spans %v, want %v", name, got, want)
					return
				}
			}
		}
		// testSearchAllChunks: spans mode, limit 10 → 3 spans (newest first).
		eq("all spans", ids(client.Query{Spans: true, Limit: 10}), 3, 2, 1)
		// testCheckParentChildRelationship.
		sp2, err := c.GetSpan(context.Background(), mustTraceID(t, tid), 2)
		if err != nil || sp2.ParentID != 1 || sp2.DurationNS != 1000<<16 || sp2.Root.Method != "void com.mysql.Statement.execute(int)" {
			t.Fatalf("span 2: %+v %v", sp2, err)
		}
		// testSearchAllTraces: one trace (a result's root record, if any, without
		// attributes or children); GET gives root span 1 with child
		// spans 2 and 3 (whole tree, records and all).
		all := searchAll(t, c, client.Query{Limit: 10})
		if len(all) != 1 || all[0].TraceID.String() != tid || len(all[0].Children) != 0 ||
			all[0].Root != nil && (len(all[0].Root.Children) != 0 || all[0].Root.Attrs != nil) {
			t.Fatalf("trace search: %d results %+v", len(all), all)
		}
		tree := getOne(t, c, tid)
		if tree.SpanID != 1 || len(tree.Children) != 2 || tree.Children[0].SpanID != 2 || tree.Children[1].SpanID != 3 ||
			tree.Root == nil || tree.Children[0].Root == nil || tree.Children[1].Root != nil {
			t.Fatalf("GET trace: span %s with %d children", tree.SpanID, len(tree.Children))
		}
		// The child span is cut out of the parent's record tree.
		if len(tree.Root.Children) != 0 || tree.Recs != 1 {
			t.Errorf("root span keeps %d child records (recs %d); span 2 is a span of its own", len(tree.Root.Children), tree.Recs)
		}
		// testListAttrVals.
		vals, err := c.AttributeValues(context.Background(), "component")
		if err != nil || strings.Join(vals, ",") != "db,http" {
			t.Errorf("GET /v1/attributes/component: %v %v, want [db http]", vals, err)
		}
		// testSearchByDuration: ≥ 1 s → only the ≈1.30 s root.
		eq("min duration 1s", ids(client.Query{Spans: true, MinDuration: 1e9}), 1)
		// testSearchByAttrs: component=http → spans 1 and 3.
		eq("component=http", ids(attrQuery(true, "component", "http")), 3, 1)
		// testShallowSearch: component=db is an attribute of span 2 only.
		eq("component=db spans", ids(attrQuery(true, "component", "db")), 2)
		// searchWholeTrees: without spans mode, one result for the trace
		// (ztsd answers with the matching span, span 2) ...
		whole := searchAll(t, c, attrQuery(false, "component", "db"))
		if len(whole) != 1 || whole[0].SpanID != 2 || whole[0].TraceID.String() != tid {
			t.Fatalf("component=db traces: %v", spanIDs(whole))
		}
		// ... searchWholeTreesWithNoChildren: the result carries no
		// children; GET ?span=1 of its trace gives root span 1 with both.
		sp1, err := c.GetSpan(context.Background(), whole[0].TraceID, 1)
		if err != nil || len(sp1.Children) != 2 {
			t.Fatalf("GET ?span=1: %v, %+v", err, sp1)
		}
		out := ctlGet(t, d, tid, "--span", "0000000000000001")
		if !regexp.MustCompile(`(?s)^span 0000000000000001 .*\n  span 0000000000000002 .*\n  span 0000000000000003 `).MatchString(out) {
			t.Errorf("ztsctl get --span 1 does not show spans 2 and 3 nested under it:\n%s", out)
		}
		// searchFreeText: "select 1" → span 2.
		eq("text select 1", ids(client.Query{Spans: true, Text: "select 1"}), 2)
		if got := ctlSearch(t, d, "--text", "select 1", "--spans"); len(got) != 1 || got[0].SpanID != 2 {
			t.Errorf("ztsctl search --text 'select 1': %v", spanIDs(got))
		}
	})
	// TraceSearchUnitTest, with the data in the open store and, archived,
	// in a sealed one.
	for _, archive := range []bool{false, true} {
		name := "TraceSearch/open"
		if archive {
			name = "TraceSearch/archived"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := daemontest.New(t, smallStores)
			d.Start()
			hc := socketHTTP(d.Socket)
			agent := newZorkaAgent()
			mk := func(clock uint64, k1, v1, k2, v2 string) []byte {
				return agent.record(nil, &zRec{m: zMyMethod, tstart: 0, tstop: 100, calls: 2, begin: &zBegin{clockMS: clock, spanID: 1},
					attrs: []string{k1, v1}, children: []*zRec{{m: zInvoke, tstart: 10, tstop: 20, attrs: []string{k2, v2}}}})
			}
			trcA, trcB := mk(1_700_000_000_000, "XXX", "YYY", "AAA", "UVW"), mk(1_700_000_000_001, "XXX", "XYZ", "CCC", "UVW")
			submit(t, hc, "ts", true, "", agent.takeAgentData())
			submit(t, hc, "ts", false, "000000000000000a0000000000000001", trcA)
			submit(t, hc, "ts", false, "000000000000000b0000000000000001", trcB)
			if archive {
				fillStore(t, d, 3)
				fillStore(t, d, 4) // this write rotates: A and B are in a sealed store now
				stores := storeCount(t, d.Client)
				if len(stores) != 2 || stores[0].State != "sealed" || stores[0].Spans != 3 {
					t.Fatalf("stores %+v: want the traces sealed in the first of two", stores)
				}
			}
			c := d.Client
			zq := func(kv ...string) client.Query {
				return attrQuery(true, append([]string{"source.format", "zorka"}, kv...)...)
			}
			// testListAllTracesWithOffset: page 2 of a limit-1 listing.
			q := zq()
			q.Limit = 1
			p1, err := c.SearchPage(context.Background(), q, "")
			if err != nil || len(p1.Spans) != 1 || p1.Cursor == "" {
				t.Fatalf("page 1: %v %+v", err, p1)
			}
			p2, err := c.SearchPage(context.Background(), q, p1.Cursor)
			if err != nil || len(p2.Spans) != 1 || p2.Cursor != "" || p2.Spans[0].TraceID == p1.Spans[0].TraceID {
				t.Fatalf("page 2: %v %+v", err, p2)
			}
			for _, tc := range []struct {
				q    client.Query
				want int
			}{
				{zq("XXX", "XYZ"), 1}, // searchByAttrKV
				{zq("XXX", "xxx"), 0}, // searchByAttrKVWithOffset: a value not in the dictionary
				{zq("XXX", "YYY"), 1},
				{client.Query{Spans: true, Text: "XYZ"}, 1}, // free text
				{client.Query{Spans: true, Text: "YZ"}, 1},  // partial
				{client.Query{Spans: true, Text: "UVW"}, 2}, // deep: child record attributes
			} {
				if got := searchAll(t, c, tc.q); len(got) != tc.want {
					t.Errorf("search %+v: %d results, want %d", tc.q, len(got), tc.want)
				}
			}
			// AAA=UVW is an attribute of a child record: attribute search
			// finds the one span holding that record (zorka-tdb's
			// searchByAttrKV finds record attributes too).
			if got := searchAll(t, c, zq("AAA", "UVW")); len(got) != 1 {
				t.Errorf("record attribute AAA=UVW matched %d spans, want the 1 span holding the record", len(got))
			}
		})
	}
}

// BenchmarkZorkaTraceSubmit measures one agent trace submission (the
// traces1 capture under a fresh trace id each time) through the socket
// into a real daemon, acknowledged once durable (sync = "batch").
func BenchmarkZorkaTraceSubmit(b *testing.B) {
	d := daemontest.New(b, "")
	d.Start()
	hc := socketHTTP(d.Socket)
	body := readSample(b, "zorka", "traces1-1-trc.cbor")
	submit(b, hc, "bench", true, "", readSample(b, "zorka", "traces1-0-agd.cbor"))
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for i := range b.N {
		submit(b, hc, "bench", false, fmt.Sprintf("%032x", i+1), body)
	}
}
