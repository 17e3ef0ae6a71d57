package dial9

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/klauspost/compress/gzip"
)

// samplesDir holds the shared real samples, read in place.
const samplesDir = "../../../shared/testdata/dial9"

func samplePath(name string) string { return filepath.Join(samplesDir, name) }

func readSample(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(samplePath(name))
	if err != nil {
		t.Fatalf("sample %s: %v", name, err)
	}
	return data
}

// demoPerSchema is the per-schema event count of demo-2026-05-15.bin given
// in shared/testdata/README.md and the format notes (A3).
var demoPerSchema = map[string]int64{
	"PollStartEvent":       36801,
	"PollEndEvent":         36801,
	"WakeEventEvent":       35552,
	"WorkerParkEvent":      6304,
	"WorkerUnparkEvent":    6304,
	"QueueSampleEvent":     464,
	"CpuSampleEvent":       6949,
	"TaskDumpEvent":        12952,
	"TaskSpawnEvent":       262,
	"TaskTerminateEvent":   359,
	"SpanCloseEvent":       9890,
	"SymbolTableEntry":     992,
	"SegmentMetadataEvent": 1,
	"ClockSyncEvent":       2,
	"SpanEnter:metrics_service::routes::record_metric:examples/metrics-service/src/routes.rs:26": 16483,
	"SpanExit:metrics_service::routes::record_metric:examples/metrics-service/src/routes.rs:26":  16483,
	"SpanEnter:metrics_service::routes::query_metric:examples/metrics-service/src/routes.rs:44":  5927,
	"SpanExit:metrics_service::routes::query_metric:examples/metrics-service/src/routes.rs:44":   5927,
	"SpanEnter:metrics_service::ddb::query_metric:examples/metrics-service/src/ddb.rs:122":       5927,
	"SpanExit:metrics_service::ddb::query_metric:examples/metrics-service/src/ddb.rs:122":        5927,
	"SpanEnter:metrics_service::buffer::put_aggregate:examples/metrics-service/src/buffer.rs:73": 94,
	"SpanExit:metrics_service::buffer::put_aggregate:examples/metrics-service/src/buffer.rs:73":  94,
	"SpanEnter:metrics_service::buffer::flush_to_ddb:examples/metrics-service/src/buffer.rs:54":  72,
	"SpanExit:metrics_service::buffer::flush_to_ddb:examples/metrics-service/src/buffer.rs:54":   72,
}

// trcSamples are the TRC samples and their event totals (README).
var trcSamples = []struct {
	file    string
	gzipped bool
	events  int64
	streams int64
	schema  map[string]int64 // selected per-schema counts
}{
	{"demo-2026-05-15.bin", true, 210639, 14, demoPerSchema},
	{"demo-2026-03-18-small.bin", false, 4625, 1, map[string]int64{"CallframeDefEvent": 92}},
	{"demo-2026-03-17-callframes.bin", false, 140704, 1, map[string]int64{"CallframeDefEvent": 402}},
	{"demo-2026-04-16-optional-fields.bin", false, 145406, 28, map[string]int64{"ClockSyncEvent": 2}},
	{"demo-2026-05-01-pooled-stacks.bin", true, 303415, 20, nil},
}

// decodeAll reads every event of r, deep-copying the reused Values.
func decodeAll(r *Reader) ([]Event, error) {
	var out []Event
	for {
		ev, err := r.Next()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return out, err
		}
		c := *ev
		c.Values = slices.Clone(ev.Values)
		out = append(out, c)
	}
}

