package wtf

// A test writer: it generates random WTF files in every encoding from a
// random model (zones, nested scopes, instance events, appended scope data,
// every argument type), decodes them and checks that every event reads back
// as the model says.

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// gType is a generated event type.
type gType struct {
	wire    uint32
	name    string
	class   uint8
	flags   uint32
	args    []argSpec
	sig     string // argument list
	builtin builtin
}

// gNode is one generated event that becomes a record (or appended data).
type gNode struct {
	kind     eventKind
	typ      *gType
	method   string // record name (differs from typ.name for enter/timeStamp)
	start    int64  // µs
	end      int64
	args     []trace.Value // as written
	want     trace.Attrs   // expected record attributes
	children []*gNode
}

type gZone struct {
	id                   uint16
	name, typ, location  string
	roots                []*gNode
	events               []gEvent
	hasType, hasLocation bool
}

// gEvent is one event as written to the file.
type gEvent struct {
	typ  *gType
	time int64
	args []trace.Value
}

type generator struct {
	r        *rand.Rand
	enc      encoding
	unit     int64 // time step unit in µs (legacy JSON: whole ms)
	types    []*gType
	builtins map[string]*gType
	zones    []*gZone
	wires    map[uint32]bool
	title    string
	uri      string
}

var genScalarTypes = []argType{argBool, argInt8, argUint8, argInt16, argUint16, argInt32, argUint32, argFloat32,
	argASCII, argUTF8, argChar, argWChar, argAny, argFlowID, argTime32}
var genArrayTypes = []argType{argInt8Array, argUint8Array, argInt16Array, argUint16Array, argInt32Array,
	argUint32Array, argFloat32Array, argCharArray, argWCharArray}

func newGenerator(seed int64, enc encoding) *generator {
	g := &generator{r: rand.New(rand.NewSource(seed)), enc: enc, unit: 1, builtins: map[string]*gType{}, wires: map[uint32]bool{1: true}}
	if enc == encLegacyJSON {
		g.unit = 1000
	}
	g.title = g.str(argUTF8, false)
	g.uri = "http://example.test/" + g.asciiWord()
	for _, name := range []string{"wtf.zone#create", "wtf.zone#set", "wtf.scope#enter", "wtf.scope#leave",
		"wtf.scope#appendData", "wtf.trace#timeStamp", "wtf.trace#mark", "wtf.flow#branch", "wtf.timing#frameStart"} {
		sig := builtinSignatures[name]
		specs, err := parseArgs(sig.args)
		if err != nil {
			panic(err)
		}
		t := &gType{wire: g.wire(), name: name, class: sig.class, flags: sig.flags, args: specs, sig: sig.args, builtin: builtinByName[name]}
		g.builtins[name] = t
		g.types = append(g.types, t)
	}
	nTypes := 2 + g.r.Intn(6)
	for i := 0; i < nTypes; i++ {
		t := &gType{wire: g.wire(), name: fmt.Sprintf("gen.T%d#m%d", i, g.r.Intn(100))}
		switch g.r.Intn(4) {
		case 0:
			t.class = classInstance
		case 1:
			t.class = classInstance
			t.flags = flagInternal | flagAppendScopeData
		default:
			t.class = classScope
		}
		var sig []string
		for j, n := 0, g.r.Intn(5); j < n; j++ {
			typ := g.argType()
			name := fmt.Sprintf("a%d_%s", j, strings.Trim(typ.String(), "[]"))
			t.args = append(t.args, argSpec{name: name, typ: typ})
			sig = append(sig, g.typeSpelling(typ)+" "+name)
		}
		t.sig = strings.Join(sig, ", ")
		g.types = append(g.types, t)
	}
	return g
}

// typeSpelling writes a type the ways WTF accepts (aliases, sequence<>).
func (g *generator) typeSpelling(t argType) string {
	aliases := map[argType][]string{argInt8: {"byte"}, argUint8: {"octet"}, argInt16: {"short"}, argUint16: {"unsigned short"},
		argInt32: {"long"}, argUint32: {"unsigned long"}, argFloat32: {"float"}, argUint8Array: {"sequence<uint8>", "octet[]"}}
	if a := aliases[t]; len(a) > 0 && g.r.Intn(3) == 0 {
		return a[g.r.Intn(len(a))]
	}
	return t.String()
}

func (g *generator) wire() uint32 {
	for {
		w := uint32(2 + g.r.Intn(3000))
		if !g.wires[w] {
			g.wires[w] = true
			return w
		}
	}
}

func (g *generator) argType() argType {
	if g.r.Intn(4) == 0 {
		return genArrayTypes[g.r.Intn(len(genArrayTypes))]
	}
	return genScalarTypes[g.r.Intn(len(genScalarTypes))]
}

func (g *generator) asciiWord() string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789_-./"
	b := make([]byte, 1+g.r.Intn(12))
	for i := range b {
		b[i] = letters[g.r.Intn(len(letters))]
	}
	return string(b)
}

