package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// samples are read in place; cmd/ztsctl is two levels below the module.
const samples = "../../../shared/testdata"

// fakeDaemon serves GET /v1/traces/{id} and GET /v1/search over a unix
// socket from spans held in memory, as the real daemon answers them:
// each root span of a trace on one line, child spans nested in "spans".
type fakeDaemon struct {
	socket string
	order  []trace.TraceID // newest first
	raw    map[trace.TraceID][]byte
	sum    map[trace.TraceID][]byte

	mu      sync.Mutex
	queries []url.Values
	gets    int
}

func newFakeDaemon(t *testing.T, spans []*trace.Span) *fakeDaemon {
	t.Helper()
	d := &fakeDaemon{raw: map[trace.TraceID][]byte{}, sum: map[trace.TraceID][]byte{}}
	byTrace := map[trace.TraceID][]*trace.Span{}
	for _, sp := range spans {
		if _, ok := byTrace[sp.TraceID]; !ok {
			d.order = append(d.order, sp.TraceID)
		}
		byTrace[sp.TraceID] = append(byTrace[sp.TraceID], sp)
	}
	slices.Reverse(d.order)
	for id, ss := range byTrace {
		var buf bytes.Buffer
		roots := trace.AssembleTree(ss)
		for _, r := range roots {
			b, err := r.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			buf.Write(b)
			buf.WriteByte('\n')
		}
		d.raw[id] = buf.Bytes()
		if d.sum[id], _ = trace.MarshalSummaryJSON(roots[0]); d.sum[id] == nil {
			t.Fatal("summary")
		}
		for _, sp := range ss {
			sp.Children = nil // as imported, for comparisons
		}
	}

	d.socket = filepath.Join(t.TempDir(), "ztsd.sock")
	ln, err := net.Listen("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/traces/{id}", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.gets++
		d.mu.Unlock()
		id, err := trace.ParseTraceID(r.PathValue("id"))
		raw, ok := d.raw[id]
		if err != nil || !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"error":"trace %s not found","code":"not_found"}`, r.PathValue("id"))
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Write(raw)
	})
	mux.HandleFunc("GET /v1/search", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		d.mu.Lock()
		d.queries = append(d.queries, q)
		d.mu.Unlock()
		limit, _ := strconv.Atoi(q.Get("limit"))
		start, _ := strconv.Atoi(q.Get("cursor"))
		var match []trace.TraceID
		for _, id := range d.order {
			if q.Get("text") == "none" {
				break
			}
			match = append(match, id)
		}
		end := min(start+limit, len(match))
		var resp struct {
			Results []json.RawMessage `json:"results"`
			Cursor  string            `json:"cursor,omitempty"`
		}
		resp.Results = []json.RawMessage{}
		for _, id := range match[start:end] {
			resp.Results = append(resp.Results, d.sum[id])
		}
		if end < len(match) {
			resp.Cursor = strconv.Itoa(end)
		}
		json.NewEncoder(w).Encode(resp)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return d
}

// ztsctl runs the CLI against the fake daemon.
func (d *fakeDaemon) ztsctl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"--socket", d.socket}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// importSample decodes a sample with the importer import uses.
func importSample(t *testing.T, format, rel string) []*trace.Span {
	t.Helper()
	var spans []*trace.Span
	_, err := importers[format](context.Background(), filepath.Join(samples, rel), ingest.Options{},
		func(sp *trace.Span) error { spans = append(spans, sp); return nil })
	if err != nil {
		t.Fatalf("import %s: %v", rel, err)
	}
	return spans
}

// The acceptance test's export side: export --format json, then import
// --format json's decoder, gives back every span of every sample format
// unchanged.
func TestExportJSONRoundTrip(t *testing.T) {
	cases := []struct{ format, file string }{
		{"zorka", "zorka/zico-testdata-traces1.txt"},
		{"zorka", "zorka/zico-2-testdata-traces1.txt"},
		{"wtf", "wtf/cff-js-node.wtf-trace"},
		{"wtf", "wtf/cff-js-node.wtf-json"},
		{"wtf", "wtf/cff-cpp-bindings.wtf-trace"},
		{"wtf", "wtf/legacy-json-combined-1.wtf-json"},
		{"wtf", "wtf/legacy-json-deeply-nested.wtf-json"},
		{"wtf", "wtf/legacy-json-out-of-order.wtf-json"},
		{"dial9", "dial9/demo-2026-03-18-small.bin"},
		{"atf", "atf/clean"},
		{"atf", "atf/crashed"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			spans := importSample(t, tc.format, tc.file)
			d := newFakeDaemon(t, spans)
			out := filepath.Join(t.TempDir(), "export.jsonl")
			code, _, stderr := d.ztsctl(t, "export", "--format", "json", "--search", "-o", out)
			if code != 0 {
				t.Fatalf("export exited %d: %s", code, stderr)
			}
			if want := fmt.Sprintf("exported %d traces as json", len(d.order)); !strings.Contains(stderr, want) {
				t.Errorf("stderr %q lacks %q", stderr, want)
			}
			var back []*trace.Span
			sum, err := importJSON(context.Background(), out, ingest.Options{}, func(sp *trace.Span) error {
				back = append(back, sp)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Events != int64(len(spans)) || len(back) != len(spans) {
				t.Fatalf("imported %d spans (%d events) back, exported %d", len(back), sum.Events, len(spans))
			}
			key := func(sp *trace.Span) string {
				return sp.TraceID.String() + "/" + sp.SpanID.String() + "/" + strconv.Itoa(int(sp.ChunkNum))
			}
			want := map[string][]*trace.Span{}
			for _, sp := range spans {
				want[key(sp)] = append(want[key(sp)], sp)
			}
			for _, sp := range back {
				cands := want[key(sp)]
				i := slices.IndexFunc(cands, sp.Equal)
				if i < 0 {
					diff := "no span with that id"
					if len(cands) > 0 {
						diff = trace.Diff(cands[0], sp)
					}
					t.Fatalf("span %s came back changed: %s", key(sp), diff)
				}
				want[key(sp)] = slices.Delete(cands, i, i+1)
			}
			t.Logf("%d traces, %d spans, %d records round-tripped", sum.Traces, len(back), sum.Records)
		})
	}
}

func TestExportChromeAndSVGByID(t *testing.T) {
	spans := importSample(t, "dial9", "dial9/demo-2026-03-18-small.bin")
	d := newFakeDaemon(t, spans)
	// The trace with the most spans (an active period with its polls).
	var id trace.TraceID
	most := 0
	count := map[trace.TraceID]int{}
	records := map[trace.TraceID]int64{}
	for _, sp := range spans {
		count[sp.TraceID]++
		records[sp.TraceID] += sp.Root.CountRecords()
		if count[sp.TraceID] > most {
			id, most = sp.TraceID, count[sp.TraceID]
		}
	}
	other := d.order[0]
	if other == id {
		other = d.order[1]
	}

	code, stdout, stderr := d.ztsctl(t, "export", "--format", "chrome", id.String(), other.String(), id.String())
	if code != 0 {
		t.Fatalf("chrome export exited %d: %s", code, stderr)
	}
	var doc struct {
		TraceEvents []struct {
			Ph string `json:"ph"`
		} `json:"traceEvents"`
		OtherData struct {
			Traces, Spans, Records int64
		} `json:"otherData"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("chrome output: %v", err)
	}
	x := 0
	for _, e := range doc.TraceEvents {
		if e.Ph == "X" {
			x++
		}
	}
	wantRecs := records[id] + records[other]
	if int64(x) != wantRecs || doc.OtherData.Records != wantRecs || doc.OtherData.Traces != 2 {
		t.Errorf("chrome: %d X events, otherData %+v; want %d records of 2 traces (the repeated id once)", x, doc.OtherData, wantRecs)
	}

	out := filepath.Join(t.TempDir(), "trace.svg")
	code, stdout, stderr = d.ztsctl(t, "export", "--format", "svg", "--width", "900", "--title", "poll <&>", "-o", out, id.String())
	if code != 0 || stdout != "" {
		t.Fatalf("svg export exited %d: %s (stdout %d bytes)", code, stderr, len(stdout))
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	groups := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("svg output: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "g" {
			for _, a := range se.Attr {
				if a.Name.Local == "class" && strings.HasPrefix(a.Value, "r") {
					groups++
				}
			}
		}
	}
	if int64(groups) != records[id] || !bytes.Contains(data, []byte(`width="900"`)) || !bytes.Contains(data, []byte("poll &lt;&amp;&gt;")) {
		t.Errorf("svg draws %d records (want %d), width 900 %v, title escaped %v", groups, records[id],
			bytes.Contains(data, []byte(`width="900"`)), bytes.Contains(data, []byte("poll &lt;&amp;&gt;")))
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestExportSearchQuery(t *testing.T) {
	spans := importSample(t, "wtf", "wtf/cff-cpp-bindings.wtf-trace")
	d := newFakeDaemon(t, spans)
	code, stdout, stderr := d.ztsctl(t, "export", "--search", "--attr", "thread=1:Worker", "--attr", "x=y=z",
		"--text", "Loop", "--min-duration", "5ms", "--errors", "--since", "1700000000000000000",
		"--until", "2024-01-02T03:04:05Z", "--limit", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := strings.Count(stdout, "\n"); n != 3 {
		t.Errorf("--limit 3 exported %d lines", n)
	}
	q := d.queries[0]
	want := url.Values{
		"attr": {"thread:1:Worker", "x:y=z"}, "text": {"Loop"}, "min_duration": {"5000000"}, "errors": {"true"},
		"since": {"1700000000000000000"}, "until": {"1704164645000000000"}, "limit": {"3"},
	}
	if q.Encode() != want.Encode() {
		t.Errorf("search query\n got %s\nwant %s", q.Encode(), want.Encode())
	}

	// Without --limit every match is exported, following the cursor.
	d.queries = nil
	code, stdout, _ = d.ztsctl(t, "export", "--search")
	if code != 0 || strings.Count(stdout, "\n") != len(d.order) || len(d.queries) != 1 || d.queries[0].Get("limit") != "100" {
		t.Errorf("export --search: exit %d, %d lines for %d traces, queries %v", code, strings.Count(stdout, "\n"), len(d.order), d.queries)
	}
}

func TestExportErrors(t *testing.T) {
	spans := importSample(t, "wtf", "wtf/cff-cpp-bindings.wtf-trace")
	d := newFakeDaemon(t, spans)
	id := d.order[0].String()
	dir := t.TempDir()
	out := filepath.Join(dir, "out.json")
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no ids", []string{"export"}, exitUsage, "needs TRACE_IDs or --search"},
		{"bad format", []string{"export", "--format", "pdf", id}, exitUsage, `--format "pdf"`},
		{"bad id", []string{"export", "xyz"}, exitUsage, "trace id"},
		{"ids and search", []string{"export", "--search", id}, exitUsage, "not both"},
		{"query without search", []string{"export", "--errors", "--text", "x", id}, exitUsage, "--text, --errors only apply with --search"},
		{"bad attr", []string{"export", "--search", "--attr", "novalue"}, exitUsage, "want key:value or key=value"},
		{"bad duration", []string{"export", "--search", "--min-duration", "soon"}, exitUsage, "--min-duration"},
		{"bad since", []string{"export", "--search", "--since", "yesterday"}, exitUsage, "--since"},
		{"negative limit", []string{"export", "--search", "--limit", "-1"}, exitUsage, "--limit"},
		{"svg of two", []string{"export", "--format", "svg", id, d.order[1].String()}, exitUsage, "one trace"},
		{"svg of a search", []string{"export", "--format", "svg", "--search", "-o", out}, exitUsage, "--limit 1"},
		{"svg width", []string{"export", "--format", "svg", "--width", "10", "-o", out, id}, exitUsage, "--width 10"},
		{"svg max records", []string{"export", "--format", "svg", "--max-records", "0", "-o", out, id}, exitUsage, "--max-records 0"},
		{"unknown trace", []string{"export", "-o", out, id, "0123456789abcdef0123456789abcdef"}, exitNotFound, "not found"},
		{"no match", []string{"export", "--search", "--text", "none", "-o", out}, exitNotFound, "no traces match"},
		{"svg no match", []string{"export", "--format", "svg", "--search", "--text", "none", "-o", out}, exitNotFound, "no traces match"},
		{"output dir missing", []string{"export", "-o", filepath.Join(dir, "nope", "x.json"), id}, exitFailure, "--output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := d.ztsctl(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, tc.code, tc.msg)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 0 {
				t.Errorf("failed export left files: %v", entries)
			}
		})
	}
	// --limit 1 draws the newest match.
	code, stdout, stderr := d.ztsctl(t, "export", "--format", "svg", "--search", "--limit", "1")
	if code != 0 || !strings.Contains(stdout, "trace "+d.order[0].String()) {
		t.Errorf("svg --search --limit 1: exit %d %s", code, stderr)
	}
}

