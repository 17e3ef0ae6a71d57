// Package tracetest generates trace.Span values for tests and benchmarks:
// RandomSpan for property tests (every field and value kind, edge values,
// unicode, deep nesting) and RealisticTrace for benchmarks (spans shaped
// like real service traffic).
//
// Both are deterministic for a given *rand.Rand state (math/rand/v2), so a
// failing property test is reproduced by its seed. Every span they return
// passes trace.Span.Validate; Span.Children is never set.
package tracetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/ztsd/ztsd/trace"
)

// GenOptions shapes RandomSpan. Zero fields take the defaults noted.
type GenOptions struct {
	MaxDepth      int  // record tree depth, root = 1 (default 5)
	MaxChildren   int  // children per record (default 4)
	MaxAttrs      int  // attributes per span or record (default 6)
	MaxValueDepth int  // nesting of list/map values, 1 = scalars only (default 3)
	MaxStack      int  // stack frames per exception (default 4)
	NonFinite     bool // also generate NaN and ±Inf floats (Trace JSON rejects them)
}

func (o GenOptions) withDefaults() GenOptions {
	if o.MaxDepth <= 0 {
		o.MaxDepth = 5
	}
	if o.MaxChildren <= 0 {
		o.MaxChildren = 4
	}
	if o.MaxAttrs <= 0 {
		o.MaxAttrs = 6
	}
	if o.MaxValueDepth <= 0 {
		o.MaxValueDepth = 3
	}
	if o.MaxStack <= 0 {
		o.MaxStack = 4
	}
	return o
}

// Strings chosen to stress encoders: empty, multi-byte UTF-8, JSON escapes,
// control characters, lengths around CBOR's 23/24 and 255/256 byte limits.
var edgeStrings = []string{
	"", "a", "GET", "http.url", "zażółć gęślą jaźń", "日本語テキスト", "emoji 🚀🔥", "Ünïcödé",
	"quote \" backslash \\ slash /", "tab\tnew\nline\rcr", "nul \x00 bell \x07 esc \x1b",
	"line sep \u2028 para \u2029", "<html>&amp;</html>", strings.Repeat("x", 23), strings.Repeat("y", 24),
	strings.Repeat("z", 255), strings.Repeat("é", 128), "\ufffd replacement", "a\u0301 combining",
}

var words = []string{
	"order", "user", "cart", "payment", "invoice", "db", "query", "cache", "http", "grpc", "auth",
	"session", "item", "stock", "ship", "mail", "queue", "event", "span", "trace",
}

func randString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return edgeStrings[r.IntN(len(edgeStrings))]
	}
	n := 1 + r.IntN(3)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = words[r.IntN(len(words))]
	}
	return strings.Join(parts, ".")
}

var edgeInts = []int64{
	0, 1, -1, 23, 24, -24, -25, 255, 256, -256, -257, 65535, 65536, -65536, -65537,
	math.MaxUint32, math.MaxUint32 + 1, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64,
	1556820267280, 1556820267280123456,
}

func randInt(r *rand.Rand) int64 {
	switch r.IntN(3) {
	case 0:
		return edgeInts[r.IntN(len(edgeInts))]
	case 1:
		return r.Int64N(1000) - 500
	}
	return int64(r.Uint64())
}

func randNonNeg(r *rand.Rand) int64 {
	switch r.IntN(4) {
	case 0:
		return 0
	case 1:
		return r.Int64N(24)
	case 2:
		return r.Int64N(1 << 40)
	}
	return r.Int64()
}

var edgeFloats = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.5, 1.5, 65504, 65505, 100, 1e20, 1e21, 1e-6, 1e-7, 0.1, -2.75,
	float64(float32(0.1)), float64(float32(3.4e38)), 5.960464477539063e-08, /* smallest half subnormal */
	6.103515625e-05 /* smallest half normal */, math.SmallestNonzeroFloat64, math.MaxFloat64, 123456789.0,
	1.0 / 3, math.Pi, -math.E, 4503599627370496.5,
}

func randFloat(r *rand.Rand, nonFinite bool) float64 {
	if nonFinite && r.IntN(8) == 0 {
		switch r.IntN(3) {
		case 0:
			return math.NaN()
		case 1:
			return math.Inf(1)
		}
		return math.Inf(-1)
	}
	switch r.IntN(3) {
	case 0:
		return edgeFloats[r.IntN(len(edgeFloats))]
	case 1:
		return float64(float32(r.NormFloat64() * 1000))
	}
	return math.Float64frombits(r.Uint64()&^(0x7ff<<52) | uint64(1+r.IntN(0x7fe))<<52) // finite
}

