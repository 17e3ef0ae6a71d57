package trace_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/trace"
	"github.com/ztsd/ztsd/trace/tracetest"
)

// randomBatch returns 1–4 random spans.
func randomBatch(r *rand.Rand, opt tracetest.GenOptions) []*trace.Span {
	spans := make([]*trace.Span, 1+r.IntN(4))
	for i := range spans {
		spans[i] = tracetest.RandomSpan(r, opt)
	}
	return spans
}

func mustEncode(t testing.TB, spans []*trace.Span) []byte {
	t.Helper()
	b, err := trace.EncodeChunk(nil, spans)
	if err != nil {
		t.Fatalf("EncodeChunk: %v", err)
	}
	return b
}

// TestChunkRoundTripRandom is the codec's property test: for thousands of
// random batches, decode(encode(x)) equals x, encoding is deterministic,
// re-encoding the decoded spans gives the same bytes, and DecodeChunkSpan
// returns the same span as DecodeChunk.
func TestChunkRoundTripRandom(t *testing.T) {
	const iterations = 2000
	var enc trace.ChunkEncoder // reused across iterations
	for seed := uint64(0); seed < iterations; seed++ {
		r := rand.New(rand.NewPCG(seed, 0xc0dec))
		spans := randomBatch(r, tracetest.GenOptions{NonFinite: true})
		for i, s := range spans {
			if err := s.Validate(); err != nil {
				t.Fatalf("seed %d: generator made an invalid span %d: %v", seed, i, err)
			}
		}
		payload := mustEncode(t, spans)
		if again := mustEncode(t, spans); !bytes.Equal(payload, again) {
			t.Fatalf("seed %d: encoding is not deterministic", seed)
		}
		reused, err := enc.Encode(nil, spans)
		if err != nil || !bytes.Equal(payload, reused) {
			t.Fatalf("seed %d: reused ChunkEncoder differs from EncodeChunk (%v)", seed, err)
		}
		got, err := trace.DecodeChunk(payload, trace.DefaultLimits())
		if err != nil {
			t.Fatalf("seed %d: DecodeChunk: %v", seed, err)
		}
		if len(got) != len(spans) {
			t.Fatalf("seed %d: decoded %d spans, want %d", seed, len(got), len(spans))
		}
		for i := range spans {
			if d := trace.Diff(spans[i], got[i]); d != "" {
				t.Fatalf("seed %d span %d: %s", seed, i, d)
			}
		}
		if re := mustEncode(t, got); !bytes.Equal(payload, re) {
			t.Fatalf("seed %d: re-encoding the decoded spans changed the bytes", seed)
		}
		if seed%4 == 0 {
			checkPartialDecoders(t, payload, got, true)
		}
		i := r.IntN(len(spans))
		one, err := trace.DecodeChunkSpan(payload, i, trace.Limits{})
		if err != nil {
			t.Fatalf("seed %d: DecodeChunkSpan(%d): %v", seed, i, err)
		}
		if d := trace.Diff(spans[i], one); d != "" {
			t.Fatalf("seed %d: DecodeChunkSpan(%d): %s", seed, i, d)
		}
	}
}

// checkPartialDecoders checks DecodeChunkSummaries, DecodeChunkSpans and
// ChunkStrings against the fully decoded spans of payload. encoded says
// payload came from the encoder, whose string table holds exactly the
// distinct strings of the spans.
func checkPartialDecoders(t testing.TB, payload []byte, full []*trace.Span, encoded bool) {
	t.Helper()
	sums, err := trace.DecodeChunkSummaries(payload, trace.Limits{})
	if err != nil {
		t.Fatalf("DecodeChunkSummaries: %v", err)
	}
	if len(sums) != len(full) {
		t.Fatalf("DecodeChunkSummaries: %d spans, want %d", len(sums), len(full))
	}
	idx := make([]int, 0, 2*len(full))
	for i := range full {
		want := *full[i]
		want.Root = nil
		if d := trace.Diff(&want, sums[i]); d != "" {
			t.Fatalf("summary %d: %s", i, d)
		}
		idx = append(idx, len(full)-1-i, i)
	}
	some, err := trace.DecodeChunkSpans(payload, idx, trace.Limits{})
	if err != nil {
		t.Fatalf("DecodeChunkSpans(%v): %v", idx, err)
	}
	for k, i := range idx {
		if d := trace.Diff(full[i], some[k]); d != "" {
			t.Fatalf("DecodeChunkSpans(%v)[%d]: %s", idx, k, d)
		}
	}
	strs, err := trace.ChunkStrings(payload, trace.Limits{})
	if err != nil {
		t.Fatalf("ChunkStrings: %v", err)
	}
	if !encoded {
		return
	}
	used := spanStrings(full)
	if len(strs) != len(used) {
		t.Fatalf("ChunkStrings: %d strings, spans use %d distinct", len(strs), len(used))
	}
	for _, s := range strs {
		if !used[s] {
			t.Fatalf("ChunkStrings: %q is not used by any span", s)
		}
	}
}

// spanStrings collects every distinct string the spans hold.
func spanStrings(spans []*trace.Span) map[string]bool {
	set := map[string]bool{}
	var value func(v trace.Value)
	attrs := func(a trace.Attrs) {
		for _, kv := range a {
			set[kv.Key] = true
			value(kv.Value)
		}
	}
	value = func(v trace.Value) {
		switch v.Kind {
		case trace.KindString:
			set[v.Str] = true
		case trace.KindList:
			for _, e := range v.List {
				value(e)
			}
		case trace.KindMap:
			attrs(v.Map)
		}
	}
	for _, s := range spans {
		if s.Type != "" {
			set[s.Type] = true
		}
		if s.Source != "" {
			set[s.Source] = true
		}
		attrs(s.Attrs)
		s.Root.Walk(func(r *trace.Record, _ int) bool {
			set[r.Method] = true
			attrs(r.Attrs)
			for x := r.Exception; x != nil; x = x.Cause {
				set[x.Class], set[x.Message] = true, true
				for _, f := range x.Stack {
					set[f.Class], set[f.Method], set[f.File] = true, true, true
				}
			}
			return true
		})
	}
	return set
}

