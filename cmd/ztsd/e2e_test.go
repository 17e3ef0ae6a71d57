package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/trace"
)

func marshalLines(t testing.TB, spans []*trace.Span) []byte {
	var buf bytes.Buffer
	for _, sp := range spans {
		b, err := sp.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// singleSpanTraces gives every span a trace of its own, so that GET of the
// trace answers exactly the line that was put.
func singleSpanTraces(spans []*trace.Span) []*trace.Span {
	for i, sp := range spans {
		sp.ParentID = 0
		sp.TraceID[0], sp.TraceID[1], sp.TraceID[2] = byte(i>>16), byte(i>>8), byte(i)
	}
	return spans
}

func toClientQuery(f workload.Filter) client.Query {
	q := client.Query{Attrs: f.Attrs, Text: f.Text, MinDuration: time.Duration(f.MinDurationNS), Errors: f.ErrorsOnly, Spans: true, Limit: 1000}
	if f.SinceNS != 0 {
		q.Since = time.Unix(0, f.SinceNS)
	}
	if f.UntilNS != 0 {
		q.Until = time.Unix(0, f.UntilNS)
	}
	return q
}

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

func checkSearchesMatch(t *testing.T, c *client.Client, spans []*trace.Span) {
	t.Helper()
	for i, f := range workload.Filters(spans) {
		want := workload.Expected(spans, f)
		got := searchAll(t, c, toClientQuery(f))
		if len(got) != len(want) {
			t.Fatalf("filter %d %+v: %d results, brute force %d", i, f, len(got), len(want))
		}
		for j := range want {
			if got[j].TraceID != want[j].TraceID || got[j].SpanID != want[j].SpanID {
				t.Fatalf("filter %d result %d: got %s/%s, want %s/%s", i, j, got[j].TraceID, got[j].SpanID, want[j].TraceID, want[j].SpanID)
			}
		}
	}
}

// TestPutGetSearchThroughCLI: 10,000 spans put with `ztsctl put`, each read
// back byte for byte, searches equal to a brute-force filter.
func TestPutGetSearchThroughCLI(t *testing.T) {
	d := daemontest.New(t, `sync = "batch"`)
	d.Start()
	spans := singleSpanTraces(workload.Spans(11, 10_000))
	lines := marshalLines(t, spans)
	file := filepath.Join(d.Dir, "spans.jsonl")
	os.WriteFile(file, lines, 0o644)
	_, stderr, code := d.Ctl(nil, "put", file)
	if code != 0 {
		t.Fatalf("ztsctl put: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "stored 10000 spans") {
		t.Fatalf("ztsctl put said %q", stderr)
	}
	want := bytes.Split(bytes.TrimSuffix(lines, []byte("\n")), []byte("\n"))
	ctx := context.Background()
	for i, sp := range spans {
		raw, err := d.Client.GetRaw(ctx, sp.TraceID, 0)
		if err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
		if !bytes.Equal(bytes.TrimSuffix(raw, []byte("\n")), want[i]) {
			t.Fatalf("span %d differs:\n got %s\nwant %s", i, raw, want[i])
		}
	}
	// A sample through the CLI too.
	for i := 0; i < len(spans); i += 2000 {
		out, stderr, code := d.Ctl(nil, "get", "--json", spans[i].TraceID.String())
		if code != 0 || strings.TrimSpace(out) != string(want[i]) {
			t.Fatalf("ztsctl get --json %d: exit %d %s\n%s", i, code, stderr, out)
		}
		out, _, code = d.Ctl(nil, "get", spans[i].TraceID.String())
		if code != 0 || !strings.Contains(out, spans[i].Root.Method) || !strings.Contains(out, spans[i].SpanID.String()) {
			t.Fatalf("ztsctl get tree %d: exit %d\n%s", i, code, out)
		}
	}
	checkSearchesMatch(t, d.Client, spans)
	// The CLI's search agrees with the brute force on an attribute query.
	f := workload.Filter{Attrs: []trace.Attr{{Key: "user.id", Value: trace.String("user-7")}}}
	exp := workload.Expected(spans, f)
	out, stderr, code := d.Ctl(nil, "search", "--attr", "user.id=user-7", "--spans", "--limit", "1000", "--json")
	if code != 0 && len(exp) > 0 {
		t.Fatalf("ztsctl search: exit %d %s", code, stderr)
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	if len(exp) == 0 || len(got) != len(exp) {
		t.Fatalf("ztsctl search: %d lines, brute force %d", len(got), len(exp))
	}
	out, _, code = d.Ctl(nil, "search", "--text", "no such text at all")
	if code != 1 {
		t.Fatalf("search without results: exit %d, want 1 (%s)", code, out)
	}
	out, _, code = d.Ctl(nil, "get", "00000000000000000000000000000abc")
	if code != 1 {
		t.Fatalf("get of an unknown trace: exit %d, want 1", code)
	}
	_, _, code = d.Ctl(nil, "search", "--min-duration", "fast")
	if code != 2 {
		t.Fatalf("bad flag value: exit %d, want 2", code)
	}
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, d.Stderr())
	}
}

// TestConcurrentWritersAndSearchers: 16 writers and 4 searchers; no error,
// no lost or duplicated span.
func TestConcurrentWritersAndSearchers(t *testing.T) {
	d := daemontest.New(t, `sync = "batch"`)
	d.Start()
	spans := workload.Spans(12, 16*300)
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	stop := make(chan struct{})
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := client.New(d.Socket)
			defer c.Close()
			mine := spans[w*300 : (w+1)*300]
			for i := 0; i < len(mine); i += 10 {
				var err error
				if w%2 == 0 {
					err = c.Put(context.Background(), mine[i:i+10]...)
				} else {
					err = c.PutCBOR(context.Background(), mine[i:i+10]...)
				}
				if err != nil {
					errc <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		}(w)
	}
	var swg sync.WaitGroup
	for s := 0; s < 4; s++ {
		swg.Add(1)
		go func(s int) {
			defer swg.Done()
			c := client.New(d.Socket)
			defer c.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				q := client.Query{Attrs: []trace.Attr{{Key: "service.name", Value: trace.String("cart")}}, Limit: 50, Spans: s%2 == 0}
				if _, err := c.SearchPage(context.Background(), q, ""); err != nil {
					errc <- fmt.Errorf("searcher %d: %w", s, err)
					return
				}
			}
		}(s)
	}
	wg.Wait()
	close(stop)
	swg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	// Every span once: the full spans-mode listing equals the workload.
	all := searchAll(t, d.Client, client.Query{Spans: true, Limit: 1000})
	if len(all) != len(spans) {
		t.Fatalf("%d spans stored, %d written", len(all), len(spans))
	}
	seen := map[string]bool{}
	for _, sp := range all {
		k := sp.TraceID.String() + sp.SpanID.String()
		if seen[k] {
			t.Fatalf("span %s duplicated", k)
		}
		seen[k] = true
	}
	for _, sp := range spans {
		if !seen[sp.TraceID.String()+sp.SpanID.String()] {
			t.Fatalf("span %s/%s lost", sp.TraceID, sp.SpanID)
		}
	}
}

func metric(t testing.TB, c *client.Client, name string) float64 {
	t.Helper()
	text, err := c.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("metric %s missing", name)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestSyncPolicies: batch shares fsyncs among concurrent requests; always
// syncs once per request.
func TestSyncPolicies(t *testing.T) {
	for _, policy := range []string{"batch", "always"} {
		t.Run(policy, func(t *testing.T) {
			d := daemontest.New(t, fmt.Sprintf("sync = %q", policy))
			d.Start()
			spans := workload.Spans(13, 32*20)
			var wg sync.WaitGroup
			for w := 0; w < 32; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					c := client.New(d.Socket)
					defer c.Close()
					for i := 0; i < 20; i++ {
						if err := c.Put(context.Background(), spans[w*20+i]); err != nil {
							t.Error(err)
							return
						}
					}
				}(w)
			}
			wg.Wait()
			reqs := metric(t, d.Client, "ztsd_ingest_requests_total")
			// The committer reports a group (its fsyncs) after answering
			// its requests: wait until every request's group is counted.
			for deadline := time.Now().Add(10 * time.Second); metric(t, d.Client, "ztsd_commit_requests_total") < reqs && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			fsyncs := metric(t, d.Client, "ztsd_fsyncs_total")
			if running := metric(t, d.Client, "ztsd_index_compactions_running"); running < 0 {
				t.Fatalf("ztsd_index_compactions_running %v", running)
			}
			t.Logf("sync=%s: %v requests, %v fsyncs", policy, reqs, fsyncs)
			if reqs != 640 {
				t.Fatalf("%v requests counted, want 640", reqs)
			}
			switch policy {
			case "batch":
				if fsyncs > reqs/3 {
					t.Fatalf("sync=batch: %v fsyncs for %v concurrent requests; want far fewer", fsyncs, reqs)
				}
			case "always":
				if fsyncs != reqs {
					t.Fatalf("sync=always: %v fsyncs for %v requests; want one each", fsyncs, reqs)
				}
			}
		})
	}
}