func randValue(r *rand.Rand, o GenOptions, depth int) trace.Value {
	k := r.IntN(7)
	if depth >= o.MaxValueDepth && k >= 5 {
		k = r.IntN(5)
	}
	switch k {
	case 0:
		return trace.Null()
	case 1:
		return trace.String(randString(r))
	case 2:
		return trace.Int(randInt(r))
	case 3:
		return trace.Float(randFloat(r, o.NonFinite))
	case 4:
		return trace.Bool(r.IntN(2) == 0)
	case 5:
		n := r.IntN(4)
		list := make([]trace.Value, n)
		for i := range list {
			list[i] = randValue(r, o, depth+1)
		}
		if n == 0 && r.IntN(2) == 0 {
			list = nil
		}
		return trace.Value{Kind: trace.KindList, List: list}
	}
	return trace.Value{Kind: trace.KindMap, Map: randAttrs(r, o, depth+1, 3)}
}

// randAttrs returns up to max attributes whose values have the given depth.
func randAttrs(r *rand.Rand, o GenOptions, depth, max int) trace.Attrs {
	var a trace.Attrs
	for range r.IntN(max + 1) {
		a.Set(randString(r), randValue(r, o, depth))
	}
	return a
}

func randException(r *rand.Rand, o GenOptions) *trace.Exception {
	var first, prev *trace.Exception
	for n := 1 + r.IntN(3); n > 0; n-- {
		x := &trace.Exception{Class: randString(r), Message: randString(r)}
		for range r.IntN(o.MaxStack + 1) {
			x.Stack = append(x.Stack, trace.StackFrame{
				Class: randString(r), Method: randString(r), File: randString(r), Line: randInt(r),
			})
		}
		if prev == nil {
			first = x
		} else {
			prev.Cause = x
		}
		prev = x
	}
	return first
}

func randRecord(r *rand.Rand, o GenOptions, depth int) *trace.Record {
	rec := &trace.Record{
		Method:     randString(r),
		StartNS:    randInt(r),
		DurationNS: randNonNeg(r),
		Calls:      randInt(r),
		Errors:     randInt(r),
		Open:       r.IntN(5) == 0,
	}
	if r.IntN(2) == 0 {
		rec.StartNS = r.Int64N(1 << 32)
	}
	if r.IntN(2) == 0 {
		rec.Attrs = randAttrs(r, o, 1, o.MaxAttrs)
	}
	if r.IntN(6) == 0 {
		rec.Exception = randException(r, o)
	}
	if depth < o.MaxDepth {
		for range r.IntN(o.MaxChildren + 1) {
			rec.Children = append(rec.Children, randRecord(r, o, depth+1))
		}
	}
	return rec
}

var sources = []string{
	trace.SourceZorka, trace.SourceWTF, trace.SourceDial9, trace.SourceATF, trace.SourceJSON, trace.SourceOTLP, "",
}

// RandomSpan returns a span exercising every field of the model: ids (zero
// and not), edge integers, every Value kind including nested lists and maps,
// floats of every width, unicode and empty strings, exceptions with causes
// and stacks, open records, sometimes no root record at all.
func RandomSpan(r *rand.Rand, opt GenOptions) *trace.Span {
	o := opt.withDefaults()
	s := &trace.Span{
		Type:       randString(r),
		StartNS:    randInt(r),
		DurationNS: randNonNeg(r),
		Calls:      randNonNeg(r),
		Errors:     randNonNeg(r),
		Recs:       randNonNeg(r),
		Error:      r.IntN(4) == 0,
		Source:     sources[r.IntN(len(sources))],
	}
	for s.TraceID.IsZero() {
		for i := range s.TraceID {
			s.TraceID[i] = byte(r.Uint32())
		}
		if r.IntN(4) == 0 { // 64-bit Zorka ids: low half zero
			clear(s.TraceID[8:])
		}
	}
	if r.IntN(8) != 0 {
		s.SpanID = trace.SpanID(r.Uint64())
	}
	if r.IntN(2) == 0 {
		s.ParentID = trace.SpanID(r.Uint64())
	}
	if r.IntN(4) == 0 {
		s.ChunkNum = r.Uint32()
	}
	if r.IntN(3) != 0 {
		s.StartNS = 1_500_000_000_000_000_000 + r.Int64N(1<<50)
	}
	s.Attrs = randAttrs(r, o, 1, o.MaxAttrs)
	if r.IntN(10) != 0 {
		s.Root = randRecord(r, o, 1)
		if r.IntN(2) == 0 { // typical: root mirrors the span summary
			s.Root.StartNS, s.Root.DurationNS = 0, s.DurationNS
			s.Root.Calls, s.Root.Errors = s.Calls, s.Errors
		}
	}
	return s
}

