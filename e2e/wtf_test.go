package e2e

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/trace"
)

// Issue 6: Web Tracing Framework import through the daemon.

// referenceEventCounts reads WTF's own per-zone, per-event-name counts
// (reference/*.eventcounts.tsv: zone, name, count, class, flags).
func referenceEventCounts(t testing.TB, name string) map[string]map[string]int64 {
	t.Helper()
	f, err := os.Open(sample("wtf", "reference", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string]int64{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		cols := strings.Split(sc.Text(), "\t")
		if line == 1 {
			if strings.Join(cols[:3], ",") != "zone,name,count" {
				t.Fatalf("%s: unexpected header %q", name, sc.Text())
			}
			continue
		}
		n, err := strconv.ParseInt(cols[2], 10, 64)
		if len(cols) < 3 || err != nil {
			t.Fatalf("%s line %d: %q", name, line, sc.Text())
		}
		if out[cols[0]] == nil {
			out[cols[0]] = map[string]int64{}
		}
		out[cols[0]][cols[1]] = n
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkEventCounts compares the import's events_per_zone and
// events_per_name with WTF's reference table, both ways.
func checkEventCounts(t *testing.T, sum importSummary, ref map[string]map[string]int64) {
	t.Helper()
	perZone, _ := detail(t, sum.Details, "events_per_zone").(map[string]any)
	perName, _ := detail(t, sum.Details, "events_per_name").(map[string]any)
	if len(perZone) != len(ref) {
		t.Errorf("events_per_zone has %d zones, the reference %d", len(perZone), len(ref))
	}
	totals := map[string]int64{}
	checked := 0
	for zone, names := range ref {
		got, _ := perZone[zone].(map[string]any)
		if len(got) != len(names) {
			t.Errorf("zone %s: %d event names, the reference %d", zone, len(got), len(names))
		}
		for name, want := range names {
			totals[name] += want
			if v, ok := got[name]; !ok || num(t, v, zone+"/"+name) != want {
				t.Errorf("zone %s, %s: %v events, the reference %d", zone, name, v, want)
			}
			checked++
		}
	}
	if len(perName) != len(totals) {
		t.Errorf("events_per_name has %d names, the reference %d", len(perName), len(totals))
	}
	for name, want := range totals {
		if v, ok := perName[name]; !ok || num(t, v, name) != want {
			t.Errorf("events_per_name[%s] = %v, the reference %d", name, v, want)
		}
	}
	t.Logf("%d (zone, event name) counts equal WTF's reference", checked)
}

// TestWTFImport imports the two large legacy binary traces through the
// daemon and checks the summaries against the README and WTF's own
// reference tables; then searches and reads back the stored scopes.
func TestWTFImport(t *testing.T) {
	t.Parallel()
	d := daemontest.New(t, "")
	d.Start()

	sums := ctlImport(t, d, "--format", "wtf", sample("wtf", "blk-client.wtf-trace"))
	if len(sums) != 1 {
		t.Fatalf("%d summaries", len(sums))
	}
	blkClient := sums[0]
	if blkClient.Format != "wtf" || blkClient.Events != 458_446 || len(blkClient.Warnings) != 0 {
		t.Errorf("blk-client: format %q events %d warnings %v; want wtf, 458,446, none", blkClient.Format, blkClient.Events, blkClient.Warnings)
	}
	for key, want := range map[string]int64{"zones": 1, "scopes": 224_448, "max_depth": 12, "frames": 888,
		"stored_events": 458_232, "time_ranges": 2, "timebase_ms": 1367885827385} {
		if got := num(t, detail(t, blkClient.Details, key), key); got != want {
			t.Errorf("blk-client details %s = %d, want %d", key, got, want)
		}
	}
	if zn, _ := detail(t, blkClient.Details, "zone_names").([]any); len(zn) != 1 || zn[0] != "Script" {
		t.Errorf("blk-client zone_names %v, want [Script]", zn)
	}
	if got := num(t, detail(t, blkClient.Details, "accounting", "unclosed_scopes"), "unclosed_scopes"); got != 0 {
		t.Errorf("blk-client: %d unclosed scopes, the README says all are closed", got)
	}
	checkEventCounts(t, blkClient, referenceEventCounts(t, "gh-pages__resources_traces__blk-client.eventcounts.tsv"))

	// Every gf.Game#renderTick_ scope (889 in WTF's table) is in a trace of
	// its own; the search finds all of them, newest first.
	t0 := time.Now()
	found := ctlSearch(t, d, "--attr", "source.format=wtf", "--text", "renderTick", "--limit", "10000")
	t.Logf("ztsctl search: %d traces in %v", len(found), time.Since(t0).Round(time.Millisecond))
	if len(found) != 889 {
		t.Errorf("search --attr source.format=wtf --text renderTick: %d traces, want 889", len(found))
	}
	for i, sp := range found {
		if sp.Source != "wtf" || attrText(sp.Attrs, "source.file") != "blk-client.wtf-trace" ||
			(i > 0 && sp.StartNS > found[i-1].StartNS) {
			t.Fatalf("result %d: source %q file %q start %d", i, sp.Source, attrText(sp.Attrs, "source.file"), sp.StartNS)
		}
	}
	if len(found) == 0 {
		t.FailNow()
	}
	// One of them, read back: the renderTick_ scope with its nested calls
	// and their durations, indented below it.
	out := ctlGet(t, d, found[len(found)/2].TraceID.String())
	m := regexp.MustCompile(`(?m)^( +)(\d[\d.]*[µnm]?s) +\S+ +\+\S+ +gf\.Game#renderTick_  calls=(\d+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("ztsctl get shows no gf.Game#renderTick_ scope:\n%s", out)
	}
	indent := len(m[1])
	nested := regexp.MustCompile(`(?m)^ {`+strconv.Itoa(indent+2)+`}(\d[\d.]*[µnm]?s) +\S+ +\+\S+ +(gf\.Game#(update|render)_)`).FindAllStringSubmatch(out, -1)
	if len(nested) != 2 || nested[0][2] != "gf.Game#update_" || nested[1][2] != "gf.Game#render_" {
		t.Errorf("renderTick_ (%s, calls=%s) should directly contain update_ and render_ with durations:\n%s", m[2], m[3], out)
	}
	roots, err := d.Client.Get(t.Context(), found[len(found)/2].TraceID)
	if err != nil || len(roots) != 1 {
		t.Fatalf("GET: %v, %d roots", err, len(roots))
	}
	var tick bool
	roots[0].Root.Walk(func(r *trace.Record, depth int) bool {
		if r.Method == "gf.Game#renderTick_" {
			tick = true
			if len(r.Children) < 2 || r.DurationNS <= 0 {
				t.Errorf("renderTick_ record: %d children, duration %d", len(r.Children), r.DurationNS)
			}
			var sum int64
			for _, c := range r.Children {
				if c.StartNS < r.StartNS || c.StartNS+c.DurationNS > r.StartNS+r.DurationNS {
					t.Errorf("%s [%d,+%d] outside renderTick_ [%d,+%d]", c.Method, c.StartNS, c.DurationNS, r.StartNS, r.DurationNS)
				}
				sum += c.DurationNS
			}
			if sum > r.DurationNS {
				t.Errorf("children of renderTick_ last %d ns, longer than it (%d ns)", sum, r.DurationNS)
			}
			return false
		}
		return true
	})
	if !tick {
		t.Error("the trace found holds no gf.Game#renderTick_ record")
	}
	// --format auto detects the legacy binary encoding.
	sums = ctlImport(t, d, sample("wtf", "blk-server.wtf-trace"))
	if len(sums) != 1 {
		t.Fatalf("%d summaries", len(sums))
	}
	server := sums[0]
	if server.Format != "wtf" || server.Events != 315_569 {
		t.Errorf("blk-server: format %q events %d; want wtf, 315,569", server.Format, server.Events)
	}
	for key, want := range map[string]int64{"scopes": 139_306, "max_depth": 10, "stored_events": 315_444, "zones": 1} {
		if got := num(t, detail(t, server.Details, key), key); got != want {
			t.Errorf("blk-server details %s = %d, want %d", key, got, want)
		}
	}
	checkEventCounts(t, server, referenceEventCounts(t, "gh-pages__resources_traces__blk-server.eventcounts.tsv"))

	// blk-server's renderTick_ scopes (6,418 in WTF's table) are found
	// by the same search, told apart by source.file.
	got := ctlSearch(t, d, "--attr", "source.file=blk-server.wtf-trace", "--text", "renderTick", "--limit", "100")
	if len(got) != 100 {
		t.Errorf("search of blk-server's renderTick_ scopes: %d results, want a full page of 100", len(got))
	}
	for _, sp := range got {
		if attrText(sp.Attrs, "thread") != "Script" || sp.Type != "wtf.scope" {
			t.Fatalf("blk-server result %s: thread %q type %q", sp.TraceID, attrText(sp.Attrs, "thread"), sp.Type)
		}
	}

	// Everything the importer emitted is stored.
	var spans int64
	for _, s := range storeCount(t, d.Client) {
		spans += s.Spans
	}
	if want := blkClient.Traces + server.Traces; spans != want {
		t.Errorf("the daemon stores %d spans; the imports emitted %d traces", spans, want)
	}

}
