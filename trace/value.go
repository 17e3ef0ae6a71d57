package trace

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// Kind is the type of an attribute value.
type Kind uint8

const (
	KindNull Kind = iota
	KindString
	KindInt
	KindFloat
	KindBool
	KindList
	KindMap
)

func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindString:
		return "string"
	case KindInt:
		return "int"
	case KindFloat:
		return "float"
	case KindBool:
		return "bool"
	case KindList:
		return "list"
	case KindMap:
		return "map"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Value is an attribute value: string, int64, float64, bool, null, or a
// nested list or map of values. The zero Value is null.
type Value struct {
	Kind  Kind
	Str   string
	Int   int64
	Float float64
	Bool  bool
	List  []Value
	Map   Attrs
}

// Constructors.
func String(s string) Value  { return Value{Kind: KindString, Str: s} }
func Int(i int64) Value      { return Value{Kind: KindInt, Int: i} }
func Float(f float64) Value  { return Value{Kind: KindFloat, Float: f} }
func Bool(b bool) Value      { return Value{Kind: KindBool, Bool: b} }
func Null() Value            { return Value{} }
func List(vs ...Value) Value { return Value{Kind: KindList, List: vs} }
func MapValue(a Attrs) Value { a.Sort(); return Value{Kind: KindMap, Map: a} }

// Non-finite floats have one spelling in every text ztsd writes (Trace JSON,
// the exports, the indexes' attribute text): the names the protobuf JSON
// mapping uses. Trace JSON wraps them as {"$float":"NaN"} so that a string
// attribute "NaN" stays a string (docs/format/trace-json.md).
const (
	FloatNaN    = "NaN"
	FloatInf    = "Infinity"
	FloatNegInf = "-Infinity"
)

// NonFiniteName returns the spelling of f when it is NaN or ±Inf.
func NonFiniteName(f float64) (string, bool) {
	switch {
	case math.IsNaN(f):
		return FloatNaN, true
	case math.IsInf(f, 1):
		return FloatInf, true
	case math.IsInf(f, -1):
		return FloatNegInf, true
	}
	return "", false
}

// ParseNonFinite is the inverse of NonFiniteName.
func ParseNonFinite(s string) (float64, bool) {
	switch s {
	case FloatNaN:
		return math.NaN(), true
	case FloatInf:
		return math.Inf(1), true
	case FloatNegInf:
		return math.Inf(-1), true
	}
	return 0, false
}

// Text renders a scalar value the way the indexes see it: attribute search
// `k:v` matches when v equals this text. Lists and maps render as "".
// Non-finite floats are "NaN", "Infinity" and "-Infinity".
func (v Value) Text() string {
	switch v.Kind {
	case KindString:
		return v.Str
	case KindInt:
		return strconv.FormatInt(v.Int, 10)
	case KindFloat:
		if name, ok := NonFiniteName(v.Float); ok {
			return name
		}
		return strconv.FormatFloat(v.Float, 'g', -1, 64)
	case KindBool:
		return strconv.FormatBool(v.Bool)
	case KindNull:
		return "null"
	}
	return ""
}

// Equal reports deep equality (NaN equals NaN, so round trips compare
// equal). It is Diff's walk (equal.go) finding no difference.
func (v Value) Equal(o Value) bool { return diffValue(v, o) == nil }

// scalarEqual reports whether two values of one scalar kind are equal; it
// is false for lists, maps and unknown kinds, which diffValue walks.
func scalarEqual(v, o *Value) bool {
	switch v.Kind {
	case KindNull:
		return true
	case KindString:
		return v.Str == o.Str
	case KindInt:
		return v.Int == o.Int
	case KindFloat:
		return v.Float == o.Float || (math.IsNaN(v.Float) && math.IsNaN(o.Float))
	case KindBool:
		return v.Bool == o.Bool
	}
	return false
}

// Attr is one key/value pair.
type Attr struct {
	Key   string
	Value Value
}

// Attrs is a set of attributes kept sorted by key with unique keys.
type Attrs []Attr

// Set adds or replaces key, keeping the slice sorted.
func (a *Attrs) Set(key string, v Value) {
	s := *a
	i := sort.Search(len(s), func(i int) bool { return s[i].Key >= key })
	if i < len(s) && s[i].Key == key {
		s[i].Value = v
		return
	}
	s = append(s, Attr{})
	copy(s[i+1:], s[i:])
	s[i] = Attr{Key: key, Value: v}
	*a = s
}

// Get returns the value of key.
func (a Attrs) Get(key string) (Value, bool) {
	i := sort.Search(len(a), func(i int) bool { return a[i].Key >= key })
	if i < len(a) && a[i].Key == key {
		return a[i].Value, true
	}
	return Value{}, false
}

// Sort sorts by key; for duplicate keys the last one wins.
func (a *Attrs) Sort() {
	s := *a
	if firstUnsorted(s) < 0 {
		return
	}
	sort.SliceStable(s, func(i, j int) bool { return s[i].Key < s[j].Key })
	out := s[:0]
	for i := range s {
		if len(out) > 0 && out[len(out)-1].Key == s[i].Key {
			out[len(out)-1] = s[i]
			continue
		}
		out = append(out, s[i])
	}
	*a = out
}

// Equal reports whether both hold the same pairs in the same order.
func (a Attrs) Equal(o Attrs) bool { return diffAttrs(a, o) == nil }

func (a Attrs) validate() error {
	for i := range a {
		if i > 0 && keyOutOfOrder(a[i-1].Key, a[i].Key) {
			return fmt.Errorf(msgAttrsUnsorted, a[i].Key)
		}
		if err := a[i].Value.validate(1); err != nil {
			return fmt.Errorf("attribute %q: %w", a[i].Key, err)
		}
	}
	return nil
}

func (v Value) validate(depth int) error {
	if valueTooDeep(depth) {
		return fmt.Errorf(msgValueTooDeep, MaxValueDepth)
	}
	switch v.Kind {
	case KindList:
		for _, e := range v.List {
			if err := e.validate(depth + 1); err != nil {
				return err
			}
		}
	case KindMap:
		for i, e := range v.Map {
			if i > 0 && keyOutOfOrder(v.Map[i-1].Key, e.Key) {
				return fmt.Errorf(msgMapKeysUnsorted, e.Key)
			}
			if err := e.Value.validate(depth + 1); err != nil {
				return err
			}
		}
	case KindNull, KindString, KindInt, KindFloat, KindBool:
	default:
		return fmt.Errorf(msgUnknownKind, v.Kind)
	}
	return nil
}
