package zorka

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"sort"

	"github.com/ztsd/ztsd/trace"
)

// A test encoder for the Zorka 1.90 wire format. It writes agent data and
// trace data the way LTraceHttpOutput does (CborDataWriter integer rules,
// symbols sent once per session in first-use order, method ids from 1 after
// each reset), plus the variants the agent or zorka-tdb allow: little-
// endian prologs/epilogs, 16-byte epilogs, plain-text attribute keys,
// nested values, trace info maps, bare breaks, exception refs and causes.
// While writing it records the byte offsets where a streamed submission may
// be cut, and it computes the spans a decoder must produce from the model,
// independently of the decoder.

// encValue is an attribute value in the model.
type encValue struct {
	kind  byte // 't' text, 'i' int, 'n' null, 'u' undefined, 'b' bool, 'r' string ref, 'y' bytes, 'l' list, 'm' map
	s     string
	i     int64
	b     bool
	elems []encValue
	keys  []string // map keys (plain text)
}

func (v encValue) expected() trace.Value {
	switch v.kind {
	case 't', 'r', 'y':
		return trace.String(v.s)
	case 'i':
		return trace.Int(v.i)
	case 'n', 'u':
		return trace.Null()
	case 'b':
		return trace.Bool(v.b)
	case 'l':
		vs := make([]trace.Value, len(v.elems))
		for i, e := range v.elems {
			vs[i] = e.expected()
		}
		return trace.List(vs...)
	case 'm':
		var a trace.Attrs
		for i, e := range v.elems {
			a.Set(v.keys[i], e.expected())
		}
		return trace.MapValue(a)
	}
	panic("bad value kind")
}

type encAttr struct {
	key    string
	keyRef bool
	val    encValue
}

type encMethod struct {
	class, name, sig string
	pretty           string // how ZICO renders it
}

type encBegin struct {
	clockMS  int64
	n        int    // elements: 1 [clock], 2 [clock, span], 3 [clock, span, parent]
	spanID   uint64 // n >= 2
	parentID uint64 // n == 3 (0 means "none")
}

type encFrame struct {
	class, method, file string
	line                int64
}

type encExc struct {
	id       uint64
	class    string
	msgKind  byte // 't' text, 'n' null, 'r' symbol ref
	msg      string
	cause    *encExc
	stack    []encFrame
	expected *trace.Exception
}

type encRec struct {
	method       encMethod
	tstart, tend uint64 // ticks, unwrapped (written masked to 40 bits)
	calls        uint64
	le           bool
	longEpilog   bool
	ending       byte // 'e' epilog, 'b' bare break, 'i' trace info map then bare break
	begin        *encBegin
	flags        uint64
	attrs        [][]encAttr
	children     []*encRec
	exc          *encExc // full exception
	excRef       *encExc // or a ref to one sent before
}

// Value pools with renderings known independently of the decoder.
var (
	encSignatures = []struct{ sig, ret, args string }{
		{"()V", "void", ""},
		{"(II)I", "int", "int, int"},
		{"(Ljava/lang/String;[J)Ljava/util/List;", "List", "String, long[]"},
		{"([[Lcom/x/Outer$Inner;ZBCSFD)[Ljava/lang/Object;", "Object[]", "Outer$Inner[][], boolean, byte, char, short, float, double"},
		{"(Lorg/apache/catalina/connector/Request;Lorg/apache/catalina/connector/Response;)V", "void", "Request, Response"},
	}
	encKeys = []string{"component", "http.url", "http.method", "http.status_code", "db.statement", "k", "thread.name", "zażółć"}
)

// encGen generates random traces and encodes them for one agent session.
type encGen struct {
	rng *rand.Rand
	// Agent-global symbol ids (stable for the JVM's lifetime) and what was
	// sent in the current session epoch.
	symIDs     map[string]uint64
	nextSym    uint64
	sentSyms   map[uint64]bool
	methodIDs  map[string]uint64
	nextMethod uint64
	agd        []byte
	zorkaInts  bool // CborDataWriter's non-minimal integer forms

	// per trace
	trc      []byte
	cuts     []int // offsets where a submission may be cut
	excIDs   map[uint64]bool
	sentExcs []*encExc
	records  int
}