// str returns a non-empty string of the kind t can carry.
func (g *generator) str(t argType, nullable bool) string {
	runes := []rune{}
	for i, n := 0, 1+g.r.Intn(10); i < n; i++ {
		switch {
		case t == argASCII || t == argChar || t == argCharArray:
			runes = append(runes, rune(0x20+g.r.Intn(0xE0)))
			if runes[len(runes)-1] == 0x7F {
				runes[len(runes)-1] = 'x'
			}
		case g.r.Intn(3) == 0:
			runes = append(runes, []rune("é中😀⁂⇱")[g.r.Intn(5)])
		default:
			runes = append(runes, rune('a'+g.r.Intn(26)))
		}
	}
	if t == argWChar || t == argWCharArray {
		for i, r := range runes {
			if r > 0xFFFF {
				runes[i] = 'w'
			}
		}
	}
	return string(runes)
}

// value returns a random value of type t, as the decoder should return it.
func (g *generator) value(t argType) trace.Value {
	r := g.r
	nullOK := g.enc == encCFFBinary || g.enc == encCFFJSON || g.enc == encLegacyJSON
	switch t {
	case argBool:
		return trace.Bool(r.Intn(2) == 0)
	case argInt8:
		return trace.Int(int64(int8(r.Uint32())))
	case argUint8:
		return trace.Int(int64(uint8(r.Uint32())))
	case argInt16:
		return trace.Int(int64(int16(r.Uint32())))
	case argUint16:
		return trace.Int(int64(uint16(r.Uint32())))
	case argInt32:
		return trace.Int(int64(int32(r.Uint32())))
	case argUint32, argFlowID:
		return trace.Int(int64(r.Uint32()))
	case argFloat32:
		if (g.enc == encLegacyBinary || g.enc == encCFFBinary) && r.Intn(8) == 0 {
			// Binary float32 arguments can be NaN or ±Inf (JSON ones cannot).
			return trace.Float([]float64{math.NaN(), math.Inf(1), math.Inf(-1)}[r.Intn(3)])
		}
		return trace.Float(float64(float32(r.NormFloat64()*1000) + 0.5))
	case argTime32:
		return trace.Float(float64(r.Uint32()) / 1000)
	case argASCII, argUTF8:
		if r.Intn(6) == 0 {
			return trace.Null()
		}
		return trace.String(g.str(t, false))
	case argChar:
		return trace.String(string(rune(0x20 + r.Intn(0xDF))))
	case argWChar:
		return trace.String(string(rune(0x100 + r.Intn(0xD000))))
	case argAny:
		if r.Intn(6) == 0 {
			return trace.Null()
		}
		return g.anyValue(0)
	case argCharArray, argWCharArray:
		if nullOK && r.Intn(6) == 0 {
			return trace.Null()
		}
		if r.Intn(5) == 0 {
			return trace.String("")
		}
		return trace.String(g.str(t, false))
	}
	// numeric arrays
	if nullOK && r.Intn(6) == 0 {
		return trace.Null()
	}
	elem := map[argType]argType{argInt8Array: argInt8, argUint8Array: argUint8, argInt16Array: argInt16,
		argUint16Array: argUint16, argInt32Array: argInt32, argUint32Array: argUint32, argFloat32Array: argFloat32}[t]
	list := []trace.Value{}
	for i, n := 0, r.Intn(7); i < n; i++ {
		list = append(list, g.value(elem))
	}
	return trace.Value{Kind: trace.KindList, List: list}
}

func (g *generator) anyValue(depth int) trace.Value {
	switch k := g.r.Intn(7); {
	case k == 0 && depth < 3:
		var a trace.Attrs
		for i, n := 0, g.r.Intn(4); i < n; i++ {
			a.Set(g.asciiWord(), g.anyValue(depth+1))
		}
		if a == nil {
			a = trace.Attrs{}
		}
		return trace.MapValue(a)
	case k == 1 && depth < 3:
		list := []trace.Value{}
		for i, n := 0, g.r.Intn(4); i < n; i++ {
			list = append(list, g.anyValue(depth+1))
		}
		return trace.Value{Kind: trace.KindList, List: list}
	case k == 2:
		return trace.Int(g.r.Int63n(1<<40) - 1<<39)
	case k == 3:
		return trace.Float(float64(g.r.Intn(100000)) + 0.25)
	case k == 4:
		return trace.Bool(g.r.Intn(2) == 0)
	case k == 5:
		return trace.Null()
	}
	return trace.String(g.str(argUTF8, false))
}

func (g *generator) values(t *gType) []trace.Value {
	vals := make([]trace.Value, len(t.args))
	for i, a := range t.args {
		vals[i] = g.value(a.typ)
	}
	return vals
}

func attrsOf(t *gType, vals []trace.Value) trace.Attrs {
	var a trace.Attrs
	for i, v := range vals {
		a.Set(t.args[i].name, v)
	}
	return a
}

