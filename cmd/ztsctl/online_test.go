package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/server"
	"github.com/ztsd/ztsd/storedir"
)

// examplesFile is the README's example spans (three traces: checkout at
// T0 with a payment child span, a failed checkout at T0+2.318s, inventory
// at T0+3.907s; T0 = 2026-11-20T09:14:03.127Z).
const examplesFile = "../../examples/spans.jsonl"

// realDaemon serves the real API (server over storedir) on a unix socket.
type realDaemon struct {
	socket string
}

func newRealDaemon(t *testing.T) *realDaemon {
	t.Helper()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(db, server.Options{Access: server.Access{Disabled: true}})
	sock := filepath.Join(t.TempDir(), "z.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	t.Cleanup(func() {
		hs.Close()
		db.Close()
	})
	return &realDaemon{socket: sock}
}

// ctl runs ztsctl against the daemon with the given environment (COLUMNS).
func (d *realDaemon) ctl(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv: func(k string) string { return env[k] }, stat: os.Stat}
	code = a.run(append([]string{"--socket", d.socket}, args...))
	return code, out.String(), errb.String()
}

func (d *realDaemon) mustCtl(t *testing.T, env map[string]string, args ...string) (stdout, stderr string) {
	t.Helper()
	code, out, errOut := d.ctl(t, env, args...)
	if code != 0 {
		t.Fatalf("ztsctl %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out, errOut
}

func withExamples(t *testing.T) *realDaemon {
	d := newRealDaemon(t)
	d.mustCtl(t, nil, "put", examplesFile)
	return d
}

// TestSearchTable (issue 18 point 10): rows name the service and the root
// method, fit the terminal width, and page through --cursor.
func TestSearchTable(t *testing.T) {
	d := withExamples(t)
	out, errOut := d.mustCtl(t, map[string]string{"COLUMNS": "120"}, "search", "--limit", "2")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "START (UTC)") || !strings.Contains(lines[0], "SERVICE") || !strings.Contains(lines[0], "NAME") {
		t.Fatalf("header %q", lines[0])
	}
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > 120 {
			t.Errorf("line of %d columns in a 120-column terminal: %q", n, l)
		}
	}
	// Newest first: inventory, then the failed checkout.
	if !strings.Contains(out, "5b8aa5a2d2c872e8321cf37308d69df2") || !strings.Contains(out, "inventory") ||
		!strings.Contains(out, "GET /stock/{sku}") || !strings.Contains(out, "0af7651916cd43dd8448eb211c80319c") {
		t.Errorf("page 1:\n%s", out)
	}
	m := regexp.MustCompile(`(?m)^more: --cursor (\S+)$`).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("no cursor hint on stderr: %q", errOut)
	}
	out2, errOut2 := d.mustCtl(t, nil, "search", "--limit", "2", "--cursor", m[1])
	if !strings.Contains(out2, "4bf92f3577b34da6a3ce929d0e0e4736") || strings.Contains(out2, "5b8aa5a2d2c872e8321cf37308d69df2") ||
		strings.Contains(errOut2, "more:") {
		t.Errorf("page 2 (the last):\n%s\nstderr %q", out2, errOut2)
	}
	// Piped, with no width known: nothing is cut.
	out3, _ := d.mustCtl(t, nil, "search", "--attr", "service.name=checkout", "--errors")
	if strings.Contains(out3, "…") || !strings.Contains(out3, "http.route=/cart/checkout http.status_code=503 service.name=checkout") ||
		!strings.Contains(out3, "POST /cart/checkout") {
		t.Errorf("piped search:\n%s", out3)
	}
	// A narrow terminal moves the attributes below the row.
	out4, _ := d.mustCtl(t, map[string]string{"COLUMNS": "80"}, "search", "--limit", "1")
	for _, l := range strings.Split(strings.TrimRight(out4, "\n"), "\n") {
		if utf8.RuneCountInString(l) > 80 {
			t.Errorf("line wider than 80: %q", l)
		}
	}
	if !strings.Contains(out4, "\n    ") {
		t.Errorf("80 columns: attributes not on their own line:\n%s", out4)
	}
	if code, _, _ := d.ctl(t, nil, "search", "--cursor", "bogus"); code != exitUsage {
		t.Errorf("bad cursor: exit %d, want %d", code, exitUsage)
	}
	// A trace found through a child span is named by its root span, with
	// the trace's duration and span count: trace 4bf92f… matches
	// service.name=payment only in its child span "POST /charge" (25.906ms);
	// its root is checkout's "POST /cart/checkout" (48.21ms, 2 spans).
	out5, _ := d.mustCtl(t, nil, "search", "--attr", "service.name=payment")
	row := regexp.MustCompile(`(?m)^\S+ \S+\s+(\S+)\s+4bf92f3577b34da6a3ce929d0e0e4736\s+(\d+)\s+(\S+)\s+(.+?)\s{2,}`).FindStringSubmatch(out5)
	if !strings.HasPrefix(out5, "START (UTC)") || !strings.Contains(strings.SplitN(out5, "\n", 2)[0], "SPANS") || row == nil ||
		row[1] != "48.21ms" || row[2] != "2" || row[3] != "checkout" || row[4] != "POST /cart/checkout" {
		t.Errorf("trace row not described by its root span (want 48.21ms, 2 spans, checkout, POST /cart/checkout): %q\n%s", row, out5)
	}
	// --spans lists the matching span itself.
	out6, _ := d.mustCtl(t, nil, "search", "--spans", "--attr", "service.name=payment")
	if !strings.Contains(out6, "payment") || !strings.Contains(out6, "POST /charge") || !strings.Contains(out6, "25.906ms") {
		t.Errorf("--spans row:\n%s", out6)
	}
}

