package wtf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

func TestSniff(t *testing.T) {
	for _, tc := range []struct {
		path string
		want bool
	}{
		{samplePath("blk-client.wtf-trace"), true},
		{samplePath("cff-js-node.wtf-trace"), true},
		{samplePath("cff-js-node.wtf-json"), true},
		{samplePath("cff-cpp-bindings.wtf-trace"), true},
		{samplePath("legacy-json-combined-1.wtf-json"), true},
		{samplePath("legacy-json-deeply-nested.wtf-json"), true},
		{"../../../shared/testdata/zorka/traces1-0-agd.cbor", false},
		{"../../../shared/testdata/dial9/demo-2026-03-18-small.bin", false},
		{"../../../shared/testdata/atf/clean/session_20250101_120000/pid_4242/manifest.json", false},
	} {
		f, err := os.Open(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 64)
		n, _ := f.Read(head)
		f.Close()
		if got := Sniff(head[:n]); got != tc.want {
			t.Errorf("Sniff(%s) = %v, want %v", filepath.Base(tc.path), got, tc.want)
		}
	}
	for _, head := range []string{"", "{}", `{"trace_id":"00"}`, "[1,2,3]", "\x1f\x8b\x08\x00", "ZTS0"} {
		if Sniff([]byte(head)) {
			t.Errorf("Sniff(%q) = true", head)
		}
	}
}

func TestDetectRejectsVariants(t *testing.T) {
	be := func(words ...uint32) []byte {
		var b []byte
		for _, w := range words {
			b = binary.BigEndian.AppendUint32(b, w)
		}
		return b
	}
	le := func(words ...uint32) []byte {
		var b []byte
		for _, w := range words {
			b = binary.LittleEndian.AppendUint32(b, w)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
		want error
		msg  string
	}{
		{"pre-release big-endian CFF", be(magic, 1, 10), ErrUnsupported, "pre-release"},
		{"legacy version 2 (issue #576)", be(magic, 1, 2), ErrUnsupported, "version 2"},
		{"little-endian version 7", le(magic, 1, 7), ErrUnsupported, "version 7"},
		{"short header", be(magic, 1), ErrTruncated, "file header"},
		{"not WTF", []byte("hello world"), ErrNotWTF, "not a WTF"},
		{"empty", nil, ErrNotWTF, "not a WTF"},
	} {
		_, _, err := collect(t, "x", tc.data, ingest.Options{KeepGoing: true})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: error %v, want %v containing %q", tc.name, err, tc.want, tc.msg)
		}
	}
}

// cffParts lists the parts of a binary CFF file: chunk index, chunk file
// offset, part index, part type, part-table entry offset, body offset.
type cffPartPos struct {
	chunk, part       int
	chunkOff, entry   int
	typ               uint32
	bodyOff, bodySize int
}

func cffPartsOf(data []byte) []cffPartPos {
	var out []cffPartPos
	off := binaryHeaderSize
	for idx := 0; off+chunkHeaderSize <= len(data); idx++ {
		length := int(binary.LittleEndian.Uint32(data[off+8:]))
		n := int(binary.LittleEndian.Uint32(data[off+20:]))
		body := off + chunkHeaderSize + partEntrySize*n
		for i := 0; i < n; i++ {
			e := off + chunkHeaderSize + partEntrySize*i
			out = append(out, cffPartPos{chunk: idx, part: i, chunkOff: off, entry: e, typ: binary.LittleEndian.Uint32(data[e:]),
				bodyOff: body + int(binary.LittleEndian.Uint32(data[e+4:])), bodySize: int(binary.LittleEndian.Uint32(data[e+8:]))})
		}
		off += length
	}
	return out
}

func lastPart(t *testing.T, data []byte, typ uint32) cffPartPos {
	t.Helper()
	var found *cffPartPos
	for _, p := range cffPartsOf(data) {
		if p.typ == typ {
			found = &p
		}
	}
	if found == nil {
		t.Fatalf("no part of type %x", typ)
	}
	return *found
}