// build generates the zones and their event trees.
func (g *generator) build() {
	nZones := 1 + g.r.Intn(3)
	for i := 0; i < nZones; i++ {
		z := &gZone{id: uint16(100 + i), name: fmt.Sprintf("zone %d %s", i, g.asciiWord()), typ: "script", location: g.uri, hasType: true, hasLocation: true}
		if g.r.Intn(3) == 0 && g.enc != encLegacyJSON && g.enc != encLegacyBinary {
			z.hasType = false // null, as the C++ bindings write
			z.typ = ""
		}
		t := int64(1+g.r.Intn(5)) * g.unit
		for n := 1 + g.r.Intn(6); n > 0; n-- {
			root := g.node(&t, 0, true)
			z.roots = append(z.roots, root)
		}
		g.zones = append(g.zones, z)
	}
}

func (g *generator) userTypes(pred func(*gType) bool) []*gType {
	var out []*gType
	for _, t := range g.types {
		if t.builtin == bNone && pred(t) {
			out = append(out, t)
		}
	}
	return out
}

// node generates one record (with its subtree) starting at *t.
func (g *generator) node(t *int64, depth int, top bool) *gNode {
	*t += int64(1+g.r.Intn(40)) * g.unit
	n := &gNode{start: *t}
	scopes := g.userTypes(func(t *gType) bool { return t.class == classScope })
	instances := g.userTypes(func(t *gType) bool { return t.class == classInstance && t.flags&flagAppendScopeData == 0 })
	appends := g.userTypes(func(t *gType) bool { return t.flags&flagAppendScopeData != 0 })
	k := g.r.Intn(10)
	switch {
	case depth >= 6 || k < 3:
		n.kind = kindInstance
		switch {
		case k == 0:
			n.typ = g.builtins["wtf.trace#timeStamp"]
			name := g.asciiWord()
			n.method = name
			v := g.anyValue(1)
			n.args = []trace.Value{trace.String(name), v}
			if v.Kind != trace.KindNull {
				n.want = trace.Attrs{{Key: "value", Value: v}}
			}
		case k == 1 && g.enc != encLegacyJSON:
			n.typ = g.builtins[[]string{"wtf.trace#mark", "wtf.flow#branch", "wtf.timing#frameStart"}[g.r.Intn(3)]]
		case len(instances) > 0:
			n.typ = instances[g.r.Intn(len(instances))]
		default:
			n.typ = g.builtins["wtf.trace#mark"]
		}
	default:
		n.kind = kindScope
		if len(scopes) == 0 || g.r.Intn(4) == 0 {
			n.typ = g.builtins["wtf.scope#enter"]
			n.method = "enter." + g.asciiWord()
			n.args = []trace.Value{trace.String(n.method)}
		} else {
			n.typ = scopes[g.r.Intn(len(scopes))]
		}
	}
	if n.method == "" {
		n.method = n.typ.name
		n.args = g.values(n.typ)
		n.want = attrsOf(n.typ, n.args)
	}
	n.end = n.start
	if n.kind != kindScope {
		return n
	}
	for c := g.r.Intn(4); c > 0; c-- {
		if g.r.Intn(4) == 0 {
			// appended scope data: builtin appendData or a flagged custom type
			*t += int64(g.r.Intn(3)) * g.unit
			a := &gNode{kind: kindAppend, start: *t}
			if len(appends) > 0 && g.r.Intn(2) == 0 {
				a.typ = appends[g.r.Intn(len(appends))]
				a.args = g.values(a.typ)
				for i, v := range a.args {
					n.want.Set(a.typ.args[i].name, v)
				}
			} else {
				a.typ = g.builtins["wtf.scope#appendData"]
				key := "k" + g.asciiWord()
				v := g.anyValue(1)
				a.args = []trace.Value{trace.String(key), v}
				n.want.Set(key, v)
			}
			n.children = append(n.children, a)
			continue
		}
		n.children = append(n.children, g.node(t, depth+1, false))
	}
	*t += int64(1+g.r.Intn(40)) * g.unit
	n.end = *t
	return n
}

// flatten turns each zone's trees into its event sequence.
func (g *generator) flatten() {
	leave := g.builtins["wtf.scope#leave"]
	for _, z := range g.zones {
		var walk func(n *gNode)
		walk = func(n *gNode) {
			z.events = append(z.events, gEvent{typ: n.typ, time: n.start, args: n.args})
			for _, c := range n.children {
				walk(c)
			}
			if n.kind == kindScope {
				z.events = append(z.events, gEvent{typ: leave, time: n.end})
			}
		}
		for _, r := range z.roots {
			walk(r)
		}
	}
}

