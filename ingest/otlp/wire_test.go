package otlp

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/ztsd/ztsd/trace"
)

// oracleDecode is the decoder decodeWire replaced, kept as its oracle:
// proto.Unmarshal into the generated types, then mapRequest (which OTLP
// JSON still takes).
func oracleDecode(body []byte, opt Options) ([]*trace.Span, int64, string, error) {
	req := new(collectortrace.ExportTraceServiceRequest)
	if err := proto.Unmarshal(body, req); err != nil {
		return nil, 0, "", fmt.Errorf("%w: protobuf: %v", ErrMalformed, err)
	}
	return mapRequest(req, nil, opt)
}

// errorClass names the sentinel an error carries, for comparing the two
// decoders' errors (their texts differ only for malformed bodies).
func errorClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrMalformed):
		return "malformed"
	case errors.Is(err, ErrTooLarge):
		return "too large"
	case errors.Is(err, ErrLimit):
		return "limit"
	}
	return "other: " + err.Error()
}

// checkAgainstOracle asserts that decodeWire and the oracle decode body
// alike: the same error class (and text, but for malformed bodies), or the
// same spans, rejection count and partial-success message.
func checkAgainstOracle(t testing.TB, body []byte, opt Options) {
	t.Helper()
	opt = opt.withDefaults()
	spans, rejected, msg, err := decodeWire(body, opt)
	wantSpans, wantRejected, wantMsg, wantErr := oracleDecode(body, opt)
	if errorClass(err) != errorClass(wantErr) {
		t.Fatalf("body %x:\nwire decoder: %v\noracle:       %v", body, err, wantErr)
	}
	if wantErr != nil {
		if !errors.Is(wantErr, ErrMalformed) && err.Error() != wantErr.Error() {
			t.Fatalf("body %x: error %q, oracle %q", body, err, wantErr)
		}
		if spans != nil || rejected != 0 || msg != "" {
			t.Fatalf("error %v came with %d spans, %d rejected, %q", err, len(spans), rejected, msg)
		}
		return
	}
	if rejected != wantRejected || msg != wantMsg {
		t.Fatalf("body %x: rejected %d %q, oracle %d %q", body, rejected, msg, wantRejected, wantMsg)
	}
	if len(spans) != len(wantSpans) {
		t.Fatalf("body %x: %d spans, oracle %d", body, len(spans), len(wantSpans))
	}
	for i := range spans {
		if d := trace.Diff(spans[i], wantSpans[i]); d != "" {
			t.Fatalf("body %x: span %d differs from the oracle's: %s", body, i, d)
		}
		got, err1 := spans[i].MarshalJSON()
		want, err2 := wantSpans[i].MarshalJSON()
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Fatalf("body %x: span %d as Trace JSON:\n%s (%v)\noracle:\n%s (%v)", body, i, got, err1, want, err2)
		}
	}
}

// oracleSamples are the requests the package's tests are built on.
func oracleSamples() []*collectortrace.ExportTraceServiceRequest {
	base := realisticRequest(10, 10)
	return []*collectortrace.ExportTraceServiceRequest{
		sampleRequest(), rejectingRequest(), nonFiniteRequest(), base, issue19Request(base, 7), realisticRequest(3, 1), {},
	}
}

// TestWireDecoderMatchesOracle: the samples, and each with its spans and
// attributes sent twice (protobuf merges and last values), decode as the
// generated types plus mapRequest decode them, under default and tight
// limits.
func TestWireDecoderMatchesOracle(t *testing.T) {
	for i, req := range oracleSamples() {
		body, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		for _, opt := range []Options{{}, fuzzOptions(), {Limits: trace.Limits{MaxStringLen: 8, MaxRecords: 2}}, {MaxSpansPerRequest: 3},
			{Ingest: func() trace.IngestLimits { l := trace.DefaultIngestLimits(); l.MaxAttrs = 12; return l }}} {
			t.Run(fmt.Sprintf("sample%d/%+v", i, opt.Limits), func(t *testing.T) {
				checkAgainstOracle(t, body, opt)
				checkAgainstOracle(t, append(bytes.Clone(body), body...), opt) // every resource twice
			})
		}
	}
}