func newEncGen(seed int64) *encGen {
	g := &encGen{rng: rand.New(rand.NewSource(seed)), symIDs: map[string]uint64{}, nextSym: 1}
	g.reset()
	return g
}

// reset starts a new session epoch: every symbol must be sent again and
// method ids restart at 1 (so earlier ids get redefined).
func (g *encGen) reset() {
	g.sentSyms = map[uint64]bool{}
	g.methodIDs = map[string]uint64{}
	g.nextMethod = 1
}

// appendHead writes a CBOR head, by CborDataWriter's rules when zorkaInts
// (4-byte form from 65536, 8-byte form from 2^31-1), else minimally.
func (g *encGen) appendHead(b []byte, major byte, v uint64) []byte {
	m := major << 5
	switch {
	case v < 24:
		return append(b, m|byte(v))
	case v < 256:
		return append(b, m|24, byte(v))
	case v < 65536:
		return append(b, m|25, byte(v>>8), byte(v))
	case v < math.MaxInt32 || (!g.zorkaInts && v <= math.MaxUint32):
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), v)
}

func (g *encGen) appendInt(b []byte, v int64) []byte {
	if v < 0 {
		return g.appendHead(b, majorNegInt, uint64(-1-v))
	}
	return g.appendHead(b, majorUint, uint64(v))
}

func (g *encGen) appendText(b []byte, s string) []byte {
	return append(g.appendHead(b, majorText, uint64(len(s))), s...)
}

func (g *encGen) appendTag(b []byte, tag uint64) []byte { return g.appendHead(b, majorTag, tag) }

// sym returns the agent id of a symbol, queueing its definition.
func (g *encGen) sym(text string, typ uint64) uint64 {
	key := fmt.Sprintf("%d:%s", typ, text)
	id, ok := g.symIDs[key]
	if !ok {
		g.nextSym += 1 + uint64(g.rng.Intn(3))
		if g.rng.Intn(20) == 0 {
			g.nextSym += 70000 // large ids take the 4-byte form
		}
		id = g.nextSym
		g.symIDs[key] = id
	}
	if !g.sentSyms[id] {
		g.sentSyms[id] = true
		g.agd = g.appendTag(g.agd, tagStringDef)
		g.agd = append(g.agd, 0x83)
		g.agd = g.appendHead(g.agd, majorUint, id)
		g.agd = g.appendText(g.agd, text)
		g.agd = g.appendHead(g.agd, majorUint, typ)
	}
	return id
}

func (g *encGen) methodID(m encMethod) uint64 {
	key := m.class + "|" + m.name + "|" + m.sig
	if id, ok := g.methodIDs[key]; ok {
		return id
	}
	c, n, s := g.sym(m.class, 5), g.sym(m.name, 6), g.sym(m.sig, 8)
	id := g.nextMethod
	g.nextMethod++
	g.methodIDs[key] = id
	g.agd = g.appendTag(g.agd, tagMethodDef)
	g.agd = append(g.agd, 0x84)
	for _, v := range []uint64{id, c, n, s} {
		g.agd = g.appendHead(g.agd, majorUint, v)
	}
	return id
}

// ---- model generation ----

func (g *encGen) randMethod() encMethod {
	sig := encSignatures[g.rng.Intn(len(encSignatures))]
	class := fmt.Sprintf("com.example.pkg%d.Class%d", g.rng.Intn(3), g.rng.Intn(12))
	name := fmt.Sprintf("method%d", g.rng.Intn(9))
	return encMethod{class: class, name: name, sig: sig.sig,
		pretty: sig.ret + " " + class + "." + name + "(" + sig.args + ")"}
}