// TestCorruptionsNameChunkAndOffset corrupts real samples and checks the
// error (kind, chunk, offset), and that with KeepGoing the events decoded
// before the error are kept as a warning.
func TestCorruptionsNameChunkAndOffset(t *testing.T) {
	client := readSample(t, "blk-client.wtf-trace")
	js := readSample(t, "cff-js-node.wtf-trace")
	cpp := readSample(t, "cff-cpp-bindings.wtf-trace")

	jsEvents := lastPart(t, js, partBinaryEventBuffer)
	unknownWire := slices.Clone(js)
	binary.LittleEndian.PutUint32(unknownWire[jsEvents.bodyOff:], 999)

	badSig := slices.Clone(cpp)
	i := bytes.Index(badSig, []byte("uint16 zoneId, ascii name"))
	copy(badSig[i:], "uint17")

	shortTable := slices.Clone(cpp)
	tbl := cffPartsOf(cpp)[1] // chunk 1's string table
	if tbl.typ != partStringTable {
		t.Fatalf("part %+v is not a string table", tbl)
	}
	binary.LittleEndian.PutUint32(shortTable[tbl.entry+8:], 16) // "wtf.scope#leave\0" only
	defsBuf := cffPartsOf(cpp)[2]                               // its event buffer: the second define (7 slots in) names string 1

	for _, tc := range []struct {
		name       string
		data       []byte
		want       error
		chunk      int
		offset     int64
		keptEvents int64
	}{
		{"legacy unknown wire id", append(slices.Clone(client), 0x77, 0x77, 0, 0, 0, 1), ErrUnknownEvent, -1, int64(len(client)), 458446},
		{"legacy truncated event", client[:len(client)-3], ErrTruncated, -1, -1, 458445},
		{"cff unknown wire id", unknownWire, ErrUnknownEvent, 2, int64(jsEvents.bodyOff), 22},
		{"cff bad signature", badSig, ErrBadSignature, 1, int64(defsBuf.bodyOff + 28), 1},
		{"cff string out of range", shortTable, ErrStringRange, 1, int64(defsBuf.bodyOff + 28), 1},
		{"cff truncated chunk", cpp[:len(cpp)-10], ErrTruncated, 3, -1, 31},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emitted := 0
			_, err := Decode(context.Background(), "f", tc.data, ingest.Options{}, func(*trace.Span) error { emitted++; return nil })
			var de *DecodeError
			if !errors.Is(err, tc.want) || !errors.As(err, &de) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if emitted != 0 {
				t.Errorf("%d spans emitted before the error", emitted)
			}
			if de.Chunk != tc.chunk || (tc.offset >= 0 && de.Offset != tc.offset) || de.Offset < 0 && tc.offset >= 0 {
				t.Errorf("error at chunk %d offset %d, want chunk %d offset %d: %v", de.Chunk, de.Offset, tc.chunk, tc.offset, err)
			}
			if tc.chunk >= 0 && !strings.Contains(err.Error(), fmt.Sprintf("chunk %d", tc.chunk)) || !strings.Contains(err.Error(), "offset") {
				t.Errorf("message does not name chunk and offset: %v", err)
			}
			sum, spans, err := collect(t, "f", tc.data, ingest.Options{KeepGoing: true})
			if tc.keptEvents == 0 {
				if err == nil {
					t.Fatalf("keep-going with nothing decoded: no error")
				}
				return
			}
			if err != nil {
				t.Fatalf("keep-going: %v", err)
			}
			if sum.Events != tc.keptEvents || !strings.Contains(strings.Join(sum.Warnings, "\n"), de.Error()) {
				t.Errorf("keep-going: %d events (want %d), warnings %q", sum.Events, tc.keptEvents, sum.Warnings)
			}
			checkSummaryConsistency(t, sum, spans)
		})
	}
}

func TestLegacyJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      error
		entry     int
	}{
		{"undefined id", `[{"type":"wtf.json#header","format_version":2,"timebase":0},{"event":7,"time":1}]`, ErrUnknownEvent, 1},
		{"undefined name", `[{"type":"wtf.json#header","format_version":2},{"event":"my.thing","time":1}]`, ErrUnknownEvent, 1},
		{"no header", `[{"event":"wtf.scope#leave","time":1}]`, ErrUnsupported, 0},
		{"version 1", `[{"type":"wtf.json#header","format_version":1},{"event":-1,"time":1}]`, ErrUnsupported, 1},
		{"bad signature", `[{"type":"wtf.json#header","format_version":2},{"type":"wtf.event#define","signature":"a(uint99 x)"}]`, ErrBadSignature, 1},
		{"bad entry", `[{"type":"wtf.json#header","format_version":2},{"event":1,"time":"soon"}]`, ErrMalformed, 1},
	} {
		_, _, err := collect(t, "f", []byte(tc.doc), ingest.Options{})
		var de *DecodeError
		if !errors.Is(err, tc.want) || !errors.As(err, &de) || de.Entry != tc.entry || !strings.Contains(err.Error(), fmt.Sprintf("entry %d", tc.entry)) {
			t.Errorf("%s: error %v, want %v at entry %d", tc.name, err, tc.want, tc.entry)
		}
	}
	// A trailing comma and a missing "]" are tolerated, as WTF did.
	sum, _, err := collect(t, "f", []byte(`[{"type":"wtf.json#header","format_version":2,"timebase":5},{"event":"wtf.trace#mark","time":1,"args":["m",null]},`), ingest.Options{})
	if err != nil || sum.Events != 1 {
		t.Errorf("repaired JSON: %v %+v", err, sum)
	}
}