// stream is the whole event stream of the file: definitions, zone creates,
// then the zones' events in batches, each after a zone#set.
func (g *generator) stream() []gEvent {
	var out []gEvent
	def := &gType{wire: 1, name: "wtf.event#define", args: defineArgs}
	for _, t := range g.types {
		if g.enc == encLegacyJSON {
			break
		}
		out = append(out, gEvent{typ: def, time: 0xFFFFF, args: []trace.Value{trace.Int(int64(t.wire)),
			trace.Int(int64(t.class)), trace.Int(int64(t.flags)), trace.String(t.name), sigValue(t.sig)}})
	}
	create, set := g.builtins["wtf.zone#create"], g.builtins["wtf.zone#set"]
	for _, z := range g.zones {
		typ := trace.Null()
		if z.hasType {
			typ = trace.String(z.typ)
		}
		out = append(out, gEvent{typ: create, time: 0, args: []trace.Value{trace.Int(int64(z.id)), trace.String(z.name), typ, trace.String(z.location)}})
	}
	pos := make([]int, len(g.zones))
	for {
		var open []int
		for i, z := range g.zones {
			if pos[i] < len(z.events) {
				open = append(open, i)
			}
		}
		if len(open) == 0 {
			return out
		}
		i := open[g.r.Intn(len(open))]
		z := g.zones[i]
		out = append(out, gEvent{typ: set, time: 0, args: []trace.Value{trace.Int(int64(z.id))}})
		n := 1 + g.r.Intn(20)
		for ; n > 0 && pos[i] < len(z.events); n-- {
			out = append(out, z.events[pos[i]])
			pos[i]++
		}
	}
}

func sigValue(s string) trace.Value {
	if s == "" {
		return trace.Null()
	}
	return trace.String(s)
}

// expected renders the spans the decoder must emit, zone by zone.
func (g *generator) expected(timebaseNS int64) []string {
	var out []string
	render := func(z *gZone, root *gNode) string {
		var b strings.Builder
		var walk func(n *gNode)
		walk = func(n *gNode) {
			fmt.Fprintf(&b, "%s@%d+%d%s", n.method, (n.start-root.start)*1000, (n.end-n.start)*1000, attrsJSON(n.want))
			var kids []*gNode
			for _, c := range n.children {
				if c.kind != kindAppend {
					kids = append(kids, c)
				}
			}
			if len(kids) > 0 {
				b.WriteByte('[')
				for i, c := range kids {
					if i > 0 {
						b.WriteByte(',')
					}
					walk(c)
				}
				b.WriteByte(']')
			}
		}
		walk(root)
		return fmt.Sprintf("%s %d %s", z.name, timebaseNS+root.start*1000, b.String())
	}
	for zi, z := range g.zones {
		if g.enc == encLegacyJSON && zi == 0 {
			// Legacy JSON stores every wtf.zone#create, in the zone that is
			// current then: the first zone, which they all precede.
			for _, c := range g.zones {
				a := trace.Attrs{}
				a.Set("zoneId", trace.Int(int64(c.id)))
				a.Set("name", trace.String(c.name))
				a.Set("type", trace.String(c.typ))
				a.Set("location", trace.String(c.location))
				out = append(out, fmt.Sprintf("%s %d wtf.zone#create@0+0%s", z.name, timebaseNS, attrsJSON(a)))
			}
		}
		for _, r := range z.roots {
			out = append(out, render(z, r))
		}
	}
	return out
}

// renderSpans renders decoded spans like expected.
func renderSpans(spans []*trace.Span) []string {
	var out []string
	for _, s := range spans {
		var b strings.Builder
		var walk func(r *trace.Record)
		walk = func(r *trace.Record) {
			fmt.Fprintf(&b, "%s@%d+%d%s", r.Method, r.StartNS, r.DurationNS, attrsJSON(r.Attrs))
			if len(r.Children) > 0 {
				b.WriteByte('[')
				for i, c := range r.Children {
					if i > 0 {
						b.WriteByte(',')
					}
					walk(c)
				}
				b.WriteByte(']')
			}
		}
		walk(s.Root)
		zone, _ := s.Attrs.Get("thread")
		out = append(out, fmt.Sprintf("%s %d %s", zone.Str, s.StartNS, b.String()))
	}
	return out
}

// --- encoders ---------------------------------------------------------------

type legacyWriter struct {
	b  []byte
	le bool
}

func (w *legacyWriter) u16(v uint16) {
	if w.le {
		w.b = binary.LittleEndian.AppendUint16(w.b, v)
	} else {
		w.b = binary.BigEndian.AppendUint16(w.b, v)
	}
}

func (w *legacyWriter) u32(v uint32) {
	if w.le {
		w.b = binary.LittleEndian.AppendUint32(w.b, v)
	} else {
		w.b = binary.BigEndian.AppendUint32(w.b, v)
	}
}