func (g *encGen) randValue(depth int) encValue {
	k := g.rng.Intn(12)
	if depth >= 3 && k >= 9 {
		k = 0
	}
	switch k {
	case 0, 1:
		return encValue{kind: 't', s: fmt.Sprintf("value-%d", g.rng.Intn(1000))}
	case 2:
		return encValue{kind: 'i', i: g.rng.Int63n(100)}
	case 3:
		return encValue{kind: 'i', i: -1 - g.rng.Int63()}
	case 4:
		return encValue{kind: 'i', i: g.rng.Int63()}
	case 5:
		if g.rng.Intn(2) == 0 {
			return encValue{kind: 'u'}
		}
		return encValue{kind: 'n'}
	case 6:
		return encValue{kind: 'b', b: g.rng.Intn(2) == 0}
	case 7:
		return encValue{kind: 'r', s: encKeys[g.rng.Intn(len(encKeys))]}
	case 8:
		return encValue{kind: 'y', s: "raw-bytes"}
	case 9, 10:
		v := encValue{kind: 'l'}
		for i, n := 0, g.rng.Intn(4); i < n; i++ {
			v.elems = append(v.elems, g.randValue(depth+1))
		}
		return v
	default:
		v := encValue{kind: 'm'}
		for i, n := 0, g.rng.Intn(4); i < n; i++ {
			v.keys = append(v.keys, fmt.Sprintf("nk%d", g.rng.Intn(3)))
			v.elems = append(v.elems, g.randValue(depth+1))
		}
		return v
	}
}

func (g *encGen) randSpanID(twoElems bool) uint64 {
	for {
		id := g.rng.Uint64()
		if id != 0 && (!twoElems || id >= legacyTraceTypeLimit) {
			return id
		}
	}
}

func (g *encGen) randBegin() *encBegin {
	b := &encBegin{clockMS: 1_500_000_000_000 + g.rng.Int63n(1e11), n: 1 + g.rng.Intn(3)}
	if b.n >= 2 {
		b.spanID = g.randSpanID(b.n == 2)
	}
	if b.n == 3 && g.rng.Intn(3) != 0 {
		b.parentID = g.rng.Uint64() | 1
	}
	return b
}

// randRecord generates a record starting at tick t0, with up to budget
// descendants.
func (g *encGen) randRecord(depth int, t0 uint64, top bool, budget *int) *encRec {
	r := &encRec{method: g.randMethod(), tstart: t0, le: g.rng.Intn(2) == 0}
	if top || g.rng.Intn(7) == 0 {
		r.begin = g.randBegin()
	}
	if g.rng.Intn(10) == 0 {
		r.flags = flagErrorMark
	} else if g.rng.Intn(10) == 0 {
		r.flags = 0x03 // agent-internal bits only
	}
	for i, n := 0, g.rng.Intn(3); i < n; i++ {
		var m []encAttr
		for j, k := 0, g.rng.Intn(4); j < k; j++ {
			m = append(m, encAttr{key: encKeys[g.rng.Intn(len(encKeys))], keyRef: g.rng.Intn(4) != 0, val: g.randValue(1)})
		}
		r.attrs = append(r.attrs, m)
	}
	t := t0 + uint64(g.rng.Intn(50))
	var descendants uint64
	if depth < 7 {
		for i, n := 0, g.rng.Intn(4); i < n && *budget > 0; i++ {
			*budget--
			c := g.randRecord(depth+1, t, false, budget)
			r.children = append(r.children, c)
			t = c.tend + uint64(g.rng.Intn(20))
			descendants += c.calls
		}
	}
	r.tend = t + uint64(g.rng.Intn(200))
	r.calls = 1 + descendants
	switch g.rng.Intn(12) {
	case 0:
		r.calls = 1<<24 + uint64(g.rng.Int63n(1<<40))
	case 1:
		r.longEpilog = true
	}
	if r.calls >= 1<<24 {
		r.longEpilog = true // as the agent does: 24 bits do not hold it
	}
	switch g.rng.Intn(12) {
	case 0:
		r.ending = 'b'
	case 1:
		r.ending = 'i'
	default:
		r.ending = 'e'
	}
	switch g.rng.Intn(9) {
	case 0, 1:
		r.exc = g.randExc()
	case 2:
		if len(g.sentExcs) > 0 {
			r.excRef = g.sentExcs[g.rng.Intn(len(g.sentExcs))]
		}
	}
	return r
}

