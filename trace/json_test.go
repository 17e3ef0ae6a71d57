package trace_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ztsd/ztsd/trace"
	"github.com/ztsd/ztsd/trace/tracetest"
)

const zorkaSampleJSON = `{"trace_id":"7f128efec83c68ec733c1116ad0c9105","span_id":"0000000000000001","parent_id":"",` +
	`"type":"","start_ns":1556820267280000000,"duration_ns":6225920,"calls":1,"errors":0,"recs":1,"error":false,` +
	`"source":"zorka","attrs":{"component":"http","http.header.in.x-some-header.0":"xxx",` +
	`"http.header.out.x-other-header.0":"yyy","http.method":"GET","http.status_code":"200","http.url":"/index.jsp"}`

const zorkaSampleRootJSON = `"root":{"method":"void org.apache.catalina.core.StandardEngineValve.invoke(Request, Response)",` +
	`"start_ns":0,"duration_ns":6225920,"calls":1,"errors":0}`

const exampleSpanJSON = `{"trace_id":"7f128efec83c68ec733c1116ad0c9105","span_id":"0000000000000002",` +
	`"parent_id":"0000000000000001","type":"","start_ns":1556820267281000000,"duration_ns":1000,"calls":2,` +
	`"errors":1,"recs":2,"error":true,"source":"zorka","attrs":{"component":"jdbc"},` +
	`"root":{"method":"a","start_ns":0,"duration_ns":1000,"calls":2,"errors":0,"children":[` +
	`{"method":"b","start_ns":100,"duration_ns":500,"calls":1,"errors":1,"attrs":{"rows":[-1,1.5,null]},` +
	`"exception":{"class":"E","message":"boom","stack":[{"class":"a","method":"b","file":"F.java","line":42}]}}]}}`

func TestJSONGolden(t *testing.T) {
	s := zorkaSampleSpan()
	s.Children = []*trace.Span{exampleSpan()}
	full, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := zorkaSampleJSON + "," + zorkaSampleRootJSON + `,"spans":[` + exampleSpanJSON + "]}"
	if string(full) != want {
		t.Errorf("full form:\n got %s\nwant %s", full, want)
	}
	summary, err := trace.MarshalSummaryJSON(s)
	if err != nil {
		t.Fatal(err)
	}
	wantSummary := zorkaSampleJSON + `,"root":{"method":"void org.apache.catalina.core.StandardEngineValve.invoke(Request, Response)","start_ns":0,"duration_ns":6225920,"calls":1,"errors":0}}`
	if string(summary) != wantSummary {
		t.Errorf("summary form:\n got %s\nwant %s", summary, wantSummary)
	}
	// encoding/json uses the same methods and keeps the bytes.
	viaStd, err := json.Marshal([]*trace.Span{s})
	if err != nil || string(viaStd) != "["+want+"]" {
		t.Errorf("json.Marshal = %s, %v", viaStd, err)
	}
	var back trace.Span
	if err := json.Unmarshal(full, &back); err != nil {
		t.Fatal(err)
	}
	if d := trace.Diff(s, &back); d != "" {
		t.Fatal(d)
	}
}

// TestJSONRoundTripRandom: Marshal → Unmarshal equals the span and
// Marshal again is byte-identical, for thousands of random spans (with
// child spans) and their summary form.
func TestJSONRoundTripRandom(t *testing.T) {
	for seed := uint64(0); seed < 2000; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x15011))
		s := tracetest.RandomSpan(r, tracetest.GenOptions{})
		for range r.IntN(3) {
			s.Children = append(s.Children, tracetest.RandomSpan(r, tracetest.GenOptions{MaxDepth: 2}))
		}
		out, err := s.MarshalJSON()
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !json.Valid(out) {
			t.Fatalf("seed %d: invalid JSON %s", seed, out)
		}
		var back trace.Span
		if err := back.UnmarshalJSON(out); err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, out)
		}
		if d := trace.Diff(s, &back); d != "" {
			t.Fatalf("seed %d: %s\n%s", seed, d, out)
		}
		again, err := back.MarshalJSON()
		if err != nil || !bytes.Equal(out, again) {
			t.Fatalf("seed %d: second Marshal differs (%v):\n%s\n%s", seed, err, out, again)
		}
		summary, err := trace.MarshalSummaryJSON(s)
		if err != nil {
			t.Fatal(err)
		}
		var sum trace.Span
		if err := sum.UnmarshalJSON(summary); err != nil {
			t.Fatalf("seed %d: summary: %v", seed, err)
		}
		s.Root, s.Children = shallow(s.Root), nil
		if d := trace.Diff(s, &sum); d != "" {
			t.Fatalf("seed %d: summary: %s", seed, d)
		}
	}
}