// utf8 writes the legacy writer's string: UTF-16 unit count, byte count,
// then each unit encoded on its own (CESU-8).
func (w *legacyWriter) utf8(v trace.Value) {
	if v.Kind == trace.KindNull || v.Str == "" {
		w.u16(0)
		return
	}
	units := utf16.Encode([]rune(v.Str))
	var enc []byte
	for _, u := range units {
		switch {
		case u < 0x80:
			enc = append(enc, byte(u))
		case u < 0x800:
			enc = append(enc, 0xC0|byte(u>>6), 0x80|byte(u&0x3F))
		default:
			enc = append(enc, 0xE0|byte(u>>12), 0x80|byte(u>>6&0x3F), 0x80|byte(u&0x3F))
		}
	}
	w.u16(uint16(len(units)))
	w.u16(uint16(len(enc)))
	w.b = append(w.b, enc...)
}

func (w *legacyWriter) ascii(v trace.Value) {
	if v.Kind == trace.KindNull {
		w.u16(0)
		return
	}
	runes := []rune(v.Str)
	w.u16(uint16(len(runes)))
	for _, r := range runes {
		w.b = append(w.b, byte(r))
	}
}

func (w *legacyWriter) arg(t argType, v trace.Value) {
	switch t {
	case argBool:
		if v.Bool {
			w.b = append(w.b, 1)
		} else {
			w.b = append(w.b, 0)
		}
	case argInt8, argUint8:
		w.b = append(w.b, byte(v.Int))
	case argChar:
		w.b = append(w.b, byte([]rune(v.Str)[0]))
	case argInt16, argUint16:
		w.u16(uint16(v.Int))
	case argWChar:
		w.u16(uint16([]rune(v.Str)[0]))
	case argInt32, argUint32, argFlowID:
		w.u32(uint32(v.Int))
	case argTime32:
		w.u32(uint32(math.Round(v.Float * 1000)))
	case argFloat32:
		w.b = binary.LittleEndian.AppendUint32(w.b, math.Float32bits(float32(v.Float)))
	case argASCII:
		w.ascii(v)
	case argUTF8:
		w.utf8(v)
	case argAny:
		if v.Kind == trace.KindNull {
			w.u16(0)
		} else {
			w.utf8(trace.String(valueJSON(v)))
		}
	case argCharArray:
		w.u32(uint32(len([]rune(v.Str))))
		for _, r := range v.Str {
			w.b = append(w.b, byte(r))
		}
	case argWCharArray:
		units := utf16.Encode([]rune(v.Str))
		w.u32(uint32(len(units)))
		for _, u := range units {
			w.u16(u)
		}
	default:
		w.u32(uint32(len(v.List)))
		for _, e := range v.List {
			switch elemSize(t) {
			case 1:
				w.b = append(w.b, byte(e.Int))
			case 2:
				w.u16(uint16(e.Int))
			default:
				if t == argFloat32Array {
					w.b = binary.LittleEndian.AppendUint32(w.b, math.Float32bits(float32(e.Float)))
				} else {
					w.u32(uint32(e.Int))
				}
			}
		}
	}
}

// valueJSON renders a value as JSON that decodes back to the same value
// (floats keep a fraction).
func valueJSON(v trace.Value) string {
	var b strings.Builder
	writeValueJSONExact(&b, v)
	return b.String()
}