func TestReaderSamples(t *testing.T) {
	for _, tc := range trcSamples {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(samplePath(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r, err := NewReader(f)
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for {
				ev, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("after %d events: %v", n, err)
				}
				if len(ev.Values) != len(ev.Schema.Fields) {
					t.Fatalf("event %d: %d values for %d fields", n, len(ev.Values), len(ev.Schema.Fields))
				}
				n++
			}
			st := r.Stats()
			if st.Events != tc.events || n != tc.events {
				t.Errorf("events = %d (stats %d), want %d", n, st.Events, tc.events)
			}
			if st.Streams != tc.streams {
				t.Errorf("streams = %d, want %d", st.Streams, tc.streams)
			}
			if r.Gzipped() != tc.gzipped {
				t.Errorf("gzipped = %v, want %v", r.Gzipped(), tc.gzipped)
			}
			for name, want := range tc.schema {
				if got := st.EventsPerSchema[name]; got != want {
					t.Errorf("%s = %d, want %d", name, got, want)
				}
			}
			var sum int64
			for _, c := range st.EventsPerSchema {
				sum += c
			}
			if sum != tc.events {
				t.Errorf("per-schema counts sum to %d, want %d", sum, tc.events)
			}
			if tc.file == "demo-2026-05-15.bin" {
				if len(st.EventsPerSchema) != len(demoPerSchema) {
					t.Errorf("%d schema names, want %d", len(st.EventsPerSchema), len(demoPerSchema))
				}
				want := [6]int64{14, 94, 10509, 293, 7678, 4047237}
				got := [6]int64{st.Streams, st.SchemaFrames, st.StringPoolFrames, st.StackPoolFrames,
					st.TimestampResets, st.Bytes}
				if got != want { // streams, schema/string/stack frames, resets, bytes
					t.Errorf("frame counts %+v, want %+v", got, want)
				}
				if st.UnresolvedRefs != 0 {
					t.Errorf("%d unresolved pool references, want 0", st.UnresolvedRefs)
				}
			}
		})
	}
}

func TestReaderRejectsLegacyTokioTrc(t *testing.T) {
	data := readSample(t, "legacy-tokiotrc-v9.bin")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(data)
	zw.Close()
	for name, in := range map[string][]byte{"raw": data, "gzip": gz.Bytes()} {
		_, err := NewBytesReader(in)
		if !errors.Is(err, ErrLegacyFormat) {
			t.Fatalf("%s: err = %v, want ErrLegacyFormat", name, err)
		}
		var de *DecodeError
		if !errors.As(err, &de) || de.Offset != 0 {
			t.Fatalf("%s: err = %#v, want *DecodeError at offset 0", name, err)
		}
		if !strings.Contains(err.Error(), "TOKIOTRC") {
			t.Errorf("%s: message %q does not name the legacy format", name, err)
		}
	}
}

func TestReaderBadHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"partial magic", []byte("TR"), ErrTruncated},
		{"magic without version", []byte("TRC\x00"), ErrTruncated},
		{"wrong magic", []byte("ZTS0\x01\x02\x03"), ErrBadMagic},
		{"lower-case", []byte("trc\x00\x01"), ErrBadMagic},
		{"gzip header only", []byte{0x1f, 0x8b}, io.ErrUnexpectedEOF},
	} {
		_, err := NewBytesReader(tc.in)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}

// frames builds a stream with the test writer.
func frames(build func(w *testWriter)) []byte {
	w := &testWriter{}
	w.header(Version)
	build(w)
	return w.buf.Bytes()
}

var (
	schemaA = &Schema{TypeID: 0, Name: "A", HasTimestamp: true, Fields: []Field{{Name: "x", Type: TypeVarint}}}
	schemaB = &Schema{TypeID: 0, Name: "B", HasTimestamp: true, Fields: []Field{{Name: "s", Type: TypePooledString}}}
)