func TestJSONValues(t *testing.T) {
	cases := []struct {
		v    trace.Value
		want string
	}{
		{trace.Int(1), `1`},
		{trace.Int(math.MaxInt64), `9223372036854775807`},
		{trace.Int(math.MinInt64), `-9223372036854775808`},
		{trace.Float(1), `1.0`},
		{trace.Float(-0.0 * -1), `0.0`},
		{trace.Float(math.Copysign(0, -1)), `-0.0`},
		{trace.Float(1.5), `1.5`},
		{trace.Float(123456789), `123456789.0`},
		{trace.Float(1e20), `100000000000000000000.0`},
		{trace.Float(1e21), `1e+21`},
		{trace.Float(1e-7), `1e-7`},
		{trace.Float(0.1), `0.1`},
		{trace.Float(math.SmallestNonzeroFloat64), `5e-324`},
		{trace.Float(math.MaxFloat64), `1.7976931348623157e+308`},
		{trace.String("a\"b\\c\n\t\x00\u2028é🚀"), `"a\"b\\c\n\t\u0000\u2028é🚀"`},
		{trace.String("bad \xff utf8"), `"bad \ufffd utf8"`},
		{trace.Bool(true), `true`},
		{trace.Null(), `null`},
		{trace.List(), `[]`},
		{trace.List(trace.Int(1), trace.Float(2), trace.List()), `[1,2.0,[]]`},
		{trace.MapValue(trace.Attrs{{Key: "b", Value: trace.Int(1)}, {Key: "a", Value: trace.Null()}}), `{"a":null,"b":1}`},
		// Non-finite floats, and the strings and maps that look like them.
		{trace.Float(math.NaN()), `{"$float":"NaN"}`},
		{trace.Float(math.Inf(1)), `{"$float":"Infinity"}`},
		{trace.Float(math.Inf(-1)), `{"$float":"-Infinity"}`},
		{trace.String("NaN"), `"NaN"`},
		{trace.String("Infinity"), `"Infinity"`},
		{trace.List(trace.Float(math.NaN()), trace.String("NaN")), `[{"$float":"NaN"},"NaN"]`},
		{trace.MapValue(trace.Attrs{{Key: "$float", Value: trace.String("NaN")}}), `{"$map":{"$float":"NaN"}}`},
		{trace.MapValue(trace.Attrs{{Key: "$float", Value: trace.Float(math.Inf(-1))}, {Key: "z", Value: trace.Int(1)}}),
			`{"$map":{"$float":{"$float":"-Infinity"},"z":1}}`},
		{trace.MapValue(trace.Attrs{{Key: "$map", Value: trace.MapValue(trace.Attrs{{Key: "$map", Value: trace.Int(2)}})}}),
			`{"$map":{"$map":{"$map":{"$map":2}}}}`},
		{trace.MapValue(trace.Attrs{{Key: "#", Value: trace.Int(1)}, {Key: "$float", Value: trace.String("NaN")}}),
			`{"#":1,"$float":"NaN"}`},
	}
	for _, c := range cases {
		s := &trace.Span{Attrs: trace.Attrs{{Key: "k", Value: c.v}}}
		out, err := trace.MarshalSummaryJSON(s)
		if err != nil {
			t.Fatalf("%v: %v", c.v, err)
		}
		got := string(out)
		i := strings.Index(got, `"attrs":{"k":`)
		got = strings.TrimSuffix(got[i+len(`"attrs":{"k":`):], "}}")
		if got != c.want {
			t.Errorf("%+v: got %s, want %s", c.v, got, c.want)
		}
		var back trace.Span
		if err := back.UnmarshalJSON(out); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if v, _ := back.Attrs.Get("k"); v.Kind != c.v.Kind || utf8.ValidString(c.v.Str) && !v.Equal(c.v) {
			t.Errorf("%s read back as %s %s, want %s %s", c.want, v.Kind, v.Text(), c.v.Kind, c.v.Text())
		}
	}
}