func TestChunkEncoderReuse(t *testing.T) {
	var enc trace.ChunkEncoder
	r := rand.New(rand.NewPCG(11, 11))
	for i := range 50 {
		spans := randomBatch(r, tracetest.GenOptions{})
		if i%5 == 4 { // an error in between must not leak state
			bad := *spans[0]
			bad.Type = "\xff"
			if _, err := enc.Encode(nil, append(spans, &bad)); err == nil {
				t.Fatal("invalid UTF-8 accepted")
			}
		}
		got, err := enc.Encode(nil, spans)
		if err != nil {
			t.Fatal(err)
		}
		if want := mustEncode(t, spans); !bytes.Equal(got, want) {
			t.Fatalf("batch %d: reused encoder output differs", i)
		}
	}
}

// zorkaSampleSpan is the span the Zorka sample traces1-{0-agd,1-trc}.cbor
// describes (testdata README: one record, six attributes).
func zorkaSampleSpan() *trace.Span {
	tid, _ := trace.ParseTraceID("7f128efec83c68ec733c1116ad0c9105")
	s := &trace.Span{
		TraceID:    tid,
		SpanID:     1,
		StartNS:    1556820267280 * 1e6,
		DurationNS: 6225920,
		Calls:      1,
		Recs:       1,
		Source:     trace.SourceZorka,
		Root: &trace.Record{
			Method:     "void org.apache.catalina.core.StandardEngineValve.invoke(Request, Response)",
			DurationNS: 6225920,
			Calls:      1,
		},
	}
	s.Attrs.Set("component", trace.String("http"))
	s.Attrs.Set("http.url", trace.String("/index.jsp"))
	s.Attrs.Set("http.header.in.x-some-header.0", trace.String("xxx"))
	s.Attrs.Set("http.status_code", trace.String("200"))
	s.Attrs.Set("http.method", trace.String("GET"))
	s.Attrs.Set("http.header.out.x-other-header.0", trace.String("yyy"))
	return s
}

// exampleSpan is the second span of the documented example chunk: a child
// record with attributes and an exception, and values of several kinds.
func exampleSpan() *trace.Span {
	tid, _ := trace.ParseTraceID("7f128efec83c68ec733c1116ad0c9105")
	s := &trace.Span{
		TraceID:    tid,
		SpanID:     2,
		ParentID:   1,
		StartNS:    1556820267281 * 1e6,
		DurationNS: 1000,
		Calls:      2,
		Errors:     1,
		Recs:       2,
		Error:      true,
		Source:     trace.SourceZorka,
		Root:       &trace.Record{Method: "a", DurationNS: 1000, Calls: 2},
	}
	s.Attrs.Set("component", trace.String("jdbc"))
	s.Root.Children = []*trace.Record{{
		Method: "b", StartNS: 100, DurationNS: 500, Calls: 1, Errors: 1,
		Attrs: trace.Attrs{{Key: "rows", Value: trace.List(trace.Int(-1), trace.Float(1.5), trace.Null())}},
		Exception: &trace.Exception{
			Class: "E", Message: "boom",
			Stack: []trace.StackFrame{{Class: "a", Method: "b", File: "F.java", Line: 42}},
		},
	}}
	return s
}

// goldenChunk is the byte-exact encoding of [zorkaSampleSpan, exampleSpan],
// annotated as in docs/format/chunk-payload.md ('#' starts a comment).
const goldenChunk = `
82                                      # array(2): payload
c7 95                                   # tag 7, array(21): string table
  784b 766f6964206f72672e6170616368652e636174616c696e612e636f72652e5374616e64617264456e67696e6556616c76652e696e766f6b6528526571756573742c20526573706f6e736529
                                        # [0] "void org.apache.catalina.core.StandardEngineValve.invoke(Request, Response)"
  65 7a6f726b61                         # [1] "zorka"
  69 636f6d706f6e656e74                 # [2] "component"
  64 68747470                           # [3] "http"
  781e 687474702e6865616465722e696e2e782d736f6d652d6865616465722e30
                                        # [4] "http.header.in.x-some-header.0"
  63 787878                             # [5] "xxx"
  7820 687474702e6865616465722e6f75742e782d6f746865722d6865616465722e30
                                        # [6] "http.header.out.x-other-header.0"
  63 797979                             # [7] "yyy"
  6b 687474702e6d6574686f64             # [8] "http.method"
  63 474554                             # [9] "GET"
  70 687474702e7374617475735f636f6465   # [10] "http.status_code"
  63 323030                             # [11] "200"
  68 687474702e75726c                   # [12] "http.url"
  6a 2f696e6465782e6a7370               # [13] "/index.jsp"
  61 61                                 # [14] "a"
  64 6a646263                           # [15] "jdbc"
  61 62                                 # [16] "b"
  64 726f7773                           # [17] "rows"
  61 45                                 # [18] "E"
  64 626f6f6d                           # [19] "boom"
  66 462e6a617661                       # [20] "F.java"
82                                      # array(2): span list
c8 82                                   # span 0: tag 8, array(2): info map, span attrs
  c2 a9                                 #   tag 2, map(9): info map
    01 50 7f128efec83c68ec733c1116ad0c9105  # TRACE_ID
    05 1b 0000016a79b81110              #   TSTAMP 1556820267280 ms
    06 1a 005f0000                      #   DURATION 6225920 ns
    08 01                               #   RECS 1
    09 01                               #   CALLS 1
    0c 1b 159aefc8e25a6400              #   TSTART 1556820267280000000 ns
    0e c6 00                            #   METHOD -> [0]
    12 01                               #   SPAN 1
    13 c6 01                            #   SOURCE -> "zorka"
  c3 a6                                 #   tag 3, map(6): span attributes
    c6 02 c6 03                         #   component: http
    c6 04 c6 05                         #   http.header.in.x-some-header.0: xxx
    c6 06 c6 07                         #   http.header.out.x-other-header.0: yyy
    c6 08 c6 09                         #   http.method: GET
    c6 0a c6 0b                         #   http.status_code: "200"
    c6 0c c6 0d                         #   http.url: /index.jsp
c8 83                                   # span 1: tag 8, array(3): info map, span attrs, 1 child
  c2 ad                                 #   tag 2, map(13)
    01 50 7f128efec83c68ec733c1116ad0c9105  # TRACE_ID
    05 1b 0000016a79b81111              #   TSTAMP 1556820267281 ms
    06 19 03e8                          #   DURATION 1000
    08 02                               #   RECS 2
    09 02                               #   CALLS 2
    0a 01                               #   ERRORS 1
    0b 01                               #   FLAGS error
    0c 1b 159aefc8e269a640              #   TSTART 1556820267281000000
    0e c6 0e                            #   METHOD -> "a"
    11 01                               #   PARENT 1
    12 02                               #   SPAN 2
    13 c6 01                            #   SOURCE -> "zorka"
    17 00                               #   ROOT_ERRORS 0 (span ERRORS is 1)
  c3 a1 c6 02 c6 0f                     #   span attributes {component: jdbc}
  c8 83                                 #   child record: tag 8, array(3): info map, attrs, exception
    c2 a5                               #     map(5)
      06 19 01f4                        #     DURATION 500
      09 01                             #     CALLS 1
      0a 01                             #     ERRORS 1
      0c 18 64                          #     TSTART 100 (ns after the span start)
      0e c6 10                          #     METHOD -> "b"
    c4 a1 c6 11 83 20 f9 3e00 f6        #     tag 4: record attributes {rows: [-1, 1.5, null]}
    d8 22 84                            #     tag 34, array(4): exception
      c6 12 c6 13                       #     class "E", message "boom"
      81 84 c6 0e c6 10 c6 14 18 2a     #     stack: [["a", "b", "F.java", 42]]
      f6                                #     cause: null
`