func TestReaderCorruptFrames(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   []byte
		events int // decoded before the error
		offset int64
		want   error
	}{
		{"unknown tag", frames(func(w *testWriter) {
			w.schema(schemaA)
			w.event(schemaA, 10, []Value{{Uint: 1}})
			w.u8(0x07)
		}), 1, 5 + 13 + 7, ErrUnknownTag},
		{"T without magic", frames(func(w *testWriter) { w.buf.WriteString("TRX\x00\x01") }), 0, 5, ErrUnknownTag},
		{"unknown type id", frames(func(w *testWriter) {
			w.schema(schemaA)
			w.event(&Schema{TypeID: 9, HasTimestamp: true}, 1, nil)
		}), 0, 5 + 13, ErrUnknownTypeID},
		{"conflicting schema", frames(func(w *testWriter) {
			w.schema(schemaA)
			w.schema(schemaA) // identical: accepted
			w.schema(schemaB)
		}), 0, 5 + 13 + 13, ErrSchemaConflict},
		{"field type 0", frames(func(w *testWriter) {
			w.schema(&Schema{Name: "Z", Fields: []Field{{Name: "f", Type: 0}}})
		}), 0, 5, ErrUnknownFieldType},
		{"field type 16", frames(func(w *testWriter) {
			w.schema(&Schema{Name: "Z", Fields: []Field{{Name: "f", Type: 16}}})
		}), 0, 5, ErrUnknownFieldType},
		{"bare optional bit", frames(func(w *testWriter) {
			w.schema(&Schema{Name: "Z", Fields: []Field{{Name: "f", Type: Optional}}})
		}), 0, 5, ErrUnknownFieldType},
		{"varint of 11 bytes", frames(func(w *testWriter) {
			w.schema(schemaA)
			w.buf.Write([]byte{TagEvent, 0, 0, 1, 0, 0})
			w.buf.Write(bytes.Repeat([]byte{0x80}, 10))
			w.u8(0)
		}), 0, 5 + 13, ErrVarintTooLong},
		{"invalid UTF-8 schema name", frames(func(w *testWriter) {
			w.schema(&Schema{Name: "bad\xff"})
		}), 0, 5, ErrInvalidUTF8},
		{"invalid UTF-8 annotation", frames(func(w *testWriter) {
			w.schema(schemaA)
			w.annotations(0, []Annotation{{Key: "k", Value: "\xc3"}})
		}), 0, 5 + 13, ErrInvalidUTF8},
		{"timestamp overflow", frames(func(w *testWriter) {
			w.schema(schemaA)
			w.reset(math.MaxUint64 - 2)
			w.buf.Write([]byte{TagEvent, 0, 0, 5, 0, 0, 1})
		}), 0, 5 + 13 + 9, ErrTimestamp},
		{"container element tag 0", frames(func(w *testWriter) {
			w.schema(&Schema{Name: "L", Fields: []Field{{Name: "l", Type: TypeDynamicList}}})
			w.buf.Write([]byte{TagEvent, 0, 0, 1, 0, 0, 0, 0, 0})
		}), 0, 5 + 13, ErrUnknownFieldType},
		{"containers nested too deep", frames(func(w *testWriter) {
			w.schema(&Schema{Name: "L", Fields: []Field{{Name: "l", Type: TypeDynamicList}}})
			w.buf.Write([]byte{TagEvent, 0, 0})
			for i := 0; i < 40; i++ {
				w.u32(1)
				w.u8(byte(TypeDynamicList))
			}
			w.u32(0)
		}), 0, 5 + 13, ErrTooDeep},
		{"truncated event", frames(func(w *testWriter) {
			w.schema(schemaA)
			w.event(schemaA, 1, []Value{{Uint: 1}})
			w.buf.Write([]byte{TagEvent, 0, 0, 1, 0})
		}), 1, 5 + 13 + 7, ErrTruncated},
		{"truncated mid-file header", frames(func(w *testWriter) { w.buf.WriteString("TRC\x00") }), 0, 5, ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewBytesReader(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			evs, err := decodeAll(r)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err %T is not a *DecodeError", err)
			}
			if de.Offset != tc.offset {
				t.Errorf("offset = %d, want %d (%v)", de.Offset, tc.offset, err)
			}
			if !strings.Contains(err.Error(), "offset") {
				t.Errorf("message %q does not name the offset", err)
			}
			if len(evs) != tc.events {
				t.Errorf("decoded %d events before the error, want %d", len(evs), tc.events)
			}
			if _, again := r.Next(); again != err {
				t.Errorf("Next after error = %v, want the same error", again)
			}
		})
	}
}

// TestReaderTruncatedEverywhere cuts a random file at every length: the
// reader returns exactly the events wholly inside the prefix, then either
// a clean end or ErrTruncated at the start of the cut frame.
func TestReaderTruncatedEverywhere(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var data []byte
	var want []wantEvent
	for len(want) < 15 || len(data) > 2500 {
		data, want = randomFile(rng)
	}
	full, err := decodeAll(mustReader(t, data))
	if err != nil || len(full) != len(want) {
		t.Fatalf("full decode: %d events, %v", len(full), err)
	}
	for cut := HeaderSize; cut < len(data); cut++ {
		r := mustReader(t, data[:cut])
		evs, err := decodeAll(r)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrTruncated) || de.Offset >= int64(cut) {
				t.Fatalf("cut %d: err = %v", cut, err)
			}
		}
		for i, ev := range evs {
			if ev.Offset != full[i].Offset || ev.Schema.Name != full[i].Schema.Name {
				t.Fatalf("cut %d: event %d differs", cut, i)
			}
		}
		if len(evs) < len(full) && full[len(evs)].Offset < int64(cut) && err == nil {
			t.Fatalf("cut %d: event at %d lost without an error", cut, full[len(evs)].Offset)
		}
	}
}