// randExc makes an exception; exceptions are "sent" in model-building order,
// which matches write order because children are built (and written)
// before their parent's exception.
func (g *encGen) randExc() *encExc {
	e := &encExc{class: fmt.Sprintf("com.example.Error%d", g.rng.Intn(5)), msgKind: "tnr"[g.rng.Intn(3)]}
	for {
		e.id = uint64(g.rng.Int63n(1 << 33))
		if !g.excIDs[e.id] {
			break
		}
	}
	g.excIDs[e.id] = true
	if e.msgKind != 'n' {
		e.msg = fmt.Sprintf("failure %d", g.rng.Intn(100))
	}
	for i, n := 0, g.rng.Intn(5); i < n; i++ {
		f := encFrame{class: fmt.Sprintf("com.example.Frame%d", g.rng.Intn(6)), method: fmt.Sprintf("call%d", g.rng.Intn(4)),
			file: fmt.Sprintf("Frame%d.java", g.rng.Intn(6)), line: int64(g.rng.Intn(5000))}
		if g.rng.Intn(10) == 0 {
			f.line = -1
		}
		e.stack = append(e.stack, f)
	}
	if len(g.sentExcs) > 0 && g.rng.Intn(2) == 0 {
		e.cause = g.sentExcs[g.rng.Intn(len(g.sentExcs))]
	}
	e.expected = &trace.Exception{Class: e.class, Message: e.msg}
	for _, f := range e.stack {
		e.expected.Stack = append(e.expected.Stack, trace.StackFrame{Class: f.class, Method: f.method, File: f.file, Line: f.line})
	}
	if e.cause != nil {
		e.expected.Cause = e.cause.expected
	}
	g.sentExcs = append(g.sentExcs, e)
	return e
}

// randTrace generates 1–3 top-level records (each begins a span).
func (g *encGen) randTrace(maxRecords int) []*encRec {
	var tops []*encRec
	g.excIDs = map[uint64]bool{}
	for i, n := 0, 1+g.rng.Intn(3); i < n; i++ {
		g.sentExcs = nil // exception refs stay within a top-level record
		t0 := uint64(g.rng.Int63n(1 << 40))
		if g.rng.Intn(4) == 0 {
			t0 = 1<<40 - uint64(g.rng.Intn(500)) // the 40-bit tick counter wraps inside
		}
		budget := g.rng.Intn(maxRecords)
		tops = append(tops, g.randRecord(1, t0, true, &budget))
	}
	return tops
}

// ---- encoding ----

func (g *encGen) cut() { g.cuts = append(g.cuts, len(g.trc)) }

// encodeTrace writes the trace body (and queues agent data).
func (g *encGen) encodeTrace(tops []*encRec) {
	g.trc, g.cuts, g.records = nil, nil, 0
	for _, r := range tops {
		g.writeRecord(r)
	}
}

func (g *encGen) word(b []byte, le bool, v uint64) []byte {
	if le {
		return binary.LittleEndian.AppendUint64(b, v)
	}
	return binary.BigEndian.AppendUint64(b, v)
}

func (g *encGen) writeValue(v encValue) {
	switch v.kind {
	case 't':
		g.trc = g.appendText(g.trc, v.s)
	case 'i':
		g.trc = g.appendInt(g.trc, v.i)
	case 'n':
		g.trc = append(g.trc, cborNull)
	case 'u':
		g.trc = append(g.trc, cborUndef)
	case 'b':
		if v.b {
			g.trc = append(g.trc, cborTrue)
		} else {
			g.trc = append(g.trc, cborFalse)
		}
	case 'r':
		g.trc = g.appendTag(g.trc, tagStringRef)
		g.trc = g.appendHead(g.trc, majorUint, g.sym(v.s, 0))
	case 'y':
		g.trc = append(g.appendHead(g.trc, majorBytes, uint64(len(v.s))), v.s...)
	case 'l':
		if g.rng.Intn(2) == 0 {
			g.trc = append(g.trc, 0x9F)
			for _, e := range v.elems {
				g.writeValue(e)
			}
			g.trc = append(g.trc, cborBreak)
		} else {
			g.trc = g.appendHead(g.trc, majorArray, uint64(len(v.elems)))
			for _, e := range v.elems {
				g.writeValue(e)
			}
		}
	case 'm':
		g.trc = g.appendHead(g.trc, majorMap, uint64(len(v.elems)))
		for i, e := range v.elems {
			g.trc = g.appendText(g.trc, v.keys[i])
			g.writeValue(e)
		}
	}
}