// parseAnnotatedHex strips '#' comments and white space from an annotated
// hex listing.
func parseAnnotatedHex(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		b.WriteString(strings.Join(strings.Fields(line), ""))
	}
	return b.String()
}

func TestChunkGolden(t *testing.T) {
	payload := mustEncode(t, []*trace.Span{zorkaSampleSpan(), exampleSpan()})
	want := parseAnnotatedHex(goldenChunk)
	if got := hex.EncodeToString(payload); got != want {
		t.Errorf("encoding changed (update docs/format/chunk-payload.md too):\n got %s\nwant %s", got, want)
	}
	spans, err := trace.DecodeChunk(payload, trace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []*trace.Span{zorkaSampleSpan(), exampleSpan()} {
		if d := trace.Diff(want, spans[i]); d != "" {
			t.Errorf("span %d: %s", i, d)
		}
	}
}

func TestChunkEmpty(t *testing.T) {
	payload := mustEncode(t, nil)
	if got := hex.EncodeToString(payload); got != "82c78080" {
		t.Fatalf("empty chunk = %s, want 82c78080", got)
	}
	spans, err := trace.DecodeChunk(payload, trace.Limits{})
	if err != nil || len(spans) != 0 {
		t.Fatalf("DecodeChunk(empty) = %v, %v", spans, err)
	}
	if _, err := trace.DecodeChunkSpan(payload, 0, trace.Limits{}); !errors.Is(err, trace.ErrNoSuchSpan) {
		t.Fatalf("DecodeChunkSpan(empty, 0) = %v, want ErrNoSuchSpan", err)
	}
}

func TestEncodeChunkAppends(t *testing.T) {
	prefix := []byte("ZCH0")
	payload, err := trace.EncodeChunk(prefix, []*trace.Span{zorkaSampleSpan()})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(payload, []byte("ZCH0\x82\xc7")) {
		t.Fatalf("EncodeChunk did not append after dst: % x", payload[:8])
	}
	if _, err := trace.DecodeChunk(payload[4:], trace.Limits{}); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeChunkSpanIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	spans := tracetest.RealisticTrace(r, 10, 6, 20)
	payload := mustEncode(t, spans)
	for i := range spans {
		got, err := trace.DecodeChunkSpan(payload, i, trace.Limits{})
		if err != nil {
			t.Fatalf("span %d: %v", i, err)
		}
		if d := trace.Diff(spans[i], got); d != "" {
			t.Fatalf("span %d: %s", i, d)
		}
	}
	for _, i := range []int{-1, len(spans), math.MaxInt} {
		if _, err := trace.DecodeChunkSpan(payload, i, trace.Limits{}); !errors.Is(err, trace.ErrNoSuchSpan) {
			t.Errorf("DecodeChunkSpan(%d) = %v, want ErrNoSuchSpan", i, err)
		}
	}
	// Records of skipped spans are not counted against MaxRecords.
	lim := trace.Limits{MaxRecords: 20}
	if _, err := trace.DecodeChunkSpan(payload, 9, lim); err != nil {
		t.Fatalf("DecodeChunkSpan with MaxRecords 20: %v", err)
	}
	if _, err := trace.DecodeChunk(payload, lim); err == nil {
		t.Fatal("DecodeChunk with MaxRecords 20 accepted 200 records")
	}
}

// TestChunkTruncated cuts a payload at every offset: each prefix must be
// rejected as corrupt, at an offset inside the prefix.
func TestChunkTruncated(t *testing.T) {
	payload := mustEncode(t, []*trace.Span{zorkaSampleSpan(), exampleSpan()})
	for n := 0; n < len(payload); n++ {
		_, err := trace.DecodeChunk(payload[:n], trace.Limits{})
		var ce *trace.CorruptPayloadError
		if !errors.As(err, &ce) {
			t.Fatalf("prefix of %d bytes: err = %v, want CorruptPayloadError", n, err)
		}
		if ce.Offset < 0 || ce.Offset > n {
			t.Fatalf("prefix of %d bytes: offset %d outside it", n, ce.Offset)
		}
		if _, err := trace.DecodeChunkSpan(payload[:n], 1, trace.Limits{}); err == nil {
			t.Fatalf("prefix of %d bytes: DecodeChunkSpan(1) accepted it", n)
		}
	}
}

// TestChunkBitFlips flips every bit of a small payload: the decoder must
// return a CorruptPayloadError or spans that encode again (a different
// valid value), and never panic.
func TestChunkBitFlips(t *testing.T) {
	payload := mustEncode(t, []*trace.Span{zorkaSampleSpan(), exampleSpan()})
	var corrupt, valid int
	for i := range payload {
		for bit := range 8 {
			p := bytes.Clone(payload)
			p[i] ^= 1 << bit
			spans, err := trace.DecodeChunk(p, trace.Limits{})
			if err != nil {
				var ce *trace.CorruptPayloadError
				if !errors.As(err, &ce) {
					t.Fatalf("byte %d bit %d: err = %v, want CorruptPayloadError", i, bit, err)
				}
				corrupt++
				continue
			}
			valid++
			if _, err := trace.EncodeChunk(nil, spans); err != nil {
				t.Fatalf("byte %d bit %d: decoded spans do not encode: %v", i, bit, err)
			}
			for j := range 2 {
				if _, err := trace.DecodeChunkSpan(p, j, trace.Limits{}); err != nil {
					t.Fatalf("byte %d bit %d: DecodeChunk accepted it but DecodeChunkSpan(%d): %v", i, bit, j, err)
				}
			}
		}
	}
	t.Logf("%d bit flips: %d rejected as corrupt, %d decoded to another valid value", corrupt+valid, corrupt, valid)
	// Most bytes are string text, where a flip often leaves valid UTF-8: the
	// chunk CRC, not the payload syntax, is what detects those.
	if corrupt == 0 {
		t.Error("no bit flip was detected")
	}
}

func hx(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// deepPayload is one span whose root has a chain of depth child records.
func deepPayload(depth int) []byte {
	b := hx("82 c7 81 60 81") // string table [""], span list of 1
	b = append(b, hx("c8 82 c2 a2 01 50 00000000000000000000000000000001 0e c6 00")...)
	for range depth - 1 {
		b = append(b, hx("c8 82 c2 a1 0e c6 00")...)
	}
	// the innermost record has no child: patch its array(2) to array(1)
	b[len(b)-6] = 0x81
	return b
}

func TestChunkDeepNesting(t *testing.T) {
	spans, err := trace.DecodeChunk(deepPayload(trace.MaxDepth), trace.Limits{})
	if err != nil {
		t.Fatalf("depth %d: %v", trace.MaxDepth, err)
	}
	if n := spans[0].Root.CountRecords(); n != trace.MaxDepth {
		t.Fatalf("decoded %d records, want %d", n, trace.MaxDepth)
	}
	// A hostile million-deep tree must be an error, not a stack overflow.
	for _, depth := range []int{trace.MaxDepth + 1, 1_000_000} {
		_, err := trace.DecodeChunk(deepPayload(depth), trace.Limits{})
		var ce *trace.CorruptPayloadError
		if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "deeper than 1000") {
			t.Fatalf("depth %d: err = %v, want nesting error", depth, err)
		}
	}
	// The encoder refuses what the decoder would refuse.
	s := zorkaSampleSpan()
	r := s.Root
	for range trace.MaxDepth {
		c := &trace.Record{Method: "m"}
		r.Children = []*trace.Record{c}
		r = c
	}
	if _, err := trace.EncodeChunk(nil, []*trace.Span{s}); err == nil || !strings.Contains(err.Error(), "deeper than") {
		t.Fatalf("EncodeChunk(depth %d) = %v, want error", trace.MaxDepth+1, err)
	}
}

// TestChunkCorrupt decodes crafted payloads and checks the error names the
// right offset and problem.
func TestChunkCorrupt(t *testing.T) {
	const tid = "01 50 00000000000000000000000000000001"
	const span22 = "c8 81 c2 a1 " + tid + " "
	cases := []struct {
		name    string
		payload string
		lim     trace.Limits
		offset  int
		reason  string
	}{
		{"empty", "", trace.Limits{}, 0, "empty payload"},
		{"not an array of 2 or 3", "84 c7 80 80 80 80", trace.Limits{}, 0, "want 0x82"},
		// Version 2 (0x83): a span index after the string table. A span of
		// only a trace id is 22 bytes: "+span22+".
		{"no span index", "83 c7 80 82 " + span22 + span22, trace.Limits{}, 3, "span index: want tag 9"},
		{"span index not a pair", "83 c7 80 c9 81 01 82 " + span22 + span22, trace.Limits{}, 4, "array of 1, want 2"},
		{"span index stride 0", "83 c7 80 c9 82 00 80 82 " + span22 + span22, trace.Limits{}, 5, "stride 0"},
		{"span index stride over limit", "83 c7 80 c9 82 03 80 82 " + span22 + span22, trace.Limits{MaxSpans: 2}, 5, "stride 3"},
		{"span index distance 0", "83 c7 80 c9 82 01 81 00 82 " + span22 + span22, trace.Limits{}, 7, "distance 0"},
		{"span index too few entries", "83 c7 80 c9 82 01 80 82 " + span22 + span22, trace.Limits{}, 3, "0 entries for 2 spans at stride 1, want 1"},
		{"span index too many entries", "83 c7 80 c9 82 01 82 16 16 82 " + span22 + span22, trace.Limits{}, 3, "2 entries for 2 spans at stride 1, want 1"},
		{"span index past the end", "83 c7 80 c9 82 01 81 18 2c 82 " + span22 + span22, trace.Limits{}, 7, "past the payload's end"},
		{"span index off by one", "83 c7 80 c9 82 01 81 15 82 " + span22 + span22, trace.Limits{}, 7, "says span 1 starts at offset 30, it starts at 31"},
		{"no string table tag", "82 80 80", trace.Limits{}, 1, "string table: want tag 7"},
		{"indefinite table", "82 c7 9f ff 80", trace.Limits{}, 2, "indefinite length"},
		{"table entry not text", "82 c7 81 41 61 80", trace.Limits{}, 3, "want a text string"},
		{"table entry not UTF-8", "82 c7 81 62 c3 28 80", trace.Limits{}, 3, "not valid UTF-8"},
		{"table length beyond payload", "82 c7 9b 0fffffffffffffff", trace.Limits{}, 2, "cannot fit"},
		{"string beyond payload", "82 c7 81 79 0100", trace.Limits{}, 3, "only 0 left"},
		{"too many strings", "82 c7 83 60 61 61 61 62 80", trace.Limits{MaxStrings: 2}, 2, "more than the limit 2"},
		{"string too long", "82 c7 81 63 616263 80", trace.Limits{MaxStringLen: 2}, 3, "more than the limit 2"},
		{"too many spans", "82 c7 80 82 c8 81 c2 a1 " + tid + " c8 81 c2 a1 " + tid, trace.Limits{MaxSpans: 1}, 3, "more than the limit 1"},
		{"span not a record", "82 c7 80 81 c9 81", trace.Limits{}, 4, "span record: want tag 8"},
		{"empty record", "82 c7 80 81 c8 80", trace.Limits{}, 4, "empty"},
		{"no info map", "82 c7 80 81 c8 81 c3 a0", trace.Limits{}, 6, "span info map: want tag 2"},
		{"no trace id", "82 c7 80 81 c8 81 c2 a0", trace.Limits{}, 7, "without TRACE_ID"},
		{"short trace id", "82 c7 80 81 c8 81 c2 a1 01 48 0000000000000001", trace.Limits{}, 9, "16-byte string"},
		{"keys out of order", "82 c7 80 81 c8 81 c2 a2 06 01 " + tid, trace.Limits{}, 10, "out of order"},
		{"repeated key", "82 c7 80 81 c8 81 c2 a2 " + tid + " 01 50 00000000000000000000000000000002", trace.Limits{}, 26, "out of order"},
		{"unknown key", "82 c7 80 81 c8 81 c2 a2 " + tid + " 0d 00", trace.Limits{}, 26, "unknown span info key 0x0d"},
		{"unknown flag", "82 c7 80 81 c8 81 c2 a2 " + tid + " 0b 04", trace.Limits{}, 27, "unknown bits"},
		{"tstamp disagrees", "82 c7 80 81 c8 81 c2 a3 " + tid + " 05 01 0c 00", trace.Limits{}, 7, "disagrees"},
		{"tstamp missing", "82 c7 80 81 c8 81 c2 a2 " + tid + " 0c 1a 3b9aca00", trace.Limits{}, 7, "disagrees"},
		{"int overflow", "82 c7 80 81 c8 81 c2 a2 " + tid + " 06 1b 8000000000000000", trace.Limits{}, 27, "overflows int64"},
		{"chunk num overflow", "82 c7 80 81 c8 81 c2 a2 " + tid + " 02 1b 0000000100000000", trace.Limits{}, 27, "overflows uint32"},
		{"ref outside table", "82 c7 81 60 81 c8 81 c2 a2 " + tid + " 0e c6 01", trace.Limits{}, 28, "string ref 1 outside"},
		{"ref not tagged", "82 c7 81 60 81 c8 81 c2 a2 " + tid + " 0e 60", trace.Limits{}, 28, "want tag 6"},
		{"root key without root", "82 c7 80 81 c8 81 c2 a2 " + tid + " 14 01", trace.Limits{}, 26, "without METHOD"},
		{"open without root", "82 c7 80 81 c8 81 c2 a2 " + tid + " 0b 02", trace.Limits{}, 7, "without METHOD"},
		{"child without root", "82 c7 81 60 81 c8 82 c2 a1 " + tid + " c8 81 c2 a1 0e c6 00", trace.Limits{}, 27, "tag 8 not allowed"},
		{"child without method", "82 c7 81 60 81 c8 82 c2 a2 " + tid + " 0e c6 00 c8 81 c2 a0", trace.Limits{}, 33, "without METHOD"},
		{"span key in child", "82 c7 81 60 81 c8 82 c2 a2 " + tid + " 0e c6 00 c8 81 c2 a2 0e c6 00 12 01", trace.Limits{}, 37, "not allowed in a child record"},
		{"span-only key in child", "82 c7 81 60 81 c8 82 c2 a2 " + tid + " 0e c6 00 c8 81 c2 a2 08 01 0e c6 00", trace.Limits{}, 34, "not allowed in a child record"},
		{"error flag on child", "82 c7 81 60 81 c8 82 c2 a2 " + tid + " 0e c6 00 c8 81 c2 a2 0b 01 0e c6 00", trace.Limits{}, 35, "unknown bits"},
		{"record attrs before span attrs", "82 c7 81 60 81 c8 83 c2 a2 " + tid + " 0e c6 00 c4 a0 c3 a0", trace.Limits{}, 32, "tag 3 not allowed"},
		{"attrs after child", "82 c7 81 60 81 c8 83 c2 a2 " + tid + " 0e c6 00 c8 81 c2 a1 0e c6 00 c4 a0", trace.Limits{}, 37, "tag 4 not allowed"},
		{"unsorted attrs", "82 c7 82 61 62 61 61 81 c8 82 c2 a1 " + tid + " c3 a2 c6 00 f6 c6 01 f6", trace.Limits{}, 35, "not sorted/unique"},
		{"text string value", "82 c7 81 60 81 c8 82 c2 a1 " + tid + " c3 a1 c6 00 60", trace.Limits{}, 31, "strings must be refs"},
		{"undefined value", "82 c7 81 60 81 c8 82 c2 a1 " + tid + " c3 a1 c6 00 f7", trace.Limits{}, 31, "simple value 23"},
		{"exception of 3", "82 c7 81 60 81 c8 82 c2 a2 " + tid + " 0e c6 00 d822 83 c6 00 c6 00 80", trace.Limits{}, 32, "3 elements, want 4"},
		{"exception bad cause", "82 c7 81 60 81 c8 82 c2 a2 " + tid + " 0e c6 00 d822 84 c6 00 c6 00 80 f5", trace.Limits{}, 38, "want tag 34"},
		{"trailing bytes", "82 c7 80 80 00", trace.Limits{}, 4, "1 bytes after"},
		{"too many records", "82 c7 81 60 81 c8 82 c2 a2 " + tid + " 0e c6 00 c8 81 c2 a1 0e c6 00", trace.Limits{MaxRecords: 1}, 30, "more than 1 records"},
		{"depth limit", "82 c7 81 60 81 c8 82 c2 a2 " + tid + " 0e c6 00 c8 81 c2 a1 0e c6 00", trace.Limits{MaxDepth: 1}, 30, "deeper than 1"},
		{"reserved additional info", "82 c7 80 81 c8 81 c2 a1 01 5c", trace.Limits{}, 9, "reserved"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := trace.DecodeChunk(hx(c.payload), c.lim)
			var ce *trace.CorruptPayloadError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want CorruptPayloadError", err)
			}
			if ce.Offset != c.offset || !strings.Contains(ce.Reason, c.reason) {
				t.Fatalf("got offset %d %q, want offset %d containing %q", ce.Offset, ce.Reason, c.offset, c.reason)
			}
		})
	}
}