func mustReader(t testing.TB, data []byte) *Reader {
	t.Helper()
	r, err := NewBytesReader(data)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReaderHostileLengths: lengths and counts far beyond the input are
// truncation errors, not allocations.
func TestReaderHostileLengths(t *testing.T) {
	huge := uint32(0xFFFFFFF0)
	for _, tc := range []struct {
		name string
		typ  FieldType
	}{
		{"string", TypeString}, {"bytes", TypeBytes}, {"stack frames", TypeStackFrames},
		{"string map", TypeStringMap}, {"dynamic list", TypeDynamicList}, {"dynamic map", TypeDynamicMap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := frames(func(w *testWriter) {
				w.schema(&Schema{Name: "H", Fields: []Field{{Name: "h", Type: tc.typ}}})
				w.buf.Write([]byte{TagEvent, 0, 0})
				w.u32(huge)
				w.buf.Write(make([]byte, 64))
			})
			checkBounded(t, data)
		})
	}
	t.Run("string pool count", func(t *testing.T) {
		checkBounded(t, frames(func(w *testWriter) { w.u8(TagStringPool); w.u32(huge); w.u32(1) }))
	})
	t.Run("string pool entry", func(t *testing.T) {
		checkBounded(t, frames(func(w *testWriter) { w.u8(TagStringPool); w.u32(1); w.u32(1); w.u32(huge) }))
	})
	t.Run("stack pool entry", func(t *testing.T) {
		checkBounded(t, frames(func(w *testWriter) { w.u8(TagStackPool); w.u32(1); w.u32(1); w.u32(huge) }))
	})
	t.Run("schema fields", func(t *testing.T) {
		checkBounded(t, frames(func(w *testWriter) {
			w.u8(TagSchema)
			w.u16(0)
			w.str16("S")
			w.u8(1)
			w.u16(0xFFFF)
		}))
	})
	t.Run("annotations", func(t *testing.T) {
		checkBounded(t, frames(func(w *testWriter) { w.u8(TagSchemaAnnotations); w.uvarint(0); w.u16(0xFFFF) }))
	})
}

func checkBounded(t *testing.T, data []byte) {
	t.Helper()
	for _, streaming := range []bool{false, true} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var r *Reader
		var err error
		if streaming {
			r, err = NewReader(bytes.NewReader(data))
		} else {
			r, err = NewBytesReader(data)
		}
		if err == nil {
			_, err = decodeAll(r)
		}
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTruncated) {
			t.Errorf("streaming=%v: err = %v, want ErrTruncated", streaming, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
			t.Errorf("streaming=%v: allocated %d bytes for a %d-byte input", streaming, alloc, len(data))
		}
	}
}