// TestJSONWrapperInput: the wrappers read back as what they wrap, and
// anything else starting with a wrapper key is an error naming it.
func TestJSONWrapperInput(t *testing.T) {
	read := func(attr string) (trace.Value, error) {
		var s trace.Span
		err := s.UnmarshalJSON([]byte(`{"trace_id":"0123456789abcdef0123456789abcdef","attrs":{"k":` + attr + `}}`))
		v, _ := s.Attrs.Get("k")
		return v, err
	}
	for in, want := range map[string]trace.Value{
		`{ "$float" : "NaN" }`:        trace.Float(math.NaN()),
		`{"$float":"-Infinity"}`:      trace.Float(math.Inf(-1)),
		`{"$map":{}}`:                 trace.MapValue(nil),
		`{"$map":{"b":1,"$map":"x"}}`: trace.MapValue(trace.Attrs{{Key: "$map", Value: trace.String("x")}, {Key: "b", Value: trace.Int(1)}}),
		`{"a":{"$float":"Infinity"}}`: trace.MapValue(trace.Attrs{{Key: "a", Value: trace.Float(math.Inf(1))}}),
		`{"a":1,"$float":"NaN"}`:      trace.MapValue(trace.Attrs{{Key: "$float", Value: trace.String("NaN")}, {Key: "a", Value: trace.Int(1)}}),
	} {
		got, err := read(in)
		if err != nil || !got.Equal(want) {
			t.Errorf("%s: got %s %s (%v), want %s %s", in, got.Kind, got.Text(), err, want.Kind, want.Text())
		}
	}
	for in, wantErr := range map[string]string{
		`{"$float":"nan"}`:       `"$float" wants "NaN", "Infinity" or "-Infinity"`,
		`{"$float":1.5}`:         "want a string",
		`{"$float":"NaN","a":1}`: `a "$float" wrapper object has exactly one member`,
		`{"$map":{"a":1},"b":2}`: `a "$map" wrapper object has exactly one member`,
		`{"$map":[1]}`:           "want an attributes object",
		`{"$float":"NaN"`:        "want ',' or '}'",
	} {
		if _, err := read(in); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: err = %v, want %q", in, err, wantErr)
		}
	}
}

// TestJSONInput covers what UnmarshalJSON accepts and how it reads it.
func TestJSONInput(t *testing.T) {
	const tid = `"trace_id":"7F128EFEC83C68EC",`
	in := `  {` + tid + `"attrs":{"z":1,"a":1.0,"m":1e2,"a":"last","u":"\u00e9\ud83d\ude80\ud800x\/"},` +
		`"root":{"method":"m","open":false,"exception":null,"children":null,"attrs":null},` +
		`"spans":null,"span_id":"","source":""}` + "\r\n"
	var s trace.Span
	if err := s.UnmarshalJSON([]byte(in)); err != nil {
		t.Fatal(err)
	}
	want := trace.Span{
		TraceID: trace.TraceID{0x7f, 0x12, 0x8e, 0xfe, 0xc8, 0x3c, 0x68, 0xec},
		Attrs: trace.Attrs{
			{Key: "a", Value: trace.String("last")},
			{Key: "m", Value: trace.Float(100)},
			{Key: "u", Value: trace.String("é🚀\ufffdx/")},
			{Key: "z", Value: trace.Int(1)},
		},
		Root: &trace.Record{Method: "m"},
	}
	if d := trace.Diff(&want, &s); d != "" {
		t.Fatal(d)
	}
	// null is a no-op, as for encoding/json.
	if err := s.UnmarshalJSON([]byte(" null ")); err != nil || s.Root == nil {
		t.Fatalf("UnmarshalJSON(null) = %v, span changed: %v", err, s.Root == nil)
	}
	var empty trace.Span
	if err := empty.UnmarshalJSON([]byte(`{}`)); err != nil || !empty.Equal(&trace.Span{}) {
		t.Fatalf("UnmarshalJSON({}) = %v, %+v", err, empty)
	}
}

func nested(open, leaf, close string, n int) string {
	return strings.Repeat(open, n) + leaf + strings.Repeat(close, n)
}