// TestChunkTableHeads: the lazy readers (NewChunkView, a partial view,
// DecodeChunkSummaries, DecodeChunkSpan), which walk the string table's
// short heads on a fast path, read tables of strings whose heads are one,
// two and three bytes long as DecodeChunk does, and report a bad entry
// with DecodeChunk's offset and reason.
func TestChunkTableHeads(t *testing.T) {
	var attrs trace.Attrs
	for i, n := range []int{0, 1, 23, 24, 200, 255, 256, 1000} {
		attrs = append(attrs, trace.Attr{Key: fmt.Sprintf("k%d", i), Value: trace.String(strings.Repeat("é", n/2) + strings.Repeat("x", n%2))})
	}
	sp := &trace.Span{TraceID: trace.TraceID{1}, SpanID: 2, StartNS: 1e18, DurationNS: 5, Attrs: attrs,
		Root: &trace.Record{Method: strings.Repeat("m", 300), DurationNS: 5, Calls: 1}}
	payload := mustEncode(t, []*trace.Span{sp, sp})
	for name, read := range map[string]func([]byte, trace.Limits) (*trace.Span, error){
		"DecodeChunk": func(p []byte, l trace.Limits) (*trace.Span, error) {
			s, err := trace.DecodeChunk(p, l)
			return first(s), err
		},
		"Summaries": func(p []byte, l trace.Limits) (*trace.Span, error) {
			s, err := trace.DecodeChunkSummaries(p, l)
			return first(s), err
		},
		"DecodeChunkSpan": func(p []byte, l trace.Limits) (*trace.Span, error) { return trace.DecodeChunkSpan(p, 1, l) },
		"NewChunkView": func(p []byte, l trace.Limits) (*trace.Span, error) {
			v, err := trace.NewChunkView(p, l)
			if err != nil {
				return nil, err
			}
			return v.Span(1)
		},
		"NewPartialChunkView": func(p []byte, l trace.Limits) (*trace.Span, error) {
			v, err := trace.NewPartialChunkView(newFakeFiller(p, []int{len(p) / 3}, -1), l)
			if err != nil {
				return nil, err
			}
			return v.Span(1)
		},
	} {
		got, err := read(payload, trace.Limits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "Summaries" {
			if !got.Attrs.Equal(sp.Attrs) {
				t.Fatalf("%s: attributes differ", name)
			}
		} else if !got.Equal(sp) {
			t.Fatalf("%s: span differs", name)
		}
		const x32 = "6162636465666768696a6b6c6d6e6f707172737475767778797a414243444546"
		for _, c := range []struct {
			name, payload string
			lim           trace.Limits
			offset        int
			reason        string
		}{
			{"one-byte head past the end", "82 c7 81 65 6162", trace.Limits{}, 3, "entry 0: 5 bytes but only 2 left"},
			{"two-byte head past the end", "82 c7 82 60 78 20 6162", trace.Limits{}, 4, "entry 1: 32 bytes but only 2 left"},
			{"two-byte head cut", "82 c7 81 78", trace.Limits{}, 3, "truncated argument"},
			{"one-byte head too long", "82 c7 81 63 616263 80", trace.Limits{MaxStringLen: 2}, 3, "entry 0: 3 bytes, more than the limit 2"},
			{"two-byte head too long", "82 c7 82 60 78 20 " + x32 + " 80", trace.Limits{MaxStringLen: 31}, 4, "entry 1: 32 bytes, more than the limit 31"},
			{"not text", "82 c7 82 60 41 61 80", trace.Limits{}, 4, "entry 1: want a text string"},
		} {
			_, err := read(hx(c.payload), c.lim)
			var ce *trace.CorruptPayloadError
			if !errors.As(err, &ce) || ce.Offset != c.offset || !strings.Contains(ce.Reason, c.reason) {
				t.Fatalf("%s, %s: err = %v, want offset %d %q", name, c.name, err, c.offset, c.reason)
			}
		}
	}
}

func first(s []*trace.Span) *trace.Span {
	if len(s) == 0 {
		return nil
	}
	return s[0]
}

func TestEncodeChunkRejects(t *testing.T) {
	deepValue := trace.Int(1)
	for range trace.MaxValueDepth {
		deepValue = trace.List(deepValue)
	}
	var longCause *trace.Exception
	for range trace.MaxDepth + 1 {
		longCause = &trace.Exception{Class: "E", Cause: longCause}
	}
	cases := []struct {
		name   string
		modify func(s *trace.Span)
		want   string
	}{
		{"unsorted span attrs", func(s *trace.Span) { s.Attrs[0], s.Attrs[1] = s.Attrs[1], s.Attrs[0] }, "not sorted/unique"},
		{"repeated record attr", func(s *trace.Span) {
			s.Root.Attrs = trace.Attrs{{Key: "k", Value: trace.Int(1)}, {Key: "k", Value: trace.Int(2)}}
		}, "not sorted/unique"},
		{"invalid UTF-8", func(s *trace.Span) { s.Root.Method = "bad \xff" }, "not valid UTF-8"},
		{"nil child", func(s *trace.Span) { s.Root.Children = []*trace.Record{nil} }, "nil child record"},
		{"value too deep", func(s *trace.Span) { s.Attrs.Set("deep", deepValue) }, "nested deeper than 32"},
		{"unknown kind", func(s *trace.Span) { s.Attrs.Set("odd", trace.Value{Kind: 99}) }, "unknown value kind"},
		{"cause chain too long", func(s *trace.Span) { s.Root.Exception = longCause }, "cause chain longer than"},
		{"string too long", func(s *trace.Span) { s.Type = strings.Repeat("x", trace.DefaultLimits().MaxStringLen+1) }, "longer than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := zorkaSampleSpan()
			c.modify(s)
			dst := []byte("keep")
			out, err := trace.EncodeChunk(dst, []*trace.Span{s})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			if string(out) != "keep" {
				t.Fatalf("dst changed on error: %q", out)
			}
		})
	}
	if _, err := trace.EncodeChunk(nil, []*trace.Span{nil}); err == nil {
		t.Fatal("EncodeChunk accepted a nil span")
	}
	// MaxValueDepth itself is fine.
	ok := trace.Int(1)
	for range trace.MaxValueDepth - 1 {
		ok = trace.List(ok)
	}
	s := zorkaSampleSpan()
	s.Attrs.Set("deep", ok)
	got, err := trace.DecodeChunk(mustEncode(t, []*trace.Span{s}), trace.Limits{})
	if err != nil || !got[0].Equal(s) {
		t.Fatalf("value of depth %d: %v", trace.MaxValueDepth, err)
	}
}