func TestReaderStreamsResetState(t *testing.T) {
	w := &testWriter{}
	w.header(Version)
	w.schema(schemaA)
	w.stringPool([]uint32{0}, []string{"first"})
	w.reset(1_000_000)
	w.event(schemaA, 1_000_010, []Value{{Uint: 7}})
	w.header(Version) // a new stream: type id 0 and pool id 0 mean something else
	w.schema(schemaB)
	w.stringPool([]uint32{0}, []string{"second"})
	w.buf.Write([]byte{TagEvent, 0, 0, 5, 0, 0, 0, 0, 0, 0}) // delta 5 from the reset base 0
	r := mustReader(t, w.buf.Bytes())
	evs, err := decodeAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	if evs[0].Schema.Name != "A" || evs[0].Values[0].Uint != 7 || evs[0].TimestampNS != 1_000_010 || evs[0].Stream != 0 {
		t.Errorf("first event %+v", evs[0])
	}
	if evs[1].Schema.Name != "B" || evs[1].Values[0].Str != "second" || evs[1].TimestampNS != 5 || evs[1].Stream != 1 {
		t.Errorf("second event %+v", evs[1])
	}
	if st := r.Stats(); st.Streams != 2 || st.EventsPerSchema["A"] != 1 || st.EventsPerSchema["B"] != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestReaderQuirks(t *testing.T) {
	opt := &Schema{TypeID: 3, Name: "Q", HasTimestamp: false, Fields: []Field{
		{Name: "o", Type: Optional | TypeVarint}, {Name: "b", Type: TypeBool}, {Name: "s", Type: TypeString},
		{Name: "l", Type: TypeDynamicList}, {Name: "p", Type: TypePooledString}, {Name: "u", Type: TypeVarint}}}
	data := frames(func(w *testWriter) {
		w.header(2) // an unknown version byte is accepted with a warning
		w.schema(opt)
		w.stringPool([]uint32{1, 2}, []string{"ok", "bad\xff"})
		w.reset(500)
		w.buf.Write([]byte{TagEvent, 3, 0})
		w.u8(0x05)                      // presence byte: any non-zero value means present
		w.uvarint(300)                  //
		w.u8(0x07)                      // Bool: non-zero is true
		w.str32([]byte("a\xffb"))       // String: invalid UTF-8 is replaced
		w.u32(1)                        // list of one element
		w.u8(byte(Optional | TypeU16))  // optional element tag: base type, no presence byte
		w.u16(513)                      //
		w.u32(2)                        // pool id 2 was dropped (invalid UTF-8)
		w.buf.Write([]byte{0x80, 0x01}) // over-long varints are accepted: 128
	})
	r := mustReader(t, data)
	evs, err := decodeAll(r)
	if err != nil || len(evs) != 1 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
	ev := evs[0]
	if ev.HasTimestamp || ev.TimestampNS != 0 {
		t.Errorf("event without timestamp got %d/%v", ev.TimestampNS, ev.HasTimestamp)
	}
	v := ev.Values
	if v[0].Absent || v[0].Uint != 300 || !v[1].Bool || v[2].Str != "a\uFFFDb" {
		t.Errorf("values %+v", v[:3])
	}
	if len(v[3].List) != 1 || v[3].List[0].Type != TypeU16 || v[3].List[0].Uint != 513 {
		t.Errorf("list %+v", v[3].List)
	}
	if !v[4].Unresolved || v[4].Uint != 2 || v[5].Uint != 128 {
		t.Errorf("pooled %+v varint %+v", v[4], v[5])
	}
	warns := strings.Join(r.Warnings(), "\n")
	if !strings.Contains(warns, "version byte 2") || !strings.Contains(warns, "invalid UTF-8") {
		t.Errorf("warnings %q", warns)
	}
	if st := r.Stats(); st.UnresolvedRefs != 1 {
		t.Errorf("unresolved = %d, want 1", st.UnresolvedRefs)
	}
}

func TestReaderAnnotations(t *testing.T) {
	data := frames(func(w *testWriter) {
		w.schema(schemaA)
		w.annotations(0, []Annotation{{FieldIndex: 0, Key: "metrique.unit", Value: "ns"}})
		w.annotations(0x10000, []Annotation{{Key: "dial9.kpi", Value: "true"}}) // truncated to type id 0
		w.annotations(77, []Annotation{{Key: "ignored", Value: "x"}})           // unknown type id
		w.event(schemaA, 1, []Value{{Uint: 1}})
	})
	r := mustReader(t, data)
	evs, err := decodeAll(r)
	if err != nil || len(evs) != 1 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
	want := []Annotation{{0, "metrique.unit", "ns"}, {0, "dial9.kpi", "true"}}
	if got := evs[0].Schema.Annotations; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("annotations %+v, want %+v", got, want)
	}
	if r.Stats().AnnotationFrames != 3 {
		t.Errorf("annotation frames = %d, want 3", r.Stats().AnnotationFrames)
	}
}