type rawResp struct {
	status int
	body   string
}

func rawRequest(t testing.TB, socket, method, path, ctype string, body io.Reader) rawResp {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	req, _ := http.NewRequest(method, "http://ztsd"+path, body)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawResp{resp.StatusCode, string(b)}
}

// TestBadRequestsChangeNothing: each bad request gets its status and a
// clear JSON error, and the store's contents are unchanged.
func TestBadRequestsChangeNothing(t *testing.T) {
	d := daemontest.New(t, "[limits]\nmax_body_size = \"64KiB\"\nmax_string_size = \"16KiB\"\nmax_traces_per_request = 50")
	d.Start()
	spans := workload.Spans(14, 40)
	if err := d.Client.Put(context.Background(), spans...); err != nil {
		t.Fatal(err)
	}
	snapshot := func() string {
		all := searchAll(t, d.Client, client.Query{Spans: true, Limit: 1000})
		var b strings.Builder
		for _, sp := range all {
			j, _ := trace.MarshalSummaryJSON(sp)
			b.Write(j)
		}
		return b.String()
	}
	before := snapshot()
	good := string(marshalLines(t, workload.Spans(15, 1)))
	cbor, _ := trace.EncodeChunk(nil, workload.Spans(16, 2))
	var bigAttrs []string
	for i := 0; i < 10; i++ {
		bigAttrs = append(bigAttrs, fmt.Sprintf("%q:%q", fmt.Sprintf("a%d", i), strings.Repeat("x", 10000)))
	}
	big := `{"trace_id":"0102030405060708090a0b0c0d0e0f10","attrs":{` + strings.Join(bigAttrs, ",") + "}}\n"
	many := string(marshalLines(t, workload.Spans(17, 60)))
	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		code, msg                       string
	}{
		{"malformed JSON", "POST", "/v1/traces", "application/x-ndjson", good + `{"trace_id": "00`, 400, "bad_request", "line 2"},
		{"unknown field", "POST", "/v1/traces", "application/x-ndjson", `{"trace_id":"0102030405060708090a0b0c0d0e0f10","bogus":1}`, 400, "bad_request", "bogus"},
		{"bad trace id", "POST", "/v1/traces", "application/x-ndjson", `{"trace_id":"xyz"}`, 400, "bad_request", "trace"},
		{"truncated CBOR", "POST", "/v1/traces", "application/cbor", string(cbor[:len(cbor)-5]), 400, "bad_request", "CBOR"},
		{"garbage CBOR", "POST", "/v1/traces", "application/cbor", "\xff\xfe\xfd", 400, "bad_request", "CBOR"},
		{"oversized body", "POST", "/v1/traces", "application/x-ndjson", big, 413, "too_large", "too large"},
		{"too many spans", "POST", "/v1/traces", "application/x-ndjson", many, 413, "too_large", "more than 50"},
		{"no content type", "POST", "/v1/traces", "", good, 415, "unsupported_media_type", "Content-Type"},
		{"empty body", "POST", "/v1/traces", "application/x-ndjson", "", 400, "bad_request", "no spans"},
		{"unknown trace", "GET", "/v1/traces/0102030405060708090a0b0c0d0e0fff", "", "", 404, "not_found", "not found"},
		{"bad trace id in path", "GET", "/v1/traces/nothex", "", "", 400, "bad_request", "trace id"},
		{"bad span param", "GET", "/v1/traces/0102030405060708090a0b0c0d0e0fff?span=zz", "", "", 400, "bad_request", "span"},
		{"bad limit", "GET", "/v1/search?limit=-1", "", "", 400, "bad_request", "limit"},
		{"bad min_duration", "GET", "/v1/search?min_duration=soon", "", "", 400, "bad_request", "min_duration"},
		{"bad since", "GET", "/v1/search?since=yesterday", "", "", 400, "bad_request", "since"},
		{"bad attr", "GET", "/v1/search?attr=novalue", "", "", 400, "bad_request", "attr"},
		{"unknown parameter", "GET", "/v1/search?colour=red", "", "", 400, "bad_request", "colour"},
		{"bad cursor", "GET", "/v1/search?cursor=abc", "", "", 400, "bad_request", "cursor"},
		{"unknown endpoint", "GET", "/v2/nothing", "", "", 404, "not_found", "no endpoint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rawRequest(t, d.Socket, c.method, c.path, c.ctype, strings.NewReader(c.body))
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			var e struct{ Error, Code string }
			if err := json.Unmarshal([]byte(r.body), &e); err != nil {
				t.Fatalf("error body is not JSON: %q", r.body)
			}
			if e.Code != c.code || !strings.Contains(strings.ToLower(e.Error), strings.ToLower(c.msg)) {
				t.Fatalf("error %+v; want code %s and a message mentioning %q", e, c.code, c.msg)
			}
		})
	}
	if after := snapshot(); after != before {
		t.Fatal("bad requests changed the store's contents")
	}
}