// TestSearchOperationAndMaxDuration: --operation matches the root record
// method exactly, --max-duration bounds the duration (inclusive) on the
// daemon, so the rows and the cursor agree.
func TestSearchOperationAndMaxDuration(t *testing.T) {
	d := withExamples(t)
	out, _ := d.mustCtl(t, nil, "search", "--spans", "--operation", "POST /charge")
	if strings.Count(strings.TrimSpace(out), "\n") != 1 || !strings.Contains(out, "53995c3f42cd8ad8") {
		t.Errorf("--operation 'POST /charge': want only span 53995c3f42cd8ad8:\n%s", out)
	}
	if code, _, _ := d.ctl(t, nil, "search", "--operation", "post /charge"); code != exitNotFound {
		t.Errorf("--operation in another case: exit %d, want %d (no results)", code, exitNotFound)
	}
	out, errOut := d.mustCtl(t, nil, "search", "--spans", "--max-duration", "48.21ms", "--limit", "2")
	if !strings.Contains(out, "051581bf3cb55c13") || !strings.Contains(out, "53995c3f42cd8ad8") || strings.Contains(out, "b7ad6b7169203331") {
		t.Errorf("--max-duration 48.21ms, page 1:\n%s", out)
	}
	m := regexp.MustCompile(`(?m)^more: --cursor (\S+)$`).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("--max-duration: no cursor to the third span: %q", errOut)
	}
	out, errOut = d.mustCtl(t, nil, "search", "--spans", "--max-duration", "48.21ms", "--limit", "2", "--cursor", m[1])
	if !strings.Contains(out, "00f067aa0ba902b7") || strings.Contains(out, "b7ad6b7169203331") || strings.Contains(errOut, "more:") {
		t.Errorf("--max-duration 48.21ms, page 2 (the last):\n%s%s", out, errOut)
	}
	for _, args := range [][]string{{"--max-duration", "0"}, {"--max-duration", "soon"}, {"--min-duration", "2ms", "--max-duration", "1ms"}} {
		if code, _, _ := d.ctl(t, nil, append([]string{"search"}, args...)...); code != exitUsage {
			t.Errorf("search %v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// TestGetTreeCutDown (point 12): self time per record, --depth and
// --min-duration, with what is hidden counted.
func TestGetTreeCutDown(t *testing.T) {
	d := withExamples(t)
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	out, _ := d.mustCtl(t, nil, "get", id)
	// CartService.load: 6.104ms, of which CartDao.lock 5.233ms: self 871µs.
	if !regexp.MustCompile(`(?m)^\s+6\.104ms\s+871µs\s+\+412µs\s+CartService\.load\(String\)$`).MatchString(out) {
		t.Errorf("no self time for CartService.load:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^\s+48\.21ms\s+2\.357ms\s+\+0s\s+POST /cart/checkout$`).MatchString(out) {
		t.Errorf("root self time (48.21 - 6.104 - 9.815 - 27.33 - 2.604 = 2.357ms):\n%s", out)
	}
	out, _ = d.mustCtl(t, nil, "get", id, "--depth", "1")
	if !strings.Contains(out, "POST /cart/checkout  [+6 records below]") || strings.Contains(out, "CartService") ||
		!strings.Contains(out, "POST /charge  [+2 records below]") {
		t.Errorf("--depth 1:\n%s", out)
	}
	out, _ = d.mustCtl(t, nil, "get", id, "--depth", "2")
	if !strings.Contains(out, "CartService.load(String)  [+1 record below]") || strings.Contains(out, "CartDao") {
		t.Errorf("--depth 2:\n%s", out)
	}
	out, _ = d.mustCtl(t, nil, "get", id, "--min-duration", "5ms")
	for _, want := range []string{"... 1 record under 5ms hidden (2.604ms in all)", "... 1 record under 5ms hidden (1.204ms in all)",
		"CartDao.lock(String)", "PaymentClient.charge(Order)"} {
		if !strings.Contains(out, want) {
			t.Errorf("--min-duration 5ms: no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "OrderDao.insert") || strings.Contains(out, "TaxRates") || strings.Contains(out, "FraudCheck") {
		t.Errorf("--min-duration 5ms shows short records:\n%s", out)
	}
	for _, args := range [][]string{{"get", id, "--depth", "-1"}, {"get", id, "--min-duration", "soon"}, {"get", id, "--json", "--depth", "2"}} {
		if code, _, _ := d.ctl(t, nil, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// TestTimesAndAttrSyntax (point 13): --since takes dates, RFC 3339 and
// durations with days; --attr takes key=value and key:value.
func TestTimesAndAttrSyntax(t *testing.T) {
	d := withExamples(t)
	count := func(args ...string) int {
		t.Helper()
		code, out, errOut := d.ctl(t, nil, append([]string{"search", "--json"}, args...)...)
		switch code {
		case exitNotFound:
			return 0
		case exitOK:
			return strings.Count(out, "\n")
		}
		t.Fatalf("search %v: exit %d: %s", args, code, errOut)
		return 0
	}
	for args, want := range map[string]int{
		"--since 2026-11-20":                     3,
		"--since 2026-11-21":                     0,
		"--since 2026-11-20T09:14:05Z":           2,
		"--until 2026-11-20T09:14:05Z":           1,
		"--since 2026-11-20T10:14:05+01:00":      2,
		"--attr service.name=checkout":           2,
		"--attr service.name:checkout":           2,
		"--attr http.status_code:503":            1,
		"--attr service.name=checkout --since 1": 2,
	} {
		if got := count(strings.Fields(args)...); got != want {
			t.Errorf("search %s: %d results, want %d", args, got, want)
		}
	}
	// 7d counts back from now: the examples (2026-11-20) are within it
	// exactly when now is before 2026-11-27T09:14:03Z.
	want := 0
	if time.Now().Before(time.Date(2026, 11, 27, 9, 14, 3, 0, time.UTC)) {
		want = 3
	}
	if got := count("--since", "7d"); got != want {
		t.Errorf("--since 7d: %d results, want %d", got, want)
	}
	for _, bad := range [][]string{{"--since", "7x"}, {"--since", "2026-13-01"}, {"--attr", "novalue"}} {
		if code, _, _ := d.ctl(t, nil, append([]string{"search"}, bad...)...); code != exitUsage {
			t.Errorf("search %v: exit %d, want %d", bad, code, exitUsage)
		}
	}
}

// TestErrorsAndVersions (point 14).
func TestErrorsAndVersions(t *testing.T) {
	nowhere := filepath.Join(t.TempDir(), "none.sock")
	var out, errb bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, stat: os.Stat}
	if code := a.run([]string{"--socket", nowhere, "stores"}); code != exitFailure ||
		errb.String() != "ztsctl: no ztsd listening at "+nowhere+": start it with make run, or set --socket / ZTSD_SOCKET\n" {
		t.Errorf("no daemon: exit %d, %q", code, errb.String())
	}
	d := withExamples(t)
	for _, args := range [][]string{{"frobnicate"}, {"search", "--bogus"}, {"get"}} {
		if code, _, _ := d.ctl(t, nil, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	v1, _ := d.mustCtl(t, nil, "version")
	v2, _ := d.mustCtl(t, nil, "--version")
	if !strings.HasPrefix(v1, "ztsctl ") || v1 != v2 {
		t.Errorf("version %q, --version %q", v1, v2)
	}
	// A span without a wall clock (start 5 µs after the epoch).
	code, _, errOut := d.ctl(t, nil, "put", writeTemp(t, `{"trace_id":"0000000000000000000000000000abcd","span_id":"0000000000000001","start_ns":5000,"duration_ns":10}`+"\n"))
	if code != 0 {
		t.Fatalf("put: %s", errOut)
	}
	stores, _ := d.mustCtl(t, nil, "stores")
	if !strings.Contains(stores, "FIRST (UTC)") || !strings.Contains(stores, "no wall clock") || strings.Contains(stores, "1970") {
		t.Errorf("stores:\n%s", stores)
	}
	stats, _ := d.mustCtl(t, nil, "stats")
	if strings.Contains(stats, "e+") || !regexp.MustCompile(`(?m)^spans\s+5$`).MatchString(stats) {
		t.Errorf("stats:\n%s", stats)
	}
	if got := fmtNumber(8.201157e+06); got != "8201157" {
		t.Errorf("fmtNumber(8.201157e+06) = %q", got)
	}
	if got := fmtNumber(0.25); got != "0.25" {
		t.Errorf("fmtNumber(0.25) = %q", got)
	}
	empty := writeTemp(t, "")
	if code, _, errOut := d.ctl(t, nil, "import", empty); code != exitUsage || errOut != "ztsctl: "+empty+": empty file\n" {
		t.Errorf("import of an empty file: exit %d, %q", code, errOut)
	}
}

// TestSocketResolution (point 14): --socket, then ZTSD_SOCKET, then
// ./ztsd.sock when it exists, then /run/ztsd/ztsd.sock when it exists.
func TestSocketResolution(t *testing.T) {
	exists := func(paths ...string) func(string) (os.FileInfo, error) {
		return func(p string) (os.FileInfo, error) {
			if slices.Contains(paths, p) {
				return nil, nil
			}
			return nil, fs.ErrNotExist
		}
	}
	for _, tc := range []struct {
		name    string
		flag    string
		env     string
		present []string
		want    string
	}{
		{"flag", "/x.sock", "/env.sock", []string{localSocket, installSocket}, "/x.sock"},
		{"env", "", "/env.sock", []string{localSocket, installSocket}, "/env.sock"},
		{"local", "", "", []string{localSocket, installSocket}, localSocket},
		{"installed", "", "", []string{installSocket}, installSocket},
		{"none", "", "", nil, localSocket},
	} {
		a := &app{socket: localSocket, getenv: func(string) string { return tc.env }, stat: exists(tc.present...)}
		if tc.flag != "" {
			a.socket = tc.flag
		}
		a.resolveSocket(tc.flag != "")
		if a.socket != tc.want {
			t.Errorf("%s: socket %q, want %q", tc.name, a.socket, tc.want)
		}
	}
	// Unchosen, the message says where else it looked.
	a := &app{socket: localSocket, getenv: func(string) string { return "" }, stat: exists()}
	a.resolveSocket(false)
	err := a.noDaemon(&client.DialError{Addr: localSocket, Err: fs.ErrNotExist})
	if !strings.Contains(err.Error(), "./ztsd.sock (also looked for /run/ztsd/ztsd.sock)") {
		t.Errorf("message %q", err)
	}
}

// TestListings (point 15): services and attributes.
func TestListings(t *testing.T) {
	d := withExamples(t)
	out, _ := d.mustCtl(t, nil, "services")
	want := "SERVICE    SEARCH WITH\ncheckout   --attr service.name=checkout\ninventory  --attr service.name=inventory\npayment    --attr service.name=payment\n"
	if out != want {
		t.Errorf("services:\n%s\nwant\n%s", out, want)
	}
	if _, err := d.mustCtl(t, nil, "import", "--format", "wtf", filepath.Join(samples, "wtf", "cff-js-node.wtf-trace")); err != "" {
		t.Logf("import stderr: %s", err)
	}
	out, _ = d.mustCtl(t, nil, "services")
	if !strings.Contains(out, "wtf cff-js-node.wtf-trace  --attr source.file=cff-js-node.wtf-trace") {
		t.Errorf("services after a WTF import:\n%s", out)
	}
	out, _ = d.mustCtl(t, nil, "attributes")
	keys := strings.Fields(out)
	for _, k := range []string{"http.method", "http.route", "http.status_code", "service.name", "source.file", "source.format"} {
		if !slices.Contains(keys, k) {
			t.Errorf("attributes: no %s in %v", k, keys)
		}
	}
	if !slices.IsSorted(keys) {
		t.Errorf("attributes not sorted: %v", keys)
	}
	out, _ = d.mustCtl(t, nil, "attributes", "http.route")
	if out != "/cart/checkout\n/charge\n/stock/{sku}\n" {
		t.Errorf("attributes http.route:\n%s", out)
	}
	out, _ = d.mustCtl(t, nil, "attributes", "service.name", "--json")
	var vals []string
	if err := json.Unmarshal([]byte(out), &vals); err != nil || !slices.Equal(vals, []string{"checkout", "inventory", "payment"}) {
		t.Errorf("attributes --json: %q %v", out, err)
	}
	if code, _, errOut := d.ctl(t, nil, "attributes", "no.such.key"); code != exitNotFound || !strings.Contains(errOut, "no values") {
		t.Errorf("unknown key: exit %d %q", code, errOut)
	}
}

// TestImportQuietWhenPiped (point 11): piped, import prints only its JSON
// summary on stdout and nothing on stderr; the progress bar needs a
// terminal.
func TestImportQuietWhenPiped(t *testing.T) {
	d := newRealDaemon(t)
	out, errOut := d.mustCtl(t, nil, "import", examplesFile)
	dec := json.NewDecoder(strings.NewReader(out))
	var sum map[string]any
	if err := dec.Decode(&sum); err != nil || dec.More() || sum["events"] != float64(4) {
		t.Errorf("stdout is not one JSON summary of 4 events: %q (%v)", out, err)
	}
	if errOut != "" {
		t.Errorf("stderr %q, want nothing when piped", errOut)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if b := newCountBar(w, "import", "spans"); b != nil {
		t.Error("a progress bar on a pipe")
	}
	var nilBar *countBar
	nilBar.add(3) // off: no panic
	nilBar.finish()
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