// TestWireDecoderRandom compares the decoders on random encodings: every
// field of the schema, in any order, sent several times, with unknown
// fields, known fields of another wire type and merged messages.
func TestWireDecoderRandom(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	for seed := range uint64(n) {
		g := &wireGen{r: rand.New(rand.NewPCG(seed, 19))}
		body := g.message(msgRequest, 0)
		for _, opt := range []Options{fuzzOptions(), {Limits: trace.Limits{MaxStringLen: 12, MaxRecords: 3}, MaxSpansPerRequest: 40}} {
			checkAgainstOracle(t, body, opt)
		}
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

// wireGen writes random OTLP encodings, at the wire level, biased towards
// spans that can be stored.
type wireGen struct {
	r *rand.Rand
}

func (g *wireGen) chance(p float64) bool { return g.r.Float64() < p }

var genStrings = []string{
	"", "a", "k", "GET /api", "service.name", "http.route", "exception", "exception.type", "exception.message",
	"exception.stacktrace", "otel.span.kind", "source.format", "otel.status.code", "a long string over limits",
	javaStack, pythonStack, "goroutine 1 [running]:\nmain.f()\n\t/a.go:1 +0x1\n", "ü€", "zz",
}

// message writes a message of type t; depth counts the messages it is in.
func (g *wireGen) message(t wireMsg, depth int) []byte {
	var b []byte
	if depth > 12 {
		return b
	}
	switch t {
	case msgSpan: // most spans carry ids
		if g.chance(0.95) {
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendBytes(b, g.id(16))
		}
		if g.chance(0.95) {
			b = protowire.AppendTag(b, 2, protowire.BytesType)
			b = protowire.AppendBytes(b, g.id(8))
		}
		if g.chance(0.9) {
			start := 1_712_000_000_000_000_000 + g.r.Uint64N(1e12)
			b = protowire.AppendTag(b, 7, protowire.Fixed64Type)
			b = protowire.AppendFixed64(b, start)
			b = protowire.AppendTag(b, 8, protowire.Fixed64Type)
			b = protowire.AppendFixed64(b, start+g.r.Uint64N(1e9))
		}
	case msgAnyValue: // nest deep now and then; often one scalar as SDKs send it
		if depth < 40 && g.chance(0.3) {
			return g.wrap(depth)
		}
		if g.chance(0.4) {
			switch g.r.IntN(4) {
			case 0:
				return protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), g.string())
			case 1:
				return protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), g.varint())
			case 2:
				return protowire.AppendVarint(protowire.AppendTag(b, 3, protowire.VarintType), g.varint())
			}
			return protowire.AppendFixed64(protowire.AppendTag(b, 4, protowire.Fixed64Type), g.fixed64(t, 4))
		}
	case msgKeyValue: // usually a key and a value
		if g.chance(0.9) {
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendString(b, g.string())
			b = protowire.AppendTag(b, 2, protowire.BytesType)
			b = protowire.AppendBytes(b, g.message(msgAnyValue, depth+1))
			if g.chance(0.7) {
				return b
			}
		}
	}
	var known []protowire.Number
	for num := protowire.Number(1); num <= 16; num++ {
		if fieldOf(t, num).kind != kindUnknown {
			known = append(known, num)
		}
	}
	fields := g.r.IntN(2 * len(known))
	if t == msgRequest || t == msgResourceSpans || t == msgScopeSpans {
		fields = 1 + g.r.IntN(4)
	}
	for range fields {
		num := known[g.r.IntN(len(known))]
		if (t == msgKeyValue && num == 3 || t == msgAnyValue && num == 8 || t == msgSpan && num <= 8) && g.chance(0.8) {
			num = known[g.r.IntN(len(known))] // strindexes, ids and times: seldom again
		}
		if g.chance(0.05) {
			num = protowire.Number(1 + g.r.IntN(2000))
		}
		f := fieldOf(t, num)
		if f.kind == kindUnknown || g.chance(0.03) {
			b = g.unknown(b, num, f.kind)
			continue
		}
		b = protowire.AppendTag(b, num, f.kind.wireType())
		switch f.kind {
		case kindVarint:
			b = protowire.AppendVarint(b, g.varint())
		case kindFixed32:
			b = protowire.AppendFixed32(b, g.r.Uint32())
		case kindFixed64:
			b = protowire.AppendFixed64(b, g.fixed64(t, num))
		case kindBytes:
			b = protowire.AppendBytes(b, g.bytes(t, num))
		case kindString:
			b = protowire.AppendString(b, g.string())
		case kindMessage:
			var m []byte
			if f.msg == msgAnyValue && depth >= 24 {
				m = g.wrap(depth + 1) // keep nesting
			} else {
				m = g.message(f.msg, depth+1)
			}
			if !f.repeated && g.chance(0.1) {
				m = append(m, g.message(f.msg, depth+1)...) // two occurrences merged into one
			}
			b = protowire.AppendBytes(b, m)
		}
	}
	if g.chance(0.05) { // the same message again: every field sent twice
		b = append(b, b...)
	}
	return b
}