// TestScopeEdgeCases: leaves without scopes, unclosed scopes, append data
// outside a scope, an undefined zone, and the depth limit.
func TestScopeEdgeCases(t *testing.T) {
	doc := `{"events":[{"type":"wtf.json#header","format_version":2,"timebase":1000},
	 {"type":"wtf.event#define","signature":"s(uint32 n)","event_id":1},
	 {"event":-1,"time":1},
	 {"event":"wtf.scope#appendData","time":2,"args":["k","v"]},
	 {"event":"wtf.zone#set","time":3,"args":[42]},
	 {"event":1,"time":4,"args":[7]},
	 {"event":"wtf.scope#appendData","time":5,"args":["k",{"x":1}]},
	 {"event":"wtf.trace#mark","time":6,"args":["m",1]},
	 {"event":1,"time":9,"args":[8]}]}`
	sum, spans, err := collect(t, "edge.wtf-json", []byte(doc), ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkSummaryConsistency(t, sum, spans)
	acc := sum.Details["accounting"].(map[string]int64)
	if acc["unmatched_leaves"] != 1 || acc["orphan_appends"] != 1 || acc["unclosed_scopes"] != 2 || acc["append_data"] != 1 {
		t.Errorf("accounting %v", acc)
	}
	got := strings.Join(renderSpans(spans), "\n")
	want := strings.Join([]string{
		`(default) 1002000000 wtf.scope#appendData@0+0{"name":"k","value":"v"}`,
		`(default) 1004000000 s@0+5000000{"k":{"x":1},"n":7}[wtf.trace#mark@2000000+0{"name":"m","value":1},s@5000000+0{"n":8}]`,
	}, "\n")
	if got != want {
		t.Errorf("spans:\n%s\nwant:\n%s", got, want)
	}
	if !spans[1].Root.Open || !spans[1].Root.Children[1].Open {
		t.Errorf("unclosed scopes not marked open")
	}
	warn := strings.Join(sum.Warnings, "\n")
	for _, w := range []string{"without an open scope", "never left", "undefined zone id 42"} {
		if !strings.Contains(warn, w) {
			t.Errorf("warnings %q lack %q", sum.Warnings, w)
		}
	}

	// Depth: scopes nested deeper than the record model allows.
	var b strings.Builder
	b.WriteString(`[{"type":"wtf.json#header","format_version":2},{"type":"wtf.event#define","signature":"d","event_id":1}`)
	for i := 0; i < maxScopeDepth+5; i++ {
		fmt.Fprintf(&b, `,{"event":1,"time":%d}`, i)
	}
	b.WriteString("]")
	if _, _, err := collect(t, "deep", []byte(b.String()), ingest.Options{}); !errors.Is(err, ErrLimit) {
		t.Errorf("deep nesting: %v, want ErrLimit", err)
	}
	sum, spans, err = collect(t, "deep", []byte(b.String()), ingest.Options{KeepGoing: true})
	if err != nil || len(spans) != 1 || sum.Details["max_depth"] != maxScopeDepth || sum.Details["accounting"].(map[string]int64)["dropped"] != 5 {
		t.Errorf("deep nesting with keep-going: %v, %d spans, %v", err, len(spans), sum.Details["accounting"])
	}
}

func TestEmitErrorAndCancel(t *testing.T) {
	data := readSample(t, "blk-server.wtf-trace")
	stop := errors.New("stop here")
	n := 0
	_, err := Decode(context.Background(), "f", data, ingest.Options{}, func(*trace.Span) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Errorf("emit error: %v after %d spans", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Decode(ctx, "f", data, ingest.Options{KeepGoing: true}, func(*trace.Span) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestImportAndDeterministicIDs(t *testing.T) {
	path := samplePath("cff-cpp-bindings.wtf-trace")
	var ids [2][]string
	for i := range ids {
		sum, err := Import(context.Background(), path, ingest.Options{}, func(s *trace.Span) error {
			ids[i] = append(ids[i], s.TraceID.String()+"/"+s.SpanID.String())
			return nil
		})
		if err != nil || sum.Source != path {
			t.Fatalf("import: %v %+v", err, sum)
		}
	}
	if len(ids[0]) != 6 || fmt.Sprint(ids[0]) != fmt.Sprint(ids[1]) {
		t.Errorf("ids differ between imports: %v / %v", ids[0], ids[1])
	}
	seen := map[string]bool{}
	for _, id := range ids[0] {
		if seen[id] {
			t.Errorf("duplicate id %s", id)
		}
		seen[id] = true
	}
	if _, err := Import(context.Background(), filepath.Join(t.TempDir(), "missing"), ingest.Options{}, nil); err == nil {
		t.Error("missing file: no error")
	}
}

// TestSortEvents compares the natural merge with a stable sort on inputs
// shaped like WTF files (late batches) and on hostile ones.
func TestSortEvents(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	shapes := map[string]func(n int) []int64{
		"sorted": func(n int) []int64 {
			s := make([]int64, n)
			for i := range s {
				s[i] = int64(i / 3)
			}
			return s
		},
		"descending": func(n int) []int64 {
			s := make([]int64, n)
			for i := range s {
				s[i] = int64(n - i)
			}
			return s
		},
		"random": func(n int) []int64 {
			s := make([]int64, n)
			for i := range s {
				s[i] = r.Int63n(50)
			}
			return s
		},
		"batches": func(n int) []int64 {
			var s []int64
			t := int64(0)
			for len(s) < n {
				for k := r.Intn(50); k > 0; k-- {
					t += r.Int63n(5)
					s = append(s, t)
				}
				back := t - r.Int63n(200)
				for k := r.Intn(10); k > 0; k-- {
					back += r.Int63n(5)
					s = append(s, back)
				}
			}
			return s[:n]
		},
	}
	for name, shape := range shapes {
		for _, n := range []int{0, 1, 2, 7, 100, 5000} {
			times := shape(n)
			ev := make([]event, n)
			for i, tm := range times {
				ev[i] = event{time: tm, typ: int32(i)}
			}
			want := slices.Clone(ev)
			slices.SortStableFunc(want, func(a, b event) int { return int(a.time - b.time) })
			sortEvents(ev)
			if !slices.Equal(ev, want) {
				t.Errorf("%s n=%d: not a stable sort", name, n)
			}
		}
	}
}

func TestTimebaseFromText(t *testing.T) {
	for _, tc := range []struct {
		in string
		ns int64
	}{
		{"0", 0}, {"1367885827385", 1367885827385000000}, {"386327.424514", 386327424514},
		{"424264.8788095", 424264878810}, {"-1.5", -1500000}, {"1e3", 1000000000},
	} {
		_, ns, err := timebaseFromText(tc.in)
		if err != nil || ns != tc.ns {
			t.Errorf("timebaseFromText(%s) = %d, %v; want %d", tc.in, ns, err, tc.ns)
		}
	}
	if _, _, err := timebaseFromText("1e300"); !errors.Is(err, ErrMalformed) {
		t.Errorf("huge timebase: %v", err)
	}
}