func TestJSONRejects(t *testing.T) {
	const tid = `"trace_id":"7f128efec83c68ec733c1116ad0c9105"`
	cases := []struct {
		name, in, want string
	}{
		{"unknown field", `{` + tid + `,"colour":1}`, `unknown span field "colour"`},
		{"repeated field", `{` + tid + `,` + tid + `}`, `repeated field "trace_id"`},
		{"bad trace id hex", `{"trace_id":"zz128efec83c68ec733c1116ad0c9105"}`, "trace_id"},
		{"short trace id", `{"trace_id":"7f12"}`, "want 32 hex digits"},
		{"long span id", `{"span_id":"00000000000000001"}`, "more than 16 hex digits"},
		{"bad parent id", `{"parent_id":"xyz"}`, "parent_id"},
		{"float time", `{"start_ns":1.5}`, "start_ns: want an integer, got 1.5"},
		{"exponent time", `{"duration_ns":1e3}`, "want an integer"},
		{"string time", `{"start_ns":"1"}`, "start_ns: want an integer"},
		{"int overflow", `{"calls":9223372036854775808}`, "overflows int64"},
		{"negative overflow", `{"attrs":{"x":-9223372036854775809}}`, "overflows int64"},
		{"float overflow", `{"attrs":{"x":1e400}}`, "out of range"},
		{"leading zero", `{"calls":01}`, `unexpected '1'`},
		{"plus sign", `{"calls":+1}`, "want an integer"},
		{"bare fraction", `{"attrs":{"x":.5}}`, "want a value"},
		{"empty fraction", `{"attrs":{"x":1.}}`, "digits must follow '.'"},
		{"NaN literal", `{"attrs":{"x":NaN}}`, "want a value"},
		{"chunk num negative", `{"chunk_num":-1}`, "out of range"},
		{"error not bool", `{"error":1}`, "error: want true or false"},
		{"type not string", `{"type":null}`, "want a string"},
		{"trailing data", `{} {}`, "data after the span object"},
		{"trailing comma", `{"calls":1,}`, "want a string"},
		{"missing colon", `{"calls" 1}`, "want ':'"},
		{"unterminated", `{"type":"abc`, "unterminated string"},
		{"control char", "{\"type\":\"a\tb\"}", "control character 0x09"},
		{"invalid utf8", "{\"type\":\"a\xffb\"}", "not valid UTF-8"},
		{"invalid utf8 with escape", "{\"type\":\"\\n\xff\"}", "not valid UTF-8"},
		{"unterminated after a long plain run", `{"type":"` + strings.Repeat("a", 300), "unterminated string"},
		{"control char after a long plain run", "{\"type\":\"" + strings.Repeat("a", 300) + "\x01\"}", "control character 0x01"},
		{"invalid utf8 after a long plain run", "{\"type\":\"" + strings.Repeat("a", 300) + "\xc3\"}", "not valid UTF-8"},
		{"invalid escape", `{"type":"\x"}`, `invalid escape \x`},
		{"short unicode escape", `{"type":"\u12"}`, `invalid \u escape`},
		{"empty input", ``, "unexpected end of input"},
		{"array top level", `[]`, "want a span object"},
		{"unknown record field", `{"root":{"name":"x"}}`, `unknown record field "name"`},
		{"repeated record field", `{"root":{"calls":1,"calls":2}}`, `repeated field "calls"`},
		{"unknown exception field", `{"root":{"exception":{"type":"x"}}}`, `unknown exception field "type"`},
		{"unknown frame field", `{"root":{"exception":{"stack":[{"line":1,"col":2}]}}}`, `unknown stack frame field "col"`},
		{"children not array", `{"root":{"children":{}}}`, "want an array of records"},
		{"value too deep", `{"attrs":{"x":` + nested("[", "1", "]", trace.MaxValueDepth) + `}}`, "value nested deeper than 32"},
		{"hostile value nesting", `{"attrs":{"x":` + nested("[", "1", "]", 1_000_000) + `}}`, "value nested deeper than 32"},
		{"hostile map nesting", `{"attrs":{"x":` + nested(`{"a":`, "1", "}", 1_000_000) + `}}`, "value nested deeper than 32"},
		{"hostile record nesting", `{"root":` + nested(`{"children":[`, "{}", "]}", 1_000_000) + `}`, "records nested deeper than 1000"},
		{"hostile span nesting", nested(`{"spans":[`, "{}", "]}", 1_000_000), "spans nested deeper than 1000"},
		{"hostile cause chain", `{"root":{"exception":` + nested(`{"cause":`, "{}", "}", 1_000_000) + `}}`, "cause chain longer than 1000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s trace.Span
			err := s.UnmarshalJSON([]byte(c.in))
			var je *trace.JSONError
			if !errors.As(err, &je) || !strings.Contains(je.Reason, c.want) {
				t.Fatalf("err = %v, want JSONError containing %q", err, c.want)
			}
			if je.Offset < 0 || je.Offset > len(c.in) {
				t.Fatalf("offset %d outside input of %d bytes", je.Offset, len(c.in))
			}
		})
	}
	// Depth limits are inclusive: MaxValueDepth-deep values and
	// MaxDepth-deep record trees are accepted and write back out.
	ok := `{"attrs":{"x":` + nested("[", "1", "]", trace.MaxValueDepth-1) + `},"root":` +
		nested(`{"children":[`, `{}`, "]}", trace.MaxDepth-1) + `}`
	var s trace.Span
	if err := s.UnmarshalJSON([]byte(ok)); err != nil {
		t.Fatalf("limit depth rejected: %v", err)
	}
	if _, err := s.MarshalJSON(); err != nil {
		t.Fatalf("limit depth does not marshal: %v", err)
	}
}