// wrap writes an AnyValue holding an array or kvlist of one nested value.
func (g *wireGen) wrap(depth int) []byte {
	inner := g.message(msgAnyValue, depth+2)
	if g.chance(0.5) {
		arr := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), inner)
		return protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), arr)
	}
	kv := protowire.AppendTag(nil, 1, protowire.BytesType)
	kv = protowire.AppendString(kv, g.string())
	kv = protowire.AppendTag(kv, 2, protowire.BytesType)
	kv = protowire.AppendBytes(kv, inner)
	list := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), kv)
	return protowire.AppendBytes(protowire.AppendTag(nil, 6, protowire.BytesType), list)
}

// unknown writes field num with a random wire type: an unknown field, or
// (when known is not kindUnknown) a known one with another wire type than
// its own.
func (g *wireGen) unknown(b []byte, num protowire.Number, known wireKind) []byte {
	c := g.r.IntN(5)
	for known != kindUnknown && []protowire.Type{protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type, protowire.StartGroupType, protowire.BytesType}[c] == known.wireType() {
		c = g.r.IntN(5)
	}
	switch c {
	case 0:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, g.varint())
	case 1:
		b = protowire.AppendTag(b, num, protowire.Fixed32Type)
		return protowire.AppendFixed32(b, g.r.Uint32())
	case 2:
		b = protowire.AppendTag(b, num, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, g.r.Uint64())
	case 3:
		b = protowire.AppendTag(b, num, protowire.StartGroupType)
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
		return protowire.AppendTag(b, num, protowire.EndGroupType)
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, g.string())
}

func (g *wireGen) varint() uint64 {
	switch g.r.IntN(6) {
	case 0:
		return g.r.Uint64()
	case 1:
		return 1<<32 + uint64(g.r.IntN(3)) // int32 and uint32 fields truncate
	case 2:
		return math.MaxUint64 - uint64(g.r.IntN(3)) // negative
	}
	return uint64(g.r.IntN(4))
}

func (g *wireGen) fixed64(t wireMsg, num protowire.Number) uint64 {
	if t == msgAnyValue {
		switch g.r.IntN(4) {
		case 0:
			return math.Float64bits(math.NaN())
		case 1:
			return math.Float64bits(math.Inf(-1))
		}
		return math.Float64bits(g.r.NormFloat64())
	}
	switch g.r.IntN(8) {
	case 0:
		return 0
	case 1:
		return math.MaxInt64 + 1 + uint64(g.r.IntN(2))
	case 2:
		return g.r.Uint64()
	}
	return 1_712_000_000_000_000_000 + uint64(num)*1000 + uint64(g.r.IntN(5000))
}