// TestReaderRandomRoundTrip writes random files with every field type,
// optional fields, both pools, resets and several streams, and checks that
// every event reads back, from memory, through a one-byte-at-a-time
// reader and gzip-compressed.
func TestReaderRandomRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	typesSeen := map[FieldType]bool{}
	total := 0
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	for iter := 0; iter < sweep(300); iter++ {
		data, want := randomFile(rng)
		gz.Reset()
		zw.Reset(&gz)
		zw.Write(data)
		zw.Close()
		readers := map[string]func() (*Reader, error){
			"bytes":    func() (*Reader, error) { return NewBytesReader(data) },
			"one-byte": func() (*Reader, error) { return NewReader(iotest.OneByteReader(bytes.NewReader(data))) },
			"gzip":     func() (*Reader, error) { return NewBytesReader(gz.Bytes()) },
		}
		for name, open := range readers {
			r, err := open()
			if err != nil {
				t.Fatalf("iter %d %s: %v", iter, name, err)
			}
			got, err := decodeAll(r)
			if err != nil {
				t.Fatalf("iter %d %s: %v", iter, name, err)
			}
			if len(got) != len(want) {
				t.Fatalf("iter %d %s: %d events, want %d", iter, name, len(got), len(want))
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.Schema.Name != w.name || g.Stream != w.stream || g.HasTimestamp != w.hasTS || g.TimestampNS != w.ts {
					t.Fatalf("iter %d %s event %d: got %s/%d/%v/%d, want %s/%d/%v/%d", iter, name, i,
						g.Schema.Name, g.Stream, g.HasTimestamp, g.TimestampNS, w.name, w.stream, w.hasTS, w.ts)
				}
				for j := range w.values {
					if !valueEqual(&g.Values[j], &w.values[j]) {
						t.Fatalf("iter %d %s event %d field %d (%v): got %+v, want %+v", iter, name, i, j,
							g.Schema.Fields[j].Type, g.Values[j], w.values[j])
					}
					typesSeen[g.Schema.Fields[j].Type] = true
				}
			}
			if st := r.Stats(); st.Events != int64(len(want)) {
				t.Fatalf("iter %d %s: stats.Events = %d", iter, name, st.Events)
			}
		}
		total += len(want)
	}
	for _, ty := range allTypes {
		if !typesSeen[ty] || !typesSeen[ty|Optional] {
			t.Errorf("type %v not exercised (optional too)", ty)
		}
	}
	t.Logf("%d random events round-tripped", total)
}

// TestReaderMatchesStreaming decodes a real sample from memory and through
// a one-byte reader: the window refill logic must not change anything.
func TestReaderMatchesStreaming(t *testing.T) {
	data := readSample(t, "demo-2026-03-18-small.bin")
	a, errA := decodeAll(mustReader(t, data))
	r, err := NewReader(iotest.OneByteReader(bytes.NewReader(data)))
	if err != nil {
		t.Fatal(err)
	}
	b, errB := decodeAll(r)
	if errA != nil || errB != nil || len(a) != len(b) || len(a) != 4625 {
		t.Fatalf("%d/%v vs %d/%v", len(a), errA, len(b), errB)
	}
	for i := range a {
		if a[i].Offset != b[i].Offset || a[i].TimestampNS != b[i].TimestampNS {
			t.Fatalf("event %d differs", i)
		}
		for j := range a[i].Values {
			if !valueEqual(&a[i].Values[j], &b[i].Values[j]) {
				t.Fatalf("event %d field %d differs", i, j)
			}
		}
	}
}

type failingReader struct {
	r     io.Reader
	after int
}

var errDisk = errors.New("disk on fire")

func (f *failingReader) Read(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errDisk
	}
	p = p[:min(len(p), f.after)]
	n, err := f.r.Read(p)
	f.after -= n
	return n, err
}

func TestReaderReadError(t *testing.T) {
	data := readSample(t, "demo-2026-03-18-small.bin")
	r, err := NewReader(&failingReader{r: bytes.NewReader(data), after: 70000})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := decodeAll(r)
	if !errors.Is(err, errDisk) {
		t.Fatalf("err = %v, want the read error", err)
	}
	if len(evs) == 0 || evs[len(evs)-1].Offset >= 70000 {
		t.Errorf("%d events kept, last at %d", len(evs), evs[len(evs)-1].Offset)
	}
}

func TestReaderGzipMembers(t *testing.T) {
	var gz bytes.Buffer
	for _, x := range []uint64{1, 2} {
		part := frames(func(w *testWriter) {
			w.schema(schemaA)
			w.event(schemaA, 10, []Value{{Uint: x}})
		})
		zw := gzip.NewWriter(&gz)
		zw.Write(part)
		zw.Close()
	}
	evs, err := decodeAll(mustReader(t, gz.Bytes()))
	if err != nil || len(evs) != 2 || evs[1].Values[0].Uint != 2 || evs[1].Stream != 1 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
}