// TestChunkRootVariants covers the span/root relationships the info map
// encodes with override keys.
func TestChunkRootVariants(t *testing.T) {
	base := func() *trace.Span {
		tid, _ := trace.ParseTraceID("000102030405060708090a0b0c0d0e0f")
		return &trace.Span{TraceID: tid, StartNS: -1, DurationNS: 10, Calls: 3, Errors: 2}
	}
	variants := map[string]func(s *trace.Span){
		"no root":      func(s *trace.Span) {},
		"root mirrors": func(s *trace.Span) { s.Root = &trace.Record{DurationNS: 10, Calls: 3, Errors: 2} },
		"root differs": func(s *trace.Span) {
			s.Root = &trace.Record{StartNS: -5, DurationNS: 0, Calls: 0, Errors: 7, Open: true}
		},
		"root empty names": func(s *trace.Span) { s.Root = &trace.Record{Method: ""} },
		"span zero":        func(s *trace.Span) { *s = trace.Span{TraceID: s.TraceID, Root: &trace.Record{DurationNS: 1}} },
	}
	for name, modify := range variants {
		s := base()
		modify(s)
		got, err := trace.DecodeChunk(mustEncode(t, []*trace.Span{s}), trace.Limits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := trace.Diff(s, got[0]); d != "" {
			t.Errorf("%s: %s", name, d)
		}
	}
}

// TestChunkBytesPerRecord pins the space cost of realistic spans before
// compression: every record costs its info map (~22 bytes with ns times and
// a method ref), and each span adds ids, attributes and its unique strings.
func TestChunkBytesPerRecord(t *testing.T) {
	cases := []struct {
		traces int
		max    float64 // bytes per record, string table included
	}{
		{10, 46},  // small chunk: the string table (~500 method names) dominates
		{100, 31}, // larger chunks amortise it
	}
	for _, c := range cases {
		r := rand.New(rand.NewPCG(1, 1))
		var spans []*trace.Span
		for range c.traces {
			spans = append(spans, tracetest.RealisticTrace(r, 10, 6, 20)...)
		}
		payload := mustEncode(t, spans)
		perRecord := float64(len(payload)) / float64(len(spans)*20)
		t.Logf("%d spans, %d records: %d bytes, %.1f bytes/record", len(spans), len(spans)*20, len(payload), perRecord)
		if perRecord > c.max {
			t.Errorf("%d traces: %.1f bytes per record, more than %.0f", c.traces, perRecord, c.max)
		}
	}
	// The marginal record: a child whose method is already in the table,
	// with ms-scale ns times: tag+array+tag+map 4, DURATION 6, CALLS 2,
	// TSTART 6, METHOD 3 = 21 bytes.
	s := zorkaSampleSpan()
	one := len(mustEncode(t, []*trace.Span{s}))
	for i := range 100 {
		s.Root.Children = append(s.Root.Children, &trace.Record{
			Method: s.Root.Method, StartNS: 1_000_000 + int64(i)*10_000, DurationNS: 2_000_000, Calls: 1,
		})
	}
	perChild := float64(len(mustEncode(t, []*trace.Span{s}))-one) / 100
	t.Logf("marginal child record: %.1f bytes", perChild)
	if perChild > 21.5 {
		t.Errorf("a child record costs %.1f bytes, want ≤ 21.5", perChild)
	}
}

func FuzzDecodeChunk(f *testing.F) {
	f.Add(mustEncode(f, []*trace.Span{zorkaSampleSpan(), exampleSpan()}))
	f.Add(mustEncode(f, nil))
	f.Add(deepPayload(5))
	r := rand.New(rand.NewPCG(3, 3))
	for range 8 {
		f.Add(mustEncode(f, randomBatch(r, tracetest.GenOptions{NonFinite: true, MaxDepth: 3})))
	}
	f.Add(mustEncode(f, tracetest.RealisticTrace(r, 3, 6, 5)))
	// A span index (more than SpanIndexStride spans), and the same spans
	// without one (version 1, as written before it).
	indexed := mustEncode(f, tracetest.RealisticTrace(r, 2*trace.SpanIndexStride+3, 2, 2))
	f.Add(indexed)
	old, err := trace.StripSpanIndex(indexed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(old)
	f.Fuzz(func(t *testing.T, payload []byte) {
		lim := trace.Limits{MaxRecords: 1 << 16}
		spans, err := trace.DecodeChunk(payload, lim)
		if err != nil {
			var ce *trace.CorruptPayloadError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want CorruptPayloadError", err)
			}
			if ce.Offset < 0 || ce.Offset > len(payload) {
				t.Fatalf("offset %d outside payload of %d", ce.Offset, len(payload))
			}
			return
		}
		// Whatever decodes is a valid batch: it encodes, and decodes again to
		// the same spans.
		again, err := trace.EncodeChunk(nil, spans)
		if err != nil {
			t.Fatalf("decoded spans do not encode: %v", err)
		}
		back, err := trace.DecodeChunk(again, lim)
		if err != nil {
			t.Fatalf("re-encoded payload does not decode: %v", err)
		}
		checkPartialDecoders(t, payload, spans, false)
		checkPartialDecoders(t, again, back, true)
		for i := range spans {
			if d := trace.Diff(spans[i], back[i]); d != "" {
				t.Fatalf("span %d changed across re-encoding: %s", i, d)
			}
			one, err := trace.DecodeChunkSpan(payload, i, lim)
			if err != nil {
				t.Fatalf("DecodeChunkSpan(%d): %v", i, err)
			}
			if d := trace.Diff(spans[i], one); d != "" {
				t.Fatalf("DecodeChunkSpan(%d): %s", i, d)
			}
		}
	})
}

// benchBatch is 10 realistic traces: 100 spans of 6 attributes and 20
// records each.
func benchBatch() []*trace.Span {
	r := rand.New(rand.NewPCG(42, 42))
	var spans []*trace.Span
	for range 10 {
		spans = append(spans, tracetest.RealisticTrace(r, 10, 6, 20)...)
	}
	return spans
}

func reportChunkMetrics(b *testing.B, spans []*trace.Span, payload []byte) {
	records := 0
	for _, s := range spans {
		records += int(s.Root.CountRecords())
	}
	b.SetBytes(int64(len(payload)))
	b.ReportMetric(float64(len(payload))/float64(records), "bytes/record")
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkEncodeChunk measures a writer's steady state: one ChunkEncoder
// encoding chunk after chunk.
func BenchmarkEncodeChunk(b *testing.B) {
	spans := benchBatch()
	var enc trace.ChunkEncoder
	var buf []byte
	for b.Loop() {
		var err error
		if buf, err = enc.Encode(buf[:0], spans); err != nil {
			b.Fatal(err)
		}
	}
	reportChunkMetrics(b, spans, buf)
}

// BenchmarkEncodeChunkOneShot is EncodeChunk with no reuse.
func BenchmarkEncodeChunkOneShot(b *testing.B) {
	spans := benchBatch()
	var buf []byte
	for b.Loop() {
		var err error
		if buf, err = trace.EncodeChunk(buf[:0], spans); err != nil {
			b.Fatal(err)
		}
	}
	reportChunkMetrics(b, spans, buf)
}

func BenchmarkDecodeChunkSummaries(b *testing.B) {
	spans := benchBatch()
	payload := mustEncode(b, spans)
	for b.Loop() {
		if _, err := trace.DecodeChunkSummaries(payload, trace.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
	reportChunkMetrics(b, spans, payload)
}

func BenchmarkDecodeChunk(b *testing.B) {
	spans := benchBatch()
	payload := mustEncode(b, spans)
	for b.Loop() {
		if _, err := trace.DecodeChunk(payload, trace.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
	reportChunkMetrics(b, spans, payload)
}

// BenchmarkDecodeChunkSpan reads the last span of the batch (the worst
// case: every other span is skipped).
func BenchmarkDecodeChunkSpan(b *testing.B) {
	spans := benchBatch()
	payload := mustEncode(b, spans)
	cpu0 := processCPU()
	for b.Loop() {
		if _, err := trace.DecodeChunkSpan(payload, len(spans)-1, trace.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
	b.SetBytes(int64(len(payload)))
}

// BenchmarkDecodeChunkSpansTrace reads the 10 spans of the last trace in
// the batch, as trace-by-id does.
func BenchmarkDecodeChunkSpansTrace(b *testing.B) {
	spans := benchBatch()
	payload := mustEncode(b, spans)
	idx := []int{90, 91, 92, 93, 94, 95, 96, 97, 98, 99}
	cpu0 := processCPU()
	for b.Loop() {
		if _, err := trace.DecodeChunkSpans(payload, idx, trace.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
	b.SetBytes(int64(len(payload)))
}

// TestChunkV2Example decodes the version 2 example of
// docs/format/chunk-payload.md: two spans indexed at stride 1.
func TestChunkV2Example(t *testing.T) {
	const span = "c8 81 c2 a1 01 50 00000000000000000000000000000001 "
	payload := hx("83 c7 80 c9 82 01 81 16 82 " + span + span)
	want := &trace.Span{TraceID: trace.TraceID{15: 1}}
	all, err := trace.DecodeChunk(payload, trace.Limits{})
	if err != nil || len(all) != 2 {
		t.Fatalf("DecodeChunk = %d spans, %v", len(all), err)
	}
	for i := range 2 {
		one, err := trace.DecodeChunkSpan(payload, i, trace.Limits{})
		if err != nil || !one.Equal(want) || !all[i].Equal(want) {
			t.Fatalf("span %d: %+v / %+v, %v", i, one, all[i], err)
		}
	}
}
