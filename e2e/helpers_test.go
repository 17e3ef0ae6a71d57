package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/trace"
)

// testdataDir is the shared sample directory, relative to this package.
const testdataDir = "../../shared/testdata"

// sample names a file or directory under testdataDir.
func sample(parts ...string) string {
	return filepath.Join(append([]string{testdataDir}, parts...)...)
}

// socketHTTP is an HTTP client that dials the daemon's unix socket.
func socketHTTP(socket string) *http.Client {
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}
}

// response is an HTTP answer, read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

// apiErr decodes the daemon's JSON error body.
func (r response) apiErr(t testing.TB) (code, msg string) {
	t.Helper()
	var e struct{ Error, Code string }
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("status %d: error body is not JSON: %q", r.status, r.body)
	}
	return e.Code, e.Error
}

// post sends body to path on the daemon's socket with the given headers
// (Content-Type among them).
func post(t testing.TB, hc *http.Client, path string, header map[string]string, body []byte) response {
	t.Helper()
	return send(t, hc, http.MethodPost, "http://ztsd"+path, header, body)
}

func send(t testing.TB, hc *http.Client, method, url string, header map[string]string, body []byte) response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// importSummary is one JSON line printed by `ztsctl import`.
type importSummary struct {
	Format   string         `json:"format"`
	Source   string         `json:"source"`
	Events   int64          `json:"events"`
	Traces   int64          `json:"traces"`
	Records  int64          `json:"records"`
	Warnings []string       `json:"warnings"`
	Details  map[string]any `json:"details"`
}

// parseSummaries reads the JSON lines `ztsctl import` printed; numbers in
// Details stay json.Number so that counts compare exactly.
func parseSummaries(t testing.TB, out string) []importSummary {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var sums []importSummary
	for dec.More() {
		var s importSummary
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("import summary %d: %v\n%s", len(sums)+1, err, out)
		}
		sums = append(sums, s)
	}
	return sums
}

// ctlImport runs `ztsctl import args...`, which must succeed, and returns
// its summaries.
func ctlImport(t testing.TB, d *daemontest.Daemon, args ...string) []importSummary {
	t.Helper()
	t0 := time.Now()
	out, stderr, code := d.Ctl(nil, append([]string{"import"}, args...)...)
	took := time.Since(t0)
	if code != 0 {
		t.Fatalf("ztsctl import %v: exit %d\n%s\n%s", args, code, stderr, out)
	}
	sums := parseSummaries(t, out)
	var size, events, traces int64
	var names []string
	for _, s := range sums {
		if fi, err := os.Stat(s.Source); err == nil && !fi.IsDir() {
			size += fi.Size()
		}
		events += s.Events
		traces += s.Traces
		names = append(names, filepath.Base(s.Source))
	}
	t.Logf("ztsctl import %s: %d events, %d traces from %.1f MB in %v (%.1f MB/s, %.0f events/s)", strings.Join(names, " "),
		events, traces, float64(size)/1e6, took.Round(time.Millisecond), float64(size)/1e6/took.Seconds(), float64(events)/took.Seconds())
	return sums
}

// ctlSearch runs `ztsctl search args... --json` and returns the results;
// exit 1 (no results) gives none.
func ctlSearch(t testing.TB, d *daemontest.Daemon, args ...string) []*trace.Span {
	t.Helper()
	out, stderr, code := d.Ctl(nil, append(append([]string{"search"}, args...), "--json")...)
	if code == 1 && strings.TrimSpace(out) == "" {
		return nil
	}
	if code != 0 {
		t.Fatalf("ztsctl search %v: exit %d\n%s", args, code, stderr)
	}
	var spans []*trace.Span
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		sp := new(trace.Span)
		if err := sp.UnmarshalJSON([]byte(line)); err != nil {
			t.Fatalf("ztsctl search %v: line %d: %v\n%s", args, i+1, err, line)
		}
		spans = append(spans, sp)
	}
	return spans
}

// ctlGet runs `ztsctl get args...`, which must succeed, and returns stdout.
func ctlGet(t testing.TB, d *daemontest.Daemon, args ...string) string {
	t.Helper()
	out, stderr, code := d.Ctl(nil, append([]string{"get"}, args...)...)
	if code != 0 {
		t.Fatalf("ztsctl get %v: exit %d\n%s", args, code, stderr)
	}
	return out
}

// searchAll follows the cursor through every page of q.
func searchAll(t testing.TB, c *client.Client, q client.Query) []*trace.Span {
	t.Helper()
	var out []*trace.Span
	it := c.Search(q)
	for it.Next(context.Background()) {
		out = append(out, it.Span())
	}
	if err := it.Err(); err != nil {
		t.Fatalf("search %+v: %v", q, err)
	}
	return out
}

// attrQuery is a query for spans with the given key=value pairs.
func attrQuery(spans bool, kv ...string) client.Query {
	q := client.Query{Spans: spans, Limit: 1000}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Attrs = append(q.Attrs, trace.Attr{Key: kv[i], Value: trace.String(kv[i+1])})
	}
	return q
}

// spanIDs lists the span ids of spans, in order.
func spanIDs(spans []*trace.Span) []trace.SpanID {
	ids := make([]trace.SpanID, len(spans))
	for i, sp := range spans {
		ids[i] = sp.SpanID
	}
	return ids
}

// storeSnapshot describes everything the daemon holds: every span's
// summary, newest first, and the span counts of the stores.
func storeSnapshot(t testing.TB, c *client.Client) string {
	t.Helper()
	var b strings.Builder
	for _, sp := range searchAll(t, c, client.Query{Spans: true, Limit: 1000}) {
		j, err := trace.MarshalSummaryJSON(sp)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	stores, err := c.Stores(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stores {
		fmt.Fprintf(&b, "store %s spans %d traces %d\n", s.ID, s.Spans, s.Traces)
	}
	return b.String()
}

// attrText is a span or record attribute rendered as text ("" if absent).
func attrText(a trace.Attrs, key string) string {
	v, ok := a.Get(key)
	if !ok {
		return ""
	}
	return v.Text()
}

// wantAttrs checks that a holds every key of want with that text value.
func wantAttrs(t testing.TB, where string, a trace.Attrs, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, ok := a.Get(k)
		if !ok || got.Text() != v {
			t.Errorf("%s: attribute %s = %q (present %v), want %q", where, k, got.Text(), ok, v)
		}
	}
}

// num reads a json.Number (or nested map value) from import details.
func num(t testing.TB, v any, path string) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("details %s = %#v, not a number", path, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatalf("details %s = %s: %v", path, n, err)
	}
	return i
}

// detail walks nested maps of import details by key.
func detail(t testing.TB, details map[string]any, keys ...string) any {
	t.Helper()
	var cur any = details
	for i, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("details %s: not an object", strings.Join(keys[:i], "."))
		}
		if cur, ok = m[k]; !ok {
			t.Fatalf("details has no %s", strings.Join(keys[:i+1], "."))
		}
	}
	return cur
}