func writeValueJSONExact(b *strings.Builder, v trace.Value) {
	switch v.Kind {
	case trace.KindFloat:
		s := strconv.FormatFloat(v.Float, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		b.WriteString(s)
	case trace.KindList:
		b.WriteByte('[')
		for i, e := range v.List {
			if i > 0 {
				b.WriteByte(',')
			}
			writeValueJSONExact(b, e)
		}
		b.WriteByte(']')
	case trace.KindMap:
		b.WriteByte('{')
		for i, kv := range v.Map {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := jsonMarshalString(kv.Key)
			b.WriteString(k)
			b.WriteByte(':')
			writeValueJSONExact(b, kv.Value)
		}
		b.WriteByte('}')
	default:
		writeValueJSON(b, v)
	}
}

func jsonMarshalString(s string) (string, error) {
	var b strings.Builder
	writeValueJSON(&b, trace.String(s))
	return b.String(), nil
}

func (g *generator) contextJSON() string {
	return fmt.Sprintf(`{"contextType":"script","uri":%s,"title":%s,"icon":null,"taskId":"42","args":["a","b"],`+
		`"userAgent":{"value":"UA","type":"gecko","platform":"linux","platformVersion":"6","device":"desktop"}}`,
		valueJSON(trace.String(g.uri)), valueJSON(trace.String(g.title)))
}

// legacyFile writes a legacy binary trace (big-endian, or the spec's
// little-endian layout with u16-length header strings when le).
func (g *generator) legacyFile(events []gEvent, timebaseMS int64, le bool) []byte {
	w := &legacyWriter{le: le}
	w.b = append(w.b, 0xDE, 0xAD, 0xBE, 0xEF)
	if le {
		w.b = []byte{0xEF, 0xBE, 0xAD, 0xDE}
	}
	w.u32(0x59F49000)
	w.u32(3)
	ctx := g.contextJSON()
	specStrings := le && g.r.Intn(2) == 0
	header := func(s string) {
		if specStrings {
			w.u16(uint16(len(s)))
			w.b = append(w.b, s...)
		} else {
			w.utf8(trace.String(s))
		}
	}
	header(ctx)
	w.u32(1)
	w.u32(uint32(timebaseMS))
	w.u32(uint32(timebaseMS >> 32))
	header(`{"now_time_ns":115}`)
	for _, e := range events {
		w.u16(uint16(e.typ.wire))
		w.u32(uint32(e.time))
		for i, a := range e.typ.args {
			w.arg(a.typ, e.args[i])
		}
	}
	return w.b
}

// cffChunkWriter builds one event_data chunk.
type cffChunkWriter struct {
	strings []string
	slots   []byte
}

func (c *cffChunkWriter) u32(v uint32) { c.slots = binary.LittleEndian.AppendUint32(c.slots, v) }

func (c *cffChunkWriter) str(v trace.Value) {
	switch {
	case v.Kind == trace.KindNull:
		c.u32(ordinalNull)
	case v.Str == "" && len(c.strings)%2 == 0:
		c.u32(ordinalEmpty)
	default:
		c.u32(uint32(len(c.strings)))
		c.strings = append(c.strings, v.Str)
	}
}

// pad appends n bytes and garbage padding to the next slot.
func (c *cffChunkWriter) pad(data []byte) {
	c.slots = append(c.slots, data...)
	for len(c.slots)%4 != 0 {
		c.slots = append(c.slots, 0xA5)
	}
}

func (c *cffChunkWriter) arg(t argType, v trace.Value) {
	slot := func(b []byte) { c.pad(append(b, 0xCC, 0xCC, 0xCC)[:4]) } // unused bytes hold garbage
	switch t {
	case argBool:
		if v.Bool {
			slot([]byte{1})
		} else {
			slot([]byte{0})
		}
	case argInt8, argUint8:
		slot([]byte{byte(v.Int)})
	case argChar:
		slot([]byte{byte([]rune(v.Str)[0])})
	case argInt16, argUint16:
		slot(binary.LittleEndian.AppendUint16(nil, uint16(v.Int)))
	case argWChar:
		slot(binary.LittleEndian.AppendUint16(nil, uint16([]rune(v.Str)[0])))
	case argInt32, argUint32, argFlowID:
		c.u32(uint32(v.Int))
	case argTime32:
		c.u32(uint32(math.Round(v.Float * 1000)))
	case argFloat32:
		c.u32(math.Float32bits(float32(v.Float)))
	case argASCII, argUTF8:
		c.str(v)
	case argAny:
		if v.Kind == trace.KindNull {
			c.u32(ordinalNull)
		} else {
			c.u32(uint32(len(c.strings)))
			c.strings = append(c.strings, valueJSON(v))
		}
	case argCharArray, argWCharArray:
		if v.Kind == trace.KindNull {
			c.u32(ordinalNull)
			return
		}
		var data []byte
		n := 0
		if t == argCharArray {
			for _, r := range v.Str {
				data = append(data, byte(r))
				n++
			}
		} else {
			for _, u := range utf16.Encode([]rune(v.Str)) {
				data = binary.LittleEndian.AppendUint16(data, u)
				n++
			}
		}
		c.u32(uint32(n))
		c.pad(data)
	default:
		if v.Kind == trace.KindNull {
			c.u32(ordinalNull)
			return
		}
		c.u32(uint32(len(v.List)))
		var data []byte
		for _, e := range v.List {
			switch {
			case t == argFloat32Array:
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(e.Float)))
			case elemSize(t) == 1:
				data = append(data, byte(e.Int))
			case elemSize(t) == 2:
				data = binary.LittleEndian.AppendUint16(data, uint16(e.Int))
			default:
				data = binary.LittleEndian.AppendUint32(data, uint32(e.Int))
			}
		}
		c.pad(data)
	}
}

func (c *cffChunkWriter) event(e gEvent) {
	c.u32(e.typ.wire)
	c.u32(uint32(e.time))
	for i, a := range e.typ.args {
		c.arg(a.typ, e.args[i])
	}
}

// cffPartOut is one part to write.
type cffPartOut struct {
	typ  uint32
	body []byte
}

// cffChunkBytes lays out a binary chunk: header, part table, bodies padded
// to 4 bytes.
func cffChunkBytes(id, ctype uint32, parts []cffPartOut) []byte {
	var body []byte
	var table []byte
	for _, p := range parts {
		table = binary.LittleEndian.AppendUint32(table, p.typ)
		table = binary.LittleEndian.AppendUint32(table, uint32(len(body)))
		table = binary.LittleEndian.AppendUint32(table, uint32(len(p.body)))
		body = append(body, p.body...)
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
	}
	var out []byte
	for _, v := range []uint32{id, ctype, uint32(24 + len(table) + len(body)), 0xFFFFFFFF, 0xFFFFFFFF, uint32(len(parts))} {
		out = binary.LittleEndian.AppendUint32(out, v)
	}
	out = append(out, table...)
	return append(out, body...)
}