func TestDecodeJSONLines(t *testing.T) {
	line1 := zorkaSampleJSON + "}"
	line2 := exampleSpanJSON
	in := line1 + "\n\n   \r\n" + line2 + "\r\n" + line1 // last line without newline
	var got []*trace.Span
	err := trace.DecodeJSONLines(strings.NewReader(in), trace.Limits{}, func(s *trace.Span) error {
		got = append(got, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sample := zorkaSampleSpan()
	sample.Root = nil
	want := []*trace.Span{sample, exampleSpan(), sample}
	if len(got) != len(want) {
		t.Fatalf("decoded %d spans, want %d", len(got), len(want))
	}
	for i := range want {
		if d := trace.Diff(want[i], got[i]); d != "" {
			t.Fatalf("span %d: %s", i, d)
		}
	}

	// A decode error names its line; spans before it were delivered.
	bad := line1 + "\n" + line2 + "\n\n" + `{"trace_id":"xyz"}` + "\n" + line1
	n := 0
	err = trace.DecodeJSONLines(strings.NewReader(bad), trace.Limits{}, func(*trace.Span) error { n++; return nil })
	var je *trace.JSONError
	if !errors.As(err, &je) || je.Line != 4 || n != 2 || !strings.HasPrefix(err.Error(), "trace json line 4, offset 12: trace_id") {
		t.Fatalf("err = %v (line %v), %d spans delivered; want line 4 after 2 spans", err, je, n)
	}

	// An error from fn is returned unchanged and stops decoding.
	stop := errors.New("stop")
	n = 0
	err = trace.DecodeJSONLines(strings.NewReader(in), trace.Limits{}, func(*trace.Span) error { n++; return stop })
	if err != stop || n != 1 {
		t.Fatalf("err = %v after %d spans, want stop after 1", err, n)
	}

	// Lines longer than the read buffer are fine up to MaxLineBytes.
	big := zorkaSampleSpan()
	big.Type = strings.Repeat("t", 200_000)
	bigLine, _ := big.MarshalJSON()
	n = 0
	err = trace.DecodeJSONLines(bytes.NewReader(append(bigLine, '\n')), trace.Limits{}, func(s *trace.Span) error {
		n++
		if !s.Equal(big) {
			t.Error("long line decoded wrong")
		}
		return nil
	})
	if err != nil || n != 1 {
		t.Fatalf("long line: %v, %d spans", err, n)
	}
	err = trace.DecodeJSONLines(bytes.NewReader(bigLine), trace.Limits{MaxLineBytes: 100_000}, func(*trace.Span) error { return nil })
	if !errors.As(err, &je) || je.Line != 1 || !strings.Contains(je.Reason, "longer than 100000 bytes") {
		t.Fatalf("over-long line: err = %v", err)
	}

	// Per-line limits.
	limits := []struct {
		lim  trace.Limits
		want string
	}{
		{trace.Limits{MaxSpans: 1}, "more than 1 spans"},
		{trace.Limits{MaxRecords: 1}, "more than 1 records"},
		{trace.Limits{MaxStringLen: 10}, "longer than 10"},
		{trace.Limits{MaxDepth: 1}, "nested deeper than 1"},
	}
	two := zorkaSampleSpan()
	two.Children = []*trace.Span{exampleSpan()}
	twoLine, _ := two.MarshalJSON()
	for _, l := range limits {
		err := trace.DecodeJSONLines(bytes.NewReader(twoLine), l.lim, func(*trace.Span) error { return nil })
		if !errors.As(err, &je) || !strings.Contains(je.Reason, l.want) {
			t.Errorf("%+v: err = %v, want %q", l.lim, err, l.want)
		}
	}
}

func FuzzDecodeJSONLines(f *testing.F) {
	f.Add([]byte(zorkaSampleJSON + "}\n" + exampleSpanJSON + "\n"))
	f.Add([]byte(zorkaSampleJSON + "," + zorkaSampleRootJSON + `,"spans":[` + exampleSpanJSON + "]}"))
	f.Add([]byte(`{"attrs":{"a":[1,2.5,{"b":null}],"u":"\ud83d\ude80\u00e9"}}` + "\n\n{}"))
	f.Add([]byte(`{"trace_id":"7f128efec83c68ec","root":{"exception":{"cause":{"stack":[{"line":-1}]}}}}`))
	f.Add([]byte(`{"attrs":{"n":{"$float":"NaN"},"s":"NaN","l":[{"$float":"-Infinity"}],"m":{"$map":{"$float":"Infinity"}},"w":{"$map":{"$map":{"$float":{"$float":"NaN"}}}}}}`))
	r := rand.New(rand.NewPCG(9, 9))
	for range 4 {
		line, _ := tracetest.RandomSpan(r, tracetest.GenOptions{MaxDepth: 3}).MarshalJSON()
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		lim := trace.Limits{MaxRecords: 1 << 14, MaxSpans: 1 << 10}
		err := trace.DecodeJSONLines(bytes.NewReader(in), lim, func(s *trace.Span) error {
			// Whatever decodes writes back out, reads back equal, and is
			// byte-stable from then on.
			out, err := s.MarshalJSON()
			if err != nil {
				return fmt.Errorf("decoded span does not marshal: %w", err)
			}
			var back trace.Span
			if err := back.UnmarshalJSON(out); err != nil {
				return fmt.Errorf("marshalled span does not unmarshal: %w\n%s", err, out)
			}
			if d := trace.Diff(s, &back); d != "" {
				return fmt.Errorf("round trip changed the span: %s", d)
			}
			again, _ := back.MarshalJSON()
			if !bytes.Equal(out, again) {
				return fmt.Errorf("marshal not stable:\n%s\n%s", out, again)
			}
			// Trace JSON spans that pass Validate also go through the chunk codec.
			if s.Validate() == nil {
				s.Children = nil
				payload, err := trace.EncodeChunk(nil, []*trace.Span{s})
				if err != nil {
					return fmt.Errorf("valid span does not encode: %w", err)
				}
				got, err := trace.DecodeChunk(payload, trace.Limits{})
				if err != nil {
					return err
				}
				if d := trace.Diff(s, got[0]); d != "" {
					return fmt.Errorf("chunk round trip: %s", d)
				}
			}
			return nil
		})
		if err != nil {
			var je *trace.JSONError
			if !errors.As(err, &je) {
				t.Fatal(err)
			}
		}
	})
}

func realisticJSONLines(b testing.TB) ([]byte, int) {
	var buf []byte
	records := 0
	for _, s := range benchBatch() {
		line, err := s.MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		buf = append(append(buf, line...), '\n')
		records += int(s.Root.CountRecords())
	}
	return buf, records
}

func BenchmarkMarshalJSON(b *testing.B) {
	spans := benchBatch()
	_, records := realisticJSONLines(b)
	var n int
	for b.Loop() {
		n = 0
		for _, s := range spans {
			out, err := s.MarshalJSON()
			if err != nil {
				b.Fatal(err)
			}
			n += len(out)
		}
	}
	b.SetBytes(int64(n))
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkDecodeJSONLines(b *testing.B) {
	in, records := realisticJSONLines(b)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if err := trace.DecodeJSONLines(bytes.NewReader(in), trace.Limits{}, func(*trace.Span) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkDecodeJSONLinesOneSpan decodes a request of one small span, as
// an unbatched writer sends: the per-request costs (the line reader) show.
func BenchmarkDecodeJSONLinesOneSpan(b *testing.B) {
	line := []byte(`{"trace_id":"0123456789abcdef0123456789abcdef","span_id":"0123456789abcdef","type":"http","start_ns":1700000000000000000,"duration_ns":123000,"attrs":{"service.name":"telemetrygen","span.kind":"client"}}` + "\n")
	b.ReportAllocs()
	for b.Loop() {
		if err := trace.DecodeJSONLines(bytes.NewReader(line), trace.Limits{}, func(*trace.Span) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