func (g *wireGen) bytes(t wireMsg, num protowire.Number) []byte {
	if t == msgAnyValue {
		b := make([]byte, g.r.IntN(12))
		for i := range b {
			b[i] = byte(g.r.Uint32())
		}
		return b
	}
	if num == 1 && g.chance(0.9) {
		return g.id(16)
	}
	return g.id(8)
}

// id is usually n random bytes, now and then zeroes, empty or of another
// length.
func (g *wireGen) id(n int) []byte {
	switch g.r.IntN(30) {
	case 0:
		return make([]byte, n)
	case 1:
		return nil
	case 2:
		n = 1 + g.r.IntN(20)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	if n > 0 {
		b[n-1] |= 1
	}
	return b
}

func (g *wireGen) string() string {
	if g.chance(0.0002) {
		return "bad \xff UTF-8"
	}
	return genStrings[g.r.IntN(len(genStrings))]
}

// TestWireSchemaMatchesDescriptors: fieldOf describes every field of the
// generated messages (name, encoding, repetition), and no other.
func TestWireSchemaMatchesDescriptors(t *testing.T) {
	seen := map[protoreflect.FullName]wireMsg{}
	names := map[wireMsg]string{}
	var walk func(md protoreflect.MessageDescriptor, t wireMsg)
	walk = func(md protoreflect.MessageDescriptor, t wireMsg) {
		if prev, ok := seen[md.FullName()]; ok {
			if prev != t {
				panic(fmt.Sprintf("%s is both %d and %d", md.FullName(), prev, t))
			}
			return
		}
		seen[md.FullName()], names[t] = t, string(md.FullName())
		fds := md.Fields()
		for num := protowire.Number(1); num < 64; num++ {
			fd := fds.ByNumber(num)
			f := fieldOf(t, num)
			if fd == nil {
				if f.kind != kindUnknown {
					panic(fmt.Sprintf("%s has no field %d, fieldOf says %+v", md.FullName(), num, f))
				}
				continue
			}
			want := kindUnknown
			switch fd.Kind() {
			case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Int64Kind,
				protoreflect.Uint32Kind, protoreflect.Uint64Kind:
				want = kindVarint
			case protoreflect.Fixed32Kind:
				want = kindFixed32
			case protoreflect.Fixed64Kind, protoreflect.DoubleKind:
				want = kindFixed64
			case protoreflect.BytesKind:
				want = kindBytes
			case protoreflect.StringKind:
				want = kindString
			case protoreflect.MessageKind:
				want = kindMessage
			}
			if f.name != string(fd.Name()) || f.kind != want || f.repeated != fd.IsList() || fd.IsPacked() || fd.IsMap() {
				panic(fmt.Sprintf("%s field %d: fieldOf says %+v, the descriptor %s %v %v", md.FullName(), num, f, fd.Name(), fd.Kind(), fd.Cardinality()))
			}
			if want == kindMessage {
				walk(fd.Message(), f.msg)
			}
		}
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatal(r)
			}
		}()
		walk((&collectortrace.ExportTraceServiceRequest{}).ProtoReflect().Descriptor(), msgRequest)
	}()
	if len(seen) != int(msgKeyValueList) {
		t.Fatalf("the schema has %d messages, fieldOf knows %d: %v", len(seen), msgKeyValueList, names)
	}
}