// TestSIGTERMUnderLoadLosesNothing: every acknowledged span is readable
// after a SIGTERM during load and a restart.
func TestSIGTERMUnderLoadLosesNothing(t *testing.T) {
	d := daemontest.New(t, `sync = "batch"`)
	d.Start()
	spans := workload.Spans(19, 8*2000)
	var mu sync.Mutex
	var acked []*trace.Span
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := client.New(d.Socket)
			defer c.Close()
			mine := spans[w*2000 : (w+1)*2000]
			for i := 0; i < len(mine); i += 20 {
				if err := c.Put(context.Background(), mine[i:i+20]...); err != nil {
					return // the daemon is going away
				}
				mu.Lock()
				acked = append(acked, mine[i:i+20]...)
				mu.Unlock()
			}
		}(w)
	}
	time.Sleep(300 * time.Millisecond)
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM exit: %v\n%s", err, d.Stderr())
	}
	wg.Wait()
	if len(acked) == 0 || len(acked) == len(spans) {
		t.Logf("acknowledged %d of %d before SIGTERM", len(acked), len(spans))
	}
	d.Start()
	for _, sp := range acked {
		if _, err := d.Client.GetSpan(context.Background(), sp.TraceID, sp.SpanID); err != nil {
			t.Fatalf("acknowledged span %s/%s lost: %v", sp.TraceID, sp.SpanID, err)
		}
	}
	t.Logf("%d acknowledged spans all readable after restart", len(acked))
}