// cffChunks splits the stream into event chunks, as lists of parts.
func (g *generator) cffChunks(events []gEvent) [][]cffPartOut {
	var chunks [][]cffPartOut
	for len(events) > 0 {
		n := 1 + g.r.Intn(len(events))
		c := &cffChunkWriter{}
		for _, e := range events[:n] {
			c.event(e)
		}
		events = events[n:]
		var tbl []byte
		for _, s := range c.strings {
			tbl = append(tbl, s...)
			tbl = append(tbl, 0)
		}
		parts := []cffPartOut{{partStringTable, tbl}, {partBinaryEventBuffer, c.slots}}
		if g.r.Intn(2) == 0 {
			parts[0], parts[1] = parts[1], parts[0] // the table may follow the events
		}
		if g.r.Intn(3) == 0 {
			parts = append(parts, cffPartOut{partBinaryResource, []byte("resource bytes")}, cffPartOut{0x7777, []byte{1, 2, 3}})
		}
		chunks = append(chunks, parts)
	}
	return chunks
}

func (g *generator) headerJSON(timebaseMS float64) string {
	return fmt.Sprintf(`{"type":"file_header","flags":["has_high_resolution_times"],"timebase":%s,"contextInfo":%s,"metadata":{"nowTimeNs":38}}`,
		strconv.FormatFloat(timebaseMS, 'f', -1, 64), g.contextJSON())
}

func (g *generator) cffFile(events []gEvent, timebaseMS float64) []byte {
	out := binary.LittleEndian.AppendUint32(nil, magic)
	out = binary.LittleEndian.AppendUint32(out, 0xE8214400)
	out = binary.LittleEndian.AppendUint32(out, 10)
	out = append(out, cffChunkBytes(1, chunkFileHeader, []cffPartOut{{partFileHeader, []byte(g.headerJSON(timebaseMS))}})...)
	for i, parts := range g.cffChunks(events) {
		if g.r.Intn(4) == 0 {
			out = append(out, cffChunkBytes(9, 77, []cffPartOut{{partBinaryResource, []byte("unknown chunk")}})...)
		}
		out = append(out, cffChunkBytes(uint32(i+2), chunkEventData, parts)...)
	}
	return out
}

func (g *generator) cffJSONFile(events []gEvent, timebaseMS float64) []byte {
	partial := g.r.Intn(3) == 0
	var b bytes.Buffer
	header := `{"id":1,"type":"file_header","parts":[` + g.headerJSON(timebaseMS) + `]}`
	var chunks []string
	for i, parts := range g.cffChunks(events) {
		var ps []string
		for _, p := range parts {
			switch p.typ {
			case partStringTable:
				var entries []string
				for _, s := range bytes.Split(bytes.TrimSuffix(p.body, []byte{0}), []byte{0}) {
					entries = append(entries, valueJSON(trace.String(string(s))))
				}
				if len(p.body) == 0 {
					entries = nil
				}
				ps = append(ps, `{"type":"string_table","value":[`+strings.Join(entries, ",")+`]}`)
			case partBinaryEventBuffer, partBinaryResource:
				name := map[uint32]string{partBinaryEventBuffer: "binary_event_buffer", partBinaryResource: "binary_resource"}[p.typ]
				ps = append(ps, fmt.Sprintf(`{"type":%q,"mode":"base64","byteLength":%d,"value":%q}`, name, len(p.body), base64.StdEncoding.EncodeToString(p.body)))
			default:
				ps = append(ps, `{"type":"future_part","value":1}`)
			}
		}
		chunks = append(chunks, fmt.Sprintf(`{"id":%d,"type":"event_data","parts":[%s]}`, i+2, strings.Join(ps, ",")))
	}
	if partial {
		b.WriteString(`{"wtfVersion":1508486400000,"formatVersion":10}` + "\n")
		b.WriteString(header + "\n")
		for _, c := range chunks {
			b.WriteString(`{"chunks":[` + c + "]}\n")
		}
		return b.Bytes()
	}
	b.WriteString(`{"wtfVersion":1508486400000,"formatVersion":10,"chunks":[` + header)
	for _, c := range chunks {
		b.WriteString(",\n" + c)
	}
	b.WriteString("]}")
	return b.Bytes()
}