// TestWireErrors: a malformed body is refused whole, naming the offset and
// the field; nesting beyond protobuf's bound is refused as proto.Unmarshal
// refuses it.
func TestWireErrors(t *testing.T) {
	deep := func(levels int) []byte {
		// levels AnyValues nested in arrays, in a resource attribute.
		v := []byte{}
		for range levels {
			arr := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), v)
			v = protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), arr)
		}
		kv := protowire.AppendBytes(protowire.AppendTag(protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "k"), 2, protowire.BytesType), v)
		res := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), kv)
		rs := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), res)
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rs)
	}
	for _, tc := range []struct {
		name string
		body []byte
		msg  string
	}{
		{"field number 0", []byte{0x00}, "protobuf at offset 0: field tag: field number 0 out of range"},
		{"end group", []byte{0x0c}, "protobuf at offset 0: field 1: end of a group that was not started"},
		{"unterminated group", []byte{0x0a, 0x02, 0x1b, 0x00}, "protobuf at offset 2: resource_spans[0]: field 3 (wire type 3): invalid field number"},
		{"second resource", []byte{0x0a, 0x00, 0x0a, 0x03, 0x1a, 0x01, 0xff}, "protobuf at offset 6: resource_spans[1].schema_url: string is not valid UTF-8"},
		{"varint overflow", append([]byte{0x0a, 0x0b, 0x0a, 0x09, 0x10}, bytes.Repeat([]byte{0xff}, 10)[:8]...), "protobuf at offset 4: resource_spans[0].resource.dropped_attributes_count: value of wire type 0: unexpected EOF"},
		{"nested too deep", deep(5000), "protobuf at offset 34464: resource_spans[0].resource.attributes[0].value.array_value.values[0].array_value.values[0].…" +
			".array_value.values[0].array_value.values[0].array_value.values[0].array_value.values[0]: messages nested deeper than 10000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := decodeWire(tc.body, Options{}.withDefaults())
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want %q", err, tc.msg)
			}
			checkAgainstOracle(t, tc.body, Options{})
		})
	}
	// 5 + 2 × 4997 messages are within the bound, 2 more beyond it; both
	// decoders agree at the edge (the mapping would reject the value, but
	// the resource has no spans).
	for _, levels := range []int{4997, 4998} {
		checkAgainstOracle(t, deep(levels), Options{})
	}
}

// FuzzDecodeWire: the wire decoder never panics, and on every input
// decodes as the oracle (proto.Unmarshal plus mapRequest) does.
func FuzzDecodeWire(f *testing.F) {
	seedProto(f)
	for seed := range uint64(20) {
		g := &wireGen{r: rand.New(rand.NewPCG(seed, 7))}
		f.Add(g.message(msgRequest, 0))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAgainstOracle(t, body, fuzzOptions())
	})
}

// TestSpanAttrs: spanAttrs equals sorting the three lists one after the
// other with the last of repeated keys winning, for own lists short
// (insertion sort) and long, with and without room in the arena.
func TestSpanAttrs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := []string{"a", "b", "c", "d", "e", "http.route", "otel.span.kind", "service.name", "source.format", "z"}
	list := func(n int, tag string) trace.Attrs {
		var a trace.Attrs
		for i := range n {
			a = append(a, trace.Attr{Key: keys[r.IntN(len(keys))], Value: trace.String(fmt.Sprintf("%s%d", tag, i))})
		}
		return a
	}
	for i := range 2000 {
		own := list(r.IntN(40), "own")
		shared, reserved := sortAttrs(list(r.IntN(8), "shared")), sortAttrs(list(r.IntN(4), "reserved"))
		want := sortAttrs(append(append(slices.Clone(own), shared...), reserved...))
		m := &mapper{}
		if i%2 == 0 {
			m.sizeArena(1, len(own), len(shared)+len(reserved))
		}
		got := m.spanAttrs(slices.Clone(own), shared, reserved)
		if d := trace.Diff(&trace.Span{Attrs: got}, &trace.Span{Attrs: want}); d != "" {
			t.Fatalf("own %v shared %v reserved %v: %s", own, shared, reserved, d)
		}
	}
}

// TestWireBoundedAllocation: a length prefix beyond the bytes left is an
// error before anything is allocated for it (the decoder sizes what it
// allocates by what the validator counted in the body, never by a length).
func TestWireBoundedAllocation(t *testing.T) {
	huge := protowire.AppendVarint([]byte{0x0a}, 1<<40) // resource_spans of 1 TiB
	huge = append(huge, make([]byte, 64)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, _, err := decodeWire(huge, Options{}.withDefaults())
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "protobuf at offset 0: resource_spans[0]: value of wire type 2: unexpected EOF") {
		t.Fatalf("1 TiB length prefix: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<10 {
		t.Fatalf("a refused 1 TiB length prefix allocated %d bytes", n)
	}
}