// TestSIGHUPAppliesRetention: a new retention limit takes effect on reload.
func TestSIGHUPAppliesRetention(t *testing.T) {
	d := daemontest.New(t, "[store]\nmax_store_size = \"32KiB\"\nchunk_target_size = \"8KiB\"")
	d.Start()
	spans := workload.Spans(20, 3000)
	for i := 0; i < len(spans); i += 100 {
		if err := d.Client.Put(context.Background(), spans[i:i+100]...); err != nil {
			t.Fatal(err)
		}
	}
	stores, _ := d.Client.Stores(context.Background())
	if len(stores) < 4 {
		t.Fatalf("want ≥ 4 stores before retention, got %d", len(stores))
	}
	d.WriteConfig("[store]\nmax_store_size = \"32KiB\"\nchunk_target_size = \"8KiB\"\n[retention]\nmax_stores = 2")
	d.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		stores, _ = d.Client.Stores(context.Background())
		if len(stores) == 2 && strings.Contains(d.Stderr(), "reload: applied") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SIGHUP: %d stores, want 2\n%s", len(stores), d.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(d.Stderr(), "retention.max_stores") {
		t.Fatalf("reload should log what changed:\n%s", d.Stderr())
	}
}

// TestSocketActivation passes a listening socket the way systemd does
// (fd 3, LISTEN_FDS=1, LISTEN_PID) and serves through it.
func TestSocketActivation(t *testing.T) {
	d := daemontest.New(t, "")
	l, err := net.Listen("unix", d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	f, err := l.(*net.UnixListener).File()
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	bin := filepath.Join(daemontest.Binaries(t), "ztsd")
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" --config "$1"`, bin, d.Config)
	cmd.ExtraFiles = []*os.File{f}
	d.StartCmd(cmd)
	f.Close()
	if err := d.Client.Put(context.Background(), workload.Spans(21, 5)...); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Stderr(), "passed by the service manager") {
		t.Fatalf("the daemon did not use the inherited socket:\n%s", d.Stderr())
	}
}