func (g *encGen) writeRecord(r *encRec) {
	g.records++
	g.trc = append(g.trc, 0xC8, 0x9F)
	if r.begin == nil {
		g.cut()
	}
	mid := g.methodID(r.method)
	prologTag := uint64(tagPrologBE)
	if r.le {
		prologTag = tagPrologLE
	}
	g.trc = g.appendTag(g.trc, prologTag)
	g.trc = append(g.trc, 0x48)
	g.trc = g.word(g.trc, r.le, mid<<40|r.tstart&mask40)
	if r.begin == nil {
		g.cut()
	}
	if b := r.begin; b != nil {
		g.trc = g.appendTag(g.trc, tagTraceBegin)
		g.trc = append(g.trc, 0x80|byte(b.n))
		g.trc = g.appendHead(g.trc, majorUint, uint64(b.clockMS))
		if b.n >= 2 {
			g.trc = g.appendInt(g.trc, int64(b.spanID))
		}
		if b.n == 3 {
			g.trc = g.appendInt(g.trc, int64(b.parentID))
		}
		g.cut()
	}
	if r.flags != 0 {
		g.trc = g.appendTag(g.trc, tagTraceFlags)
		g.trc = g.appendHead(g.trc, majorUint, r.flags)
		g.cut()
	}
	for _, m := range r.attrs {
		g.trc = g.appendTag(g.trc, tagTraceAttr)
		g.trc = g.appendHead(g.trc, majorMap, uint64(len(m)))
		for _, a := range m {
			if a.keyRef {
				g.trc = g.appendTag(g.trc, tagStringRef)
				g.trc = g.appendHead(g.trc, majorUint, g.sym(a.key, 0))
			} else {
				g.trc = g.appendText(g.trc, a.key)
			}
			g.writeValue(a.val)
		}
		g.cut()
	}
	for _, c := range r.children {
		g.writeRecord(c)
	}
	if e := r.exc; e != nil {
		g.trc = g.appendTag(g.trc, tagException)
		g.trc = append(g.trc, 0x85)
		g.trc = g.appendHead(g.trc, majorUint, e.id)
		g.trc = g.appendTag(g.trc, tagStringRef)
		g.trc = g.appendHead(g.trc, majorUint, g.sym(e.class, 5))
		switch e.msgKind {
		case 't':
			g.trc = g.appendText(g.trc, e.msg)
		case 'n':
			g.trc = append(g.trc, cborNull)
		case 'r':
			g.trc = g.appendHead(g.trc, majorUint, g.sym(e.msg, 0))
		}
		var cause uint64
		if e.cause != nil {
			cause = e.cause.id
		}
		g.trc = g.appendHead(g.trc, majorUint, cause)
		g.trc = g.appendHead(g.trc, majorArray, uint64(len(e.stack)))
		for _, f := range e.stack {
			g.trc = append(g.trc, 0x84)
			g.trc = g.appendHead(g.trc, majorUint, g.sym(f.class, 5))
			g.trc = g.appendHead(g.trc, majorUint, g.sym(f.method, 6))
			g.trc = g.appendHead(g.trc, majorUint, g.sym(f.file, 0))
			g.trc = g.appendInt(g.trc, f.line)
		}
		g.cut()
	}
	if e := r.excRef; e != nil {
		g.trc = g.appendTag(g.trc, tagExceptionRef)
		g.trc = g.appendHead(g.trc, majorUint, e.id)
		g.cut()
	}
	switch r.ending {
	case 'e':
		epilogTag := uint64(tagEpilogBE)
		if r.le {
			epilogTag = tagEpilogLE
		}
		g.trc = g.appendTag(g.trc, epilogTag)
		if r.longEpilog {
			g.trc = append(g.trc, 0x50)
			w := r.tend & mask40
			if r.calls < 1<<24 {
				w |= r.calls << 40
			}
			g.trc = g.word(g.trc, r.le, w)
			g.trc = g.word(g.trc, r.le, r.calls)
		} else {
			g.trc = append(g.trc, 0x48)
			g.trc = g.word(g.trc, r.le, (r.calls&0xFFFFFF)<<40|r.tend&mask40)
		}
	case 'i':
		g.trc = g.appendTag(g.trc, tagTraceInfo)
		g.trc = append(g.trc, 0xA2)
		g.trc = g.appendHead(g.trc, majorUint, tiTstop)
		g.trc = g.appendHead(g.trc, majorUint, r.tend&mask40)
		g.trc = g.appendHead(g.trc, majorUint, tiCalls)
		g.trc = g.appendHead(g.trc, majorUint, r.calls)
		g.cut()
	}
	g.trc = append(g.trc, cborBreak)
	g.cut()
}

