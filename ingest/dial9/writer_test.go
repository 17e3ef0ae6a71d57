package dial9

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// testWriter encodes dial9 frames the way the upstream encoder does
// (including its timestamp reset rule), for tests only.
type testWriter struct {
	buf    bytes.Buffer
	tsBase uint64
}

func (w *testWriter) u8(b byte)        { w.buf.WriteByte(b) }
func (w *testWriter) u16(v uint16)     { w.buf.Write(binary.LittleEndian.AppendUint16(nil, v)) }
func (w *testWriter) u32(v uint32)     { w.buf.Write(binary.LittleEndian.AppendUint32(nil, v)) }
func (w *testWriter) u64(v uint64)     { w.buf.Write(binary.LittleEndian.AppendUint64(nil, v)) }
func (w *testWriter) uvarint(v uint64) { w.buf.Write(binary.AppendUvarint(nil, v)) }
func (w *testWriter) str16(s string)   { w.u16(uint16(len(s))); w.buf.WriteString(s) }
func (w *testWriter) str32(s []byte)   { w.u32(uint32(len(s))); w.buf.Write(s) }

// header starts a stream (at the start of the file or mid-file).
func (w *testWriter) header(version byte) {
	w.buf.WriteString(Magic)
	w.u8(version)
	w.tsBase = 0
}

func (w *testWriter) schema(s *Schema) {
	w.u8(TagSchema)
	w.u16(s.TypeID)
	w.str16(s.Name)
	if s.HasTimestamp {
		w.u8(1)
	} else {
		w.u8(0)
	}
	w.u16(uint16(len(s.Fields)))
	for _, f := range s.Fields {
		w.str16(f.Name)
		w.u8(byte(f.Type))
	}
}

func (w *testWriter) reset(ts uint64) {
	w.u8(TagTimestampReset)
	w.u64(ts)
	w.tsBase = ts
}

func (w *testWriter) stringPool(ids []uint32, strs []string) {
	w.u8(TagStringPool)
	w.u32(uint32(len(ids)))
	for i, id := range ids {
		w.u32(id)
		w.str32([]byte(strs[i]))
	}
}

func (w *testWriter) stackPool(ids []uint32, stacks [][]uint64) {
	w.u8(TagStackPool)
	w.u32(uint32(len(ids)))
	for i, id := range ids {
		w.u32(id)
		w.u32(uint32(len(stacks[i])))
		for _, a := range stacks[i] {
			w.u64(a)
		}
	}
}

func (w *testWriter) annotations(typeID uint64, anns []Annotation) {
	w.u8(TagSchemaAnnotations)
	w.uvarint(typeID)
	w.u16(uint16(len(anns)))
	for _, a := range anns {
		w.u16(a.FieldIndex)
		w.str16(a.Key)
		w.str32([]byte(a.Value))
	}
}

// event writes an event of s stamped ts (ignored without timestamp),
// emitting a reset first when the delta does not fit, as upstream does.
func (w *testWriter) event(s *Schema, ts uint64, vals []Value) {
	if s.HasTimestamp && (ts < w.tsBase || ts-w.tsBase > MaxTimestampDelta) {
		w.reset(ts)
	}
	w.u8(TagEvent)
	w.u16(s.TypeID)
	if s.HasTimestamp {
		d := ts - w.tsBase
		w.buf.Write([]byte{byte(d), byte(d >> 8), byte(d >> 16)})
		w.tsBase = ts
	}
	for i, f := range s.Fields {
		if f.Type.IsOptional() {
			if vals[i].Absent {
				w.u8(0)
				continue
			}
			w.u8(1)
		}
		w.value(f.Type.Base(), &vals[i])
	}
}

func (w *testWriter) value(t FieldType, v *Value) {
	switch t {
	case TypeI64:
		w.u64(uint64(v.Int))
	case TypeF64:
		w.u64(math.Float64bits(v.Float))
	case TypeBool:
		if v.Bool {
			w.u8(1)
		} else {
			w.u8(0)
		}
	case TypeString:
		w.str32([]byte(v.Str))
	case TypeBytes:
		w.str32(v.Bytes)
	case TypePooledString, TypePooledStackFrames:
		w.u32(uint32(v.Uint))
	case TypeStackFrames:
		w.u32(uint32(len(v.Frames)))
		for _, a := range v.Frames {
			w.u64(a)
		}
	case TypeVarint:
		w.uvarint(v.Uint)
	case TypeU8:
		w.u8(byte(v.Uint))
	case TypeU16:
		w.u16(uint16(v.Uint))
	case TypeU32:
		w.u32(uint32(v.Uint))
	case TypeStringMap:
		w.u32(uint32(len(v.Pairs)))
		for _, p := range v.Pairs {
			w.str32([]byte(p.Key))
			w.str32([]byte(p.Value))
		}
	case TypeDynamicList:
		w.u32(uint32(len(v.List)))
		for i := range v.List {
			w.u8(byte(v.List[i].Type))
			w.value(v.List[i].Type, &v.List[i])
		}
	case TypeDynamicMap:
		w.u32(uint32(len(v.Map)))
		for i := range v.Map {
			w.u8(byte(v.Map[i].Key.Type))
			w.value(v.Map[i].Key.Type, &v.Map[i].Key)
			w.u8(byte(v.Map[i].Value.Type))
			w.value(v.Map[i].Value.Type, &v.Map[i].Value)
		}
	default:
		panic(fmt.Sprintf("testWriter: type %v", t))
	}
}