// TestSecondDaemonRefused: the data directory's lock and a live socket
// stop a second daemon with a clear error.
func TestSecondDaemonRefused(t *testing.T) {
	d := daemontest.New(t, "")
	d.Start()
	out, err := exec.Command(filepath.Join(daemontest.Binaries(t), "ztsd"), "--config", d.Config).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "locked") {
		t.Fatalf("second daemon: err %v, output %s", err, out)
	}
	// Same socket, other data dir: the socket answers, so it is not stale.
	out, err = exec.Command(filepath.Join(daemontest.Binaries(t), "ztsd"), "--config", d.Config,
		"--data-dir", filepath.Join(d.Dir, "other")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another daemon is answering") {
		t.Fatalf("second daemon on a live socket: err %v, output %s", err, out)
	}
}

// TestSystemdUnitVerifies runs systemd-analyze verify on the unit files
// where systemd is installed.
func TestSystemdUnitVerifies(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (.ci/run installs it)")
	}
	bin := daemontest.Binaries(t)
	dir := t.TempDir()
	// The unit names /usr/local/bin/ztsd; verify needs the binary to exist
	// at ExecStart's path, so verify a copy that points at the built one.
	unit, err := os.ReadFile("../../deploy/ztsd.service")
	if err != nil {
		t.Fatal(err)
	}
	unit = bytes.ReplaceAll(unit, []byte("/usr/local/bin/ztsd"), []byte(filepath.Join(bin, "ztsd")))
	os.WriteFile(filepath.Join(dir, "ztsd.service"), unit, 0o644)
	sock, _ := os.ReadFile("../../deploy/ztsd.socket")
	os.WriteFile(filepath.Join(dir, "ztsd.socket"), sock, 0o644)
	out, err := exec.Command(sa, "verify", filepath.Join(dir, "ztsd.service"), filepath.Join(dir, "ztsd.socket")).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	if len(bytes.TrimSpace(out)) > 0 {
		t.Logf("systemd-analyze verify said:\n%s", out)
	}
}