// TestErrorTrailerFailsTheCommand: when the daemon's answer ends in an
// error trailer (it failed after the first line), get --json and export
// --format json exit 3 and write nothing as data.
func TestErrorTrailerFailsTheCommand(t *testing.T) {
	spans := importSample(t, "wtf", "wtf/cff-cpp-bindings.wtf-trace")
	d := newFakeDaemon(t, spans)
	bad := d.order[1]
	d.raw[bad] = append(append([]byte(nil), d.raw[bad]...), `{"error":"trace json: chunk 3 unreadable","code":"internal","status":500}`+"\n"...)
	code, stdout, stderr := d.ztsctl(t, "get", bad.String(), "--json")
	if code != exitFailure || stdout != "" || !strings.Contains(stderr, "chunk 3 unreadable") {
		t.Errorf("get --json: exit %d, stdout %q, stderr %q; want exit %d, nothing printed", code, stdout, stderr, exitFailure)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "all.jsonl")
	code, _, stderr = d.ztsctl(t, "export", "--format", "json", "--search", "-o", out)
	if code != exitFailure || !strings.Contains(stderr, "chunk 3 unreadable") || strings.Contains(stderr, "exported") {
		t.Errorf("export: exit %d, stderr %q; want exit %d", code, stderr, exitFailure)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed export left files: %v", entries)
	}
	code, stdout, _ = d.ztsctl(t, "export", "--format", "json", "--search")
	if code != exitFailure || strings.Contains(stdout, `"error"`) {
		t.Errorf("export to stdout: exit %d, error line written as data: %v", code, strings.Contains(stdout, `"error"`))
	}
}