// wantEvent is what the decoder must return for one written event.
type wantEvent struct {
	stream int
	name   string
	ts     uint64
	hasTS  bool
	values []Value
}

// genStream holds the pools of the stream being generated.
type genStream struct {
	strings map[uint32]string
	stacks  map[uint32][]uint64
}

// randomFile generates a file of several streams using every frame kind,
// every field type, optional fields, both pools, resets (forward jumps and
// time going backwards), annotations, idempotent schema re-registration
// and type ids re-used with other layouts in later streams. It returns
// the bytes and the events a decoder must return.
func randomFile(rng *rand.Rand) ([]byte, []wantEvent) {
	w := &testWriter{}
	var want []wantEvent
	nStreams := 1 + rng.IntN(4)
	ts := rng.Uint64N(1 << 50)
	for stream := 0; stream < nStreams; stream++ {
		w.header(Version)
		gs := &genStream{strings: map[uint32]string{}, stacks: map[uint32][]uint64{}}
		var schemas []*Schema
		nSchemas := 1 + rng.IntN(5)
		used := map[uint16]bool{}
		for i := 0; i < nSchemas; i++ {
			s := randomSchema(rng, used, i)
			schemas = append(schemas, s)
			w.schema(s)
			if rng.IntN(4) == 0 {
				anns := []Annotation{{FieldIndex: 0, Key: "metrique.unit", Value: "ns"}}
				w.annotations(uint64(s.TypeID), anns)
				s.Annotations = append(s.Annotations, anns...)
			}
		}
		if rng.IntN(3) == 0 {
			w.annotations(uint64(60000+rng.IntN(1000)), []Annotation{{Key: "dial9.display", Value: "x"}}) // unknown type id: ignored
		}
		nEvents := rng.IntN(40)
		for i := 0; i < nEvents; i++ {
			s := schemas[rng.IntN(len(schemas))]
			if rng.IntN(20) == 0 {
				w.schema(s) // identical re-registration is accepted
			}
			switch rng.IntN(10) {
			case 0:
				ts += 1 << 25 // beyond the u24 delta: reset
			case 1:
				ts -= min(ts, rng.Uint64N(1<<20)) // backwards: reset
			default:
				ts += rng.Uint64N(1 << 16)
			}
			if rng.IntN(8) == 0 { // redefine a pooled string: last write wins
				id := rng.Uint32N(6)
				str := randomString(rng)
				gs.strings[id] = str
				w.stringPool([]uint32{id}, []string{str})
			}
			vals := make([]Value, len(s.Fields))
			for j, f := range s.Fields {
				if f.Type.IsOptional() && rng.IntN(3) == 0 {
					vals[j] = Value{Type: f.Type.Base(), Absent: true}
					continue
				}
				vals[j] = randomValue(rng, w, gs, f.Type.Base(), 0)
			}
			if rng.IntN(15) == 0 {
				w.reset(ts) // a redundant reset changes nothing
			}
			w.event(s, ts, vals)
			ev := wantEvent{stream: stream, name: s.Name, hasTS: s.HasTimestamp, values: vals}
			if s.HasTimestamp {
				ev.ts = ts
			}
			want = append(want, ev)
		}
	}
	return w.buf.Bytes(), want
}

var allTypes = []FieldType{TypeI64, TypeF64, TypeBool, TypeString, TypeBytes, TypePooledStackFrames,
	TypePooledString, TypeStackFrames, TypeVarint, TypeStringMap, TypeU8, TypeU16, TypeU32,
	TypeDynamicList, TypeDynamicMap}

func randomSchema(rng *rand.Rand, used map[uint16]bool, i int) *Schema {
	id := uint16(rng.IntN(8))
	for used[id] {
		id = uint16(rng.IntN(1 << 16))
	}
	used[id] = true
	s := &Schema{TypeID: id, Name: fmt.Sprintf("Event%d_%d", i, rng.IntN(1000)), HasTimestamp: rng.IntN(8) != 0}
	n := rng.IntN(9)
	for j := 0; j < n; j++ {
		t := allTypes[rng.IntN(len(allTypes))]
		if rng.IntN(3) == 0 {
			t |= Optional
		}
		s.Fields = append(s.Fields, Field{Name: fmt.Sprintf("f%d", j), Type: t})
	}
	return s
}