// ---- expected decoder output ----

// expSpan is an expected span plus what is only known after decoding.
type expSpan struct {
	span      *trace.Span
	generated bool // span id generated by the decoder
	enclosing int  // index of the enclosing span, -1 for none
	wireParnt uint64
}

type expBuilder struct{ spans []*expSpan }

func expectedSpans(tops []*encRec) []*expSpan {
	b := &expBuilder{}
	for _, r := range tops {
		b.span(r, -1)
	}
	return b.spans
}

func (b *expBuilder) span(r *encRec, enclosing int) {
	idx := len(b.spans)
	sp := &trace.Span{StartNS: r.begin.clockMS * 1e6, SpanID: trace.SpanID(r.begin.spanID), Source: trace.SourceZorka}
	e := &expSpan{span: sp, generated: r.begin.n == 1, enclosing: enclosing, wireParnt: r.begin.parentID}
	b.spans = append(b.spans, e)
	errorMark := false
	sp.Root = b.record(r, r, idx, &errorMark)
	sp.DurationNS, sp.Calls, sp.Errors = sp.Root.DurationNS, sp.Root.Calls, sp.Root.Errors
	sp.Recs = sp.Root.CountRecords()
	sp.Error = errorMark
	sp.Attrs = append(sp.Attrs, sp.Root.Attrs...)
	sp.Attrs.Set("call.method", trace.String(r.method.pretty))
	sp.Attrs.Set("source.format", trace.String("zorka"))
}

func (b *expBuilder) record(r, root *encRec, spanIdx int, errorMark *bool) *trace.Record {
	out := &trace.Record{Method: r.method.pretty, StartNS: int64(r.tstart-root.tstart) << 16}
	if r.flags&flagErrorMark != 0 {
		*errorMark = true
	}
	for _, m := range r.attrs {
		for _, a := range m {
			out.Attrs.Set(a.key, a.val.expected())
		}
	}
	for _, c := range r.children {
		if c.begin != nil {
			b.span(c, spanIdx)
			continue
		}
		cr := b.record(c, root, spanIdx, errorMark)
		out.Children = append(out.Children, cr)
		out.Errors += cr.Errors
	}
	switch {
	case r.exc != nil:
		out.Exception = r.exc.expected
		out.Errors++
	case r.excRef != nil:
		out.Exception = r.excRef.expected
		out.Errors++
	}
	if r.ending != 'b' {
		out.DurationNS = int64(r.tend-r.tstart) << 16
		out.Calls = int64(r.calls)
	}
	return out
}

// resolveIDs fills generated span ids (taken from the decoded spans, matched
// by order of first appearance) and parent ids.
func resolveIDs(exp []*expSpan, decodedIDs []trace.SpanID) {
	for i, e := range exp {
		if e.generated && i < len(decodedIDs) {
			e.span.SpanID = decodedIDs[i]
		}
	}
	for _, e := range exp {
		switch {
		case e.wireParnt != 0:
			e.span.ParentID = trace.SpanID(e.wireParnt)
		case e.enclosing >= 0:
			e.span.ParentID = exp[e.enclosing].span.SpanID
		}
	}
}

// randomCuts picks up to k distinct cut offsets strictly inside the body.
func (g *encGen) randomCuts(k int) []int {
	var cands []int
	for _, c := range g.cuts {
		if c > 0 && c < len(g.trc) {
			cands = append(cands, c)
		}
	}
	g.rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	if len(cands) > k {
		cands = cands[:k]
	}
	sort.Ints(cands)
	out := cands[:0]
	for i, c := range cands {
		if i == 0 || c != cands[i-1] {
			out = append(out, c)
		}
	}
	return out
}