func (g *generator) legacyJSONFile(events []gEvent, timebaseMS int64) []byte {
	var entries []string
	entries = append(entries, fmt.Sprintf(`{"type":"wtf.json#header","format_version":2,"timebase":%d,"contextInfo":%s}`, timebaseMS, g.contextJSON()))
	ids := map[*gType]int{}
	for i, t := range g.types {
		if t.builtin != bNone {
			continue
		}
		class := "scope"
		if t.class == classInstance {
			class = "instance"
		}
		ids[t] = i + 1
		entries = append(entries, fmt.Sprintf(`{"type":"wtf.event#define","signature":%s,"class":%q,"flags":%d,"event_id":%d}`,
			valueJSON(trace.String(t.name+"("+t.sig+")")), class, t.flags, i+1))
	}
	for _, e := range events {
		var ref string
		switch {
		case e.typ.builtin == bScopeLeave:
			ref = "-1"
		case e.typ.builtin != bNone:
			ref = valueJSON(trace.String(e.typ.name))
		default:
			ref = strconv.Itoa(ids[e.typ])
		}
		var args []string
		for _, v := range e.args {
			args = append(args, valueJSON(v))
		}
		entry := fmt.Sprintf(`{"event":%s,"time":%d`, ref, e.time/1000)
		if len(args) > 0 {
			entry += `,"args":[` + strings.Join(args, ",") + `]`
		}
		entries = append(entries, entry+"}")
	}
	return []byte("[\n" + strings.Join(entries, ",\n") + "\n]")
}

// TestWriterRoundTrip generates random files in every encoding and checks
// that every event reads back.
func TestWriterRoundTrip(t *testing.T) {
	encodings := []struct {
		enc encoding
		le  bool
	}{{encLegacyBinary, false}, {encLegacyBinary, true}, {encCFFBinary, false}, {encCFFJSON, false}, {encLegacyJSON, false}}
	for _, e := range encodings {
		name := e.enc.String()
		if e.le {
			name += "-le"
		}
		t.Run(name, func(t *testing.T) {
			nonFinite := 0
			defer func() {
				if (e.enc == encLegacyBinary || e.enc == encCFFBinary) && nonFinite == 0 && !t.Failed() {
					t.Errorf("no NaN/±Inf float32 argument generated")
				}
			}()
			for seed := int64(1); seed <= 120; seed++ {
				g := newGenerator(seed*7919, e.enc)
				g.build()
				g.flatten()
				events := g.stream()
				var data []byte
				var tbNS int64
				switch e.enc {
				case encLegacyBinary:
					tb := int64(1367885827385 + g.r.Intn(1e6))
					data, tbNS = g.legacyFile(events, tb, e.le), tb*1e6
				case encCFFBinary, encCFFJSON:
					whole := int64(1508486400123 + g.r.Intn(1000))
					tb := float64(whole) + 0.25
					if e.enc == encCFFBinary {
						data = g.cffFile(events, tb)
					} else {
						data = g.cffJSONFile(events, tb)
					}
					tbNS = whole*1e6 + 250000
				case encLegacyJSON:
					tb := int64(1367885827385 + g.r.Intn(1e6))
					data, tbNS = g.legacyJSONFile(events, tb), tb*1e6
				}
				sum, spans, err := collect(t, "gen.wtf", data, ingest.Options{})
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				for _, sp := range spans { // NaN/±Inf arguments read back exactly from Trace JSON too
					if sp.Root != nil {
						sp.Root.Walk(func(r *trace.Record, _ int) bool {
							for _, a := range r.Attrs {
								if a.Value.Kind == trace.KindFloat && (math.IsNaN(a.Value.Float) || math.IsInf(a.Value.Float, 0)) {
									nonFinite++
								}
							}
							return true
						})
					}
					b, err := sp.MarshalJSON()
					if err != nil {
						t.Fatalf("seed %d: span %s: %v", seed, sp.SpanID, err)
					}
					var back trace.Span
					if err := back.UnmarshalJSON(b); err != nil {
						t.Fatalf("seed %d: %v", seed, err)
					}
					if d := trace.Diff(sp, &back); d != "" {
						t.Fatalf("seed %d: span %s through Trace JSON: %s", seed, sp.SpanID, d)
					}
				}
				want := g.expected(tbNS)
				got := renderSpans(spans)
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("seed %d: spans differ\n got:\n%s\nwant:\n%s", seed, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				records := int64(len(events))
				if e.enc == encLegacyJSON {
					records = int64(len(events)) + int64(len(g.userTypes(func(*gType) bool { return true })))
				}
				if sum.Events != records || sum.Details["encoding"] != e.enc.String() || sum.Details["zones"] != len(g.zones) {
					t.Fatalf("seed %d: events %d encoding %v zones %v, want %d %s %d", seed, sum.Events, sum.Details["encoding"], sum.Details["zones"], records, e.enc, len(g.zones))
				}
				for _, s := range spans {
					if v, _ := s.Attrs.Get("wtf.context.uri"); v.Str != g.uri {
						t.Fatalf("seed %d: context uri %v", seed, v)
					}
					if v, _ := s.Attrs.Get("wtf.context.userAgent.platform"); v.Str != "linux" {
						t.Fatalf("seed %d: user agent platform %v", seed, v)
					}
				}
			}
		})
	}
}