func randomString(rng *rand.Rand) string {
	parts := []string{"", "a", "worker", "ünïcødé", "日本", "x y z", "\x00"}
	var b bytes.Buffer
	for k := rng.IntN(4); k > 0; k-- {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	return b.String()
}

func randomStack(rng *rand.Rand) []uint64 {
	st := make([]uint64, rng.IntN(6))
	for i := range st {
		st[i] = rng.Uint64()
	}
	return st
}

// randomValue returns a value of base type t as the decoder will return
// it, writing pool frames for pooled values first, as the encoder does.
func randomValue(rng *rand.Rand, w *testWriter, gs *genStream, t FieldType, depth int) Value {
	v := Value{Type: t}
	switch t {
	case TypeI64:
		v.Int = []int64{0, -1, math.MinInt64, math.MaxInt64, rng.Int64()}[rng.IntN(5)]
	case TypeF64:
		v.Float = []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), rng.Float64() * 1e9}[rng.IntN(6)]
	case TypeBool:
		v.Bool = rng.IntN(2) == 0
	case TypeString:
		v.Str = randomString(rng)
	case TypeBytes:
		v.Bytes = []byte(randomString(rng))
	case TypePooledString:
		id := rng.Uint32N(6)
		if rng.IntN(12) == 0 {
			v.Uint, v.Unresolved = uint64(1000+id), true // never defined
			return v
		}
		s, ok := gs.strings[id]
		if !ok {
			s = randomString(rng)
			gs.strings[id] = s
			w.stringPool([]uint32{id}, []string{s})
		}
		v.Uint, v.Str = uint64(id), s
	case TypePooledStackFrames:
		id := rng.Uint32N(4)
		if rng.IntN(12) == 0 {
			v.Uint, v.Unresolved = uint64(1000+id), true
			return v
		}
		st, ok := gs.stacks[id]
		if !ok {
			st = randomStack(rng)
			gs.stacks[id] = st
			if rng.IntN(2) == 0 {
				w.stackPool([]uint32{id}, [][]uint64{st})
			} else { // a multi-entry frame with an unused entry too
				w.stackPool([]uint32{id, 500 + id}, [][]uint64{st, randomStack(rng)})
			}
		}
		v.Uint, v.Frames = uint64(id), st
	case TypeStackFrames:
		v.Frames = randomStack(rng)
	case TypeVarint:
		v.Uint = []uint64{0, 127, 128, 16383, 16384, math.MaxUint64, rng.Uint64()}[rng.IntN(7)]
	case TypeU8:
		v.Uint = rng.Uint64N(1 << 8)
	case TypeU16:
		v.Uint = rng.Uint64N(1 << 16)
	case TypeU32:
		v.Uint = rng.Uint64N(1 << 32)
	case TypeStringMap:
		for k := rng.IntN(4); k > 0; k-- {
			v.Pairs = append(v.Pairs, StringPair{Key: randomString(rng), Value: randomString(rng)})
		}
	case TypeDynamicList, TypeDynamicMap:
		n := rng.IntN(4)
		if depth >= 2 {
			n = 0
		}
		elem := func() Value {
			// Pooled values inside containers would need their pool frame
			// written before the event: keep elements self-contained.
			et := allTypes[rng.IntN(len(allTypes))]
			for et == TypePooledString || et == TypePooledStackFrames {
				et = allTypes[rng.IntN(len(allTypes))]
			}
			return randomValue(rng, w, gs, et, depth+1)
		}
		if t == TypeDynamicList {
			v.List = make([]Value, 0, n)
			for ; n > 0; n-- {
				v.List = append(v.List, elem())
			}
		} else {
			v.Map = make([]ValuePair, 0, n)
			for ; n > 0; n-- {
				v.Map = append(v.Map, ValuePair{Key: elem(), Value: elem()})
			}
		}
	}
	return v
}

// valueEqual compares decoded values (NaN equals NaN; nil equals empty).
func valueEqual(a, b *Value) bool {
	if a.Type != b.Type || a.Absent != b.Absent || a.Unresolved != b.Unresolved || a.Int != b.Int ||
		a.Uint != b.Uint || a.Bool != b.Bool || a.Str != b.Str || !bytes.Equal(a.Bytes, b.Bytes) ||
		!slices.Equal(a.Frames, b.Frames) || !slices.Equal(a.Pairs, b.Pairs) ||
		len(a.List) != len(b.List) || len(a.Map) != len(b.Map) {
		return false
	}
	if a.Float != b.Float && !(math.IsNaN(a.Float) && math.IsNaN(b.Float)) {
		return false
	}
	if math.Signbit(a.Float) != math.Signbit(b.Float) {
		return false
	}
	for i := range a.List {
		if !valueEqual(&a.List[i], &b.List[i]) {
			return false
		}
	}
	for i := range a.Map {
		if !valueEqual(&a.Map[i].Key, &b.Map[i].Key) || !valueEqual(&a.Map[i].Value, &b.Map[i].Value) {
			return false
		}
	}
	return true
}