// Method names and attribute values of RealisticTrace.
var (
	realPackages = []string{"com.acme.shop", "com.acme.billing", "org.apache.catalina.core", "io.netty.channel", "com.zaxxer.hikari.pool"}
	realClasses  = []string{"OrderService", "CartController", "PaymentGateway", "StandardEngineValve", "HikariProxyStatement", "InventoryRepository", "UserDao", "PricingEngine", "EmailSender", "AuditLog"}
	realMethods  = []string{"invoke", "handle", "executeQuery", "findById", "save", "compute", "send", "validate", "authorize", "serialize"}
	realServices = []string{"frontend", "cart", "checkout", "payment", "inventory", "email", "shipping", "auth", "pricing", "audit"}
	realRoutes   = []string{"/api/orders", "/api/cart", "/api/pay", "/api/items", "/api/users", "/health", "/api/ship"}
)

func realMethod(r *rand.Rand) string {
	return fmt.Sprintf("%s.%s.%s(Ljava/lang/String;)V", realPackages[r.IntN(len(realPackages))],
		realClasses[r.IntN(len(realClasses))], realMethods[r.IntN(len(realMethods))])
}

// RealisticTrace returns one trace of nSpans spans (a root span and children
// in a chain-and-fan shape), each with nAttrs attributes shaped like HTTP/DB
// instrumentation and a record tree of nRecords records, with ns times that
// nest properly. It is the workload of the codec and store benchmarks.
func RealisticTrace(r *rand.Rand, nSpans, nAttrs, nRecords int) []*trace.Span {
	var tid trace.TraceID
	for i := range tid {
		tid[i] = byte(r.Uint32())
	}
	start := int64(1_700_000_000_000_000_000) + r.Int64N(1<<45)
	spans := make([]*trace.Span, nSpans)
	for i := range spans {
		s := &trace.Span{
			TraceID: tid,
			SpanID:  trace.SpanID(r.Uint64() | 1),
			Type:    "http",
			StartNS: start + int64(i)*int64(50_000+r.IntN(100_000)),
			Source:  trace.SourceZorka,
		}
		if i > 0 {
			s.ParentID = spans[(i-1)/2].SpanID
		}
		svc := realServices[i%len(realServices)]
		for a := range nAttrs {
			switch a {
			case 0:
				s.Attrs.Set("service.name", trace.String(svc))
			case 1:
				s.Attrs.Set("http.method", trace.String([]string{"GET", "POST", "PUT"}[r.IntN(3)]))
			case 2:
				s.Attrs.Set("http.url", trace.String(fmt.Sprintf("%s/%d", realRoutes[r.IntN(len(realRoutes))], r.IntN(100000))))
			case 3:
				s.Attrs.Set("http.status_code", trace.Int([]int64{200, 200, 200, 201, 404, 500}[r.IntN(6)]))
			case 4:
				s.Attrs.Set("component", trace.String([]string{"http", "jdbc", "grpc"}[r.IntN(3)]))
			case 5:
				s.Attrs.Set("user.id", trace.String(fmt.Sprintf("u%06d", r.IntN(1000000))))
			default:
				s.Attrs.Set(fmt.Sprintf("tag.%d", a), trace.String(words[r.IntN(len(words))]))
			}
		}
		s.Root = realRecords(r, nRecords)
		s.DurationNS = s.Root.DurationNS
		s.FillSummary()
		if r.IntN(20) == 0 {
			s.Error = true
			s.Root.Exception = &trace.Exception{
				Class: "java.sql.SQLException", Message: "Connection is not available, request timed out after 30000ms.",
				Stack: []trace.StackFrame{
					{Class: "com.zaxxer.hikari.pool.HikariPool", Method: "createTimeoutException", File: "HikariPool.java", Line: 696},
					{Class: "com.acme.shop.OrderService", Method: "placeOrder", File: "OrderService.java", Line: 88},
				},
			}
			s.Errors++
		}
		spans[i] = s
	}
	return spans
}

// realRecords builds a tree of n records: each record's children lie within
// it in time, the tree fans out to depth ~4.
func realRecords(r *rand.Rand, n int) *trace.Record {
	recs := make([]*trace.Record, n)
	depth := make([]int, n)
	for i := range recs {
		recs[i] = &trace.Record{Method: realMethod(r), Calls: 1}
		if i > 0 {
			p := r.IntN(i)
			for depth[p] >= 4 {
				p = r.IntN(i)
			}
			depth[i] = depth[p] + 1
			recs[p].Children = append(recs[p].Children, recs[i])
		}
	}
	var place func(rec *trace.Record, start, dur int64)
	place = func(rec *trace.Record, start, dur int64) {
		rec.StartNS, rec.DurationNS = start, dur
		if len(rec.Children) == 0 {
			return
		}
		slot := dur / int64(len(rec.Children)+1)
		for i, c := range rec.Children {
			place(c, start+int64(i)*slot+slot/4, slot/2+r.Int64N(slot/4+1))
			rec.Calls += c.Calls
		}
	}
	place(recs[0], 0, 1_000_000+r.Int64N(50_000_000))
	if r.IntN(10) == 0 {
		recs[len(recs)-1].Attrs.Set("db.statement", trace.String("SELECT * FROM orders WHERE id = ?"))
	}
	return recs[0]
}
