// Package traceql parses the subset of TraceQL (Grafana Tempo's query
// language) that Grafana's Tempo query builder writes, for ztsd's Tempo
// search API:
//
//	{ }                                   every span
//	{ resource.service.name = "checkout" && span.http.status_code = 500 }
//	{ duration > 5ms && status = error || name =~ "GET.*" }
//
// A query is one spanset filter in braces holding comparisons joined by
// && and || (&& binds tighter; parentheses group). A comparison is a field,
// an operator (= != =~ !~ > >= < <=) and a literal. Fields: the intrinsics
// name, status, duration, kind (also spelled span:name, span:status,
// span:duration, span:kind), and attributes span.<key>, resource.<key> or
// .<key> (a key may be quoted: span."my key"). Literals: "strings" (Go
// escapes), integers, floats, durations (5ms, 1.5s, 100us, 10ns, 2m, 1h),
// true, false, the status values error, ok, unset and the kinds
// unspecified, internal, server, client, producer, consumer.
//
// Anything else — pipelines (|), aggregates, structural operators (>>, ~),
// spanset operators between braces, arithmetic, nil, other intrinsics —
// is rejected with an *Error naming the unsupported part and its offset.
// Parsing is linear in the input and bounded: at most MaxLength bytes and
// MaxDepth nested parentheses.
package traceql

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of a query.
const (
	MaxLength = 16 << 10
	MaxDepth  = 32
)

// Error is a query the subset does not accept.
type Error struct {
	Offset int
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("traceql: at offset %d: %s", e.Offset, e.Msg) }

// Expr is a parsed filter expression: *Binary or *Cond.
type Expr interface{ expr() }

// Binary is L && R or L || R.
type Binary struct {
	Op   string // "&&" or "||"
	L, R Expr
}

// Scope says where a field's value lives.
type Scope int

// Field scopes.
const (
	Intrinsic    Scope = iota // name, status, duration, kind
	SpanAttr                  // span.<key>
	ResourceAttr              // resource.<key>
	AnyAttr                   // .<key>
)

// Field is what a comparison reads.
type Field struct {
	Scope Scope
	Name  string // intrinsic name or attribute key
}

func (f Field) String() string {
	switch f.Scope {
	case SpanAttr:
		return "span." + f.Name
	case ResourceAttr:
		return "resource." + f.Name
	case AnyAttr:
		return "." + f.Name
	}
	return f.Name
}

// ValueKind is a literal's type.
type ValueKind int

// Literal types.
const (
	String ValueKind = iota
	Int
	Float
	Duration
	Bool
	Status // error, ok, unset
	Kind   // unspecified, internal, server, client, producer, consumer
)

// Value is a literal.
type Value struct {
	Kind  ValueKind
	Str   string // String; Status and Kind: the enum name
	Int   int64  // Int; Duration in nanoseconds
	Float float64
	Bool  bool
}

// Text renders the literal the way ztsd's indexes render attribute values.
func (v Value) Text() string {
	switch v.Kind {
	case Int, Duration:
		return strconv.FormatInt(v.Int, 10)
	case Float:
		return strconv.FormatFloat(v.Float, 'g', -1, 64)
	case Bool:
		return strconv.FormatBool(v.Bool)
	}
	return v.Str
}

// Cond is one comparison.
type Cond struct {
	Field Field
	Op    string // = != =~ !~ > >= < <=
	Value Value
	// Offset of the comparison in the query.
	Offset int
}

func (*Binary) expr() {}
func (*Cond) expr()   {}

// Parse parses q; a query with no condition ("{}" or "{ }") yields nil.
func Parse(q string) (Expr, error) {
	if len(q) > MaxLength {
		return nil, &Error{0, fmt.Sprintf("query of %d bytes, more than %d", len(q), MaxLength)}
	}
	p := &parser{s: q}
	p.ws()
	if !p.eat("{") {
		return nil, p.unsupported("a query must be one spanset filter in braces: { … }")
	}
	p.ws()
	var e Expr
	if !p.peek("}") {
		var err error
		if e, err = p.or(0); err != nil {
			return nil, err
		}
	}
	p.ws()
	if !p.eat("}") {
		return nil, p.unsupported("expected } or a condition operator (&&, ||)")
	}
	p.ws()
	if p.i < len(p.s) {
		return nil, p.unsupported(fmt.Sprintf("%q after the spanset filter (pipelines, aggregates and spanset operators are not supported)", clip(p.s[p.i:])))
	}
	return e, nil
}

type parser struct {
	s string
	i int
}

func clip(s string) string {
	if len(s) > 24 {
		return s[:24] + "…"
	}
	return s
}

func (p *parser) unsupported(msg string) error { return &Error{p.i, msg} }

func (p *parser) ws() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *parser) peek(tok string) bool { return strings.HasPrefix(p.s[p.i:], tok) }

func (p *parser) eat(tok string) bool {
	if p.peek(tok) {
		p.i += len(tok)
		return true
	}
	return false
}

func (p *parser) or(depth int) (Expr, error) {
	l, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	for {
		p.ws()
		if !p.eat("||") {
			return l, nil
		}
		r, err := p.and(depth)
		if err != nil {
			return nil, err
		}
		l = &Binary{Op: "||", L: l, R: r}
	}
}

func (p *parser) and(depth int) (Expr, error) {
	l, err := p.unary(depth)
	if err != nil {
		return nil, err
	}
	for {
		p.ws()
		if !p.eat("&&") {
			return l, nil
		}
		r, err := p.unary(depth)
		if err != nil {
			return nil, err
		}
		l = &Binary{Op: "&&", L: l, R: r}
	}
}

func (p *parser) unary(depth int) (Expr, error) {
	p.ws()
	if p.eat("(") {
		if depth >= MaxDepth {
			return nil, p.unsupported(fmt.Sprintf("parentheses nested deeper than %d", MaxDepth))
		}
		e, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		p.ws()
		if !p.eat(")") {
			return nil, p.unsupported("expected )")
		}
		return e, nil
	}
	return p.cond()
}

var intrinsics = map[string]bool{"name": true, "status": true, "duration": true, "kind": true}

func isIdentByte(c byte) bool {
	return c == '_' || c == '-' || c == '.' || c == '/' || c == ':' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// ident reads an attribute key or word: letters, digits, _ - . / :, or a
// quoted string.
func (p *parser) ident(allowDots bool) (string, error) {
	if p.peek(`"`) {
		return p.str()
	}
	start := p.i
	for p.i < len(p.s) && isIdentByte(p.s[p.i]) && (allowDots || p.s[p.i] != '.') {
		p.i++
	}
	if p.i == start {
		return "", p.unsupported(fmt.Sprintf("expected a name, found %q", clip(p.s[p.i:])))
	}
	return p.s[start:p.i], nil
}

func (p *parser) field() (Field, error) {
	start := p.i
	switch {
	case p.eat("span:"):
		w, err := p.ident(false)
		if err != nil {
			return Field{}, err
		}
		if !intrinsics[w] {
			p.i = start
			return Field{}, p.unsupported(fmt.Sprintf("intrinsic span:%s is not supported (name, status, duration, kind are)", w))
		}
		return Field{Intrinsic, w}, nil
	case p.eat("span."):
		k, err := p.ident(true)
		return Field{SpanAttr, k}, err
	case p.eat("resource."):
		k, err := p.ident(true)
		return Field{ResourceAttr, k}, err
	case p.eat("."):
		k, err := p.ident(true)
		return Field{AnyAttr, k}, err
	}
	w, err := p.ident(false)
	if err != nil {
		return Field{}, err
	}
	if intrinsics[w] {
		return Field{Intrinsic, w}, nil
	}
	p.i = start
	return Field{}, p.unsupported(fmt.Sprintf("%q is not a supported field: use name, status, duration, kind, span.<key>, resource.<key> or .<key>", w))
}

var ops = []string{"=~", "!~", "!=", ">=", "<=", "=", ">", "<"}

func (p *parser) cond() (Expr, error) {
	p.ws()
	at := p.i
	f, err := p.field()
	if err != nil {
		return nil, err
	}
	p.ws()
	op := ""
	for _, o := range ops {
		if p.eat(o) {
			op = o
			break
		}
	}
	if op == "" {
		return nil, p.unsupported(fmt.Sprintf("expected a comparison (= != =~ !~ > >= < <=) after %s, found %q", f, clip(p.s[p.i:])))
	}
	p.ws()
	vat := p.i
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	c := &Cond{Field: f, Op: op, Value: v, Offset: at}
	if err := check(c); err != nil {
		return nil, &Error{vat, err.Error()}
	}
	return c, nil
}

// check rejects comparisons that the subset gives no meaning.
func check(c *Cond) error {
	regex := c.Op == "=~" || c.Op == "!~"
	order := c.Op == ">" || c.Op == ">=" || c.Op == "<" || c.Op == "<="
	if regex && c.Value.Kind != String {
		return fmt.Errorf("%s needs a string (a regular expression)", c.Op)
	}
	if order && c.Value.Kind != Int && c.Value.Kind != Float && c.Value.Kind != Duration {
		return fmt.Errorf("%s needs a number or a duration", c.Op)
	}
	if c.Field.Scope != Intrinsic {
		if c.Value.Kind == Status || c.Value.Kind == Kind {
			return fmt.Errorf("%s is compared with %q, an intrinsic value: quote it to compare text", c.Field, c.Value.Str)
		}
		return nil
	}
	switch c.Field.Name {
	case "name":
		if c.Value.Kind != String {
			return fmt.Errorf("name is compared with a string")
		}
	case "status":
		if c.Value.Kind != Status || (c.Op != "=" && c.Op != "!=") {
			return fmt.Errorf("status is compared with = or != and error, ok or unset")
		}
	case "kind":
		if c.Value.Kind != Kind || (c.Op != "=" && c.Op != "!=") {
			return fmt.Errorf("kind is compared with = or != and unspecified, internal, server, client, producer or consumer")
		}
	case "duration":
		if c.Value.Kind != Duration || regex {
			return fmt.Errorf("duration is compared with a duration like 5ms")
		}
	}
	return nil
}

var enumValues = map[string]ValueKind{"error": Status, "ok": Status, "unset": Status,
	"unspecified": Kind, "internal": Kind, "server": Kind, "client": Kind, "producer": Kind, "consumer": Kind}

func (p *parser) value() (Value, error) {
	if p.peek(`"`) || p.peek("`") {
		s, err := p.str()
		return Value{Kind: String, Str: s}, err
	}
	start := p.i
	for p.i < len(p.s) && (isIdentByte(p.s[p.i]) && p.s[p.i] != '/' && p.s[p.i] != ':' || p.s[p.i] == '+') {
		if p.s[p.i] == '-' && p.i > start {
			break
		}
		p.i++
	}
	w := p.s[start:p.i]
	switch w {
	case "":
		return Value{}, p.unsupported(fmt.Sprintf("expected a value, found %q", clip(p.s[p.i:])))
	case "true", "false":
		return Value{Kind: Bool, Bool: w == "true"}, nil
	case "nil":
		p.i = start
		return Value{}, p.unsupported("nil is not supported")
	}
	if k, ok := enumValues[w]; ok {
		return Value{Kind: k, Str: w}, nil
	}
	if n, err := strconv.ParseInt(w, 10, 64); err == nil {
		return Value{Kind: Int, Int: n}, nil
	}
	if c := w[len(w)-1]; c >= 'a' && c <= 'z' || c == 'µ' {
		if d, err := time.ParseDuration(w); err == nil {
			return Value{Kind: Duration, Int: int64(d)}, nil
		}
	}
	if f, err := strconv.ParseFloat(w, 64); err == nil {
		return Value{Kind: Float, Float: f}, nil
	}
	p.i = start
	return Value{}, p.unsupported(fmt.Sprintf("%q is not a supported value (a string, number, duration, true, false, a status or a kind)", w))
}

// str reads a "double-quoted" (Go escapes) or `raw` string.
func (p *parser) str() (string, error) {
	start := p.i
	if p.eat("`") {
		end := strings.IndexByte(p.s[p.i:], '`')
		if end < 0 {
			p.i = start
			return "", p.unsupported("unterminated `string`")
		}
		s := p.s[p.i : p.i+end]
		p.i += end + 1
		return s, nil
	}
	p.i++ // the opening quote
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case '\\':
			p.i += 2
			continue
		case '"':
			p.i++
			s, err := strconv.Unquote(p.s[start:p.i])
			if err != nil {
				p.i = start
				return "", p.unsupported(fmt.Sprintf("bad string %s: %v", clip(p.s[start:]), err))
			}
			if !utf8.ValidString(s) {
				p.i = start
				return "", p.unsupported("string is not valid UTF-8")
			}
			return s, nil
		}
		p.i++
	}
	p.i = start
	return "", p.unsupported("unterminated \"string\"")
}

// DNF returns expr as an OR of ANDs of conditions; more than maxTerms
// terms is an error (the expansion can grow exponentially).
func DNF(e Expr, maxTerms int) ([][]*Cond, error) {
	if e == nil {
		return nil, nil
	}
	switch x := e.(type) {
	case *Cond:
		return [][]*Cond{{x}}, nil
	case *Binary:
		l, err := DNF(x.L, maxTerms)
		if err != nil {
			return nil, err
		}
		r, err := DNF(x.R, maxTerms)
		if err != nil {
			return nil, err
		}
		if x.Op == "||" {
			if len(l)+len(r) > maxTerms {
				return nil, &Error{0, fmt.Sprintf("more than %d alternatives (||)", maxTerms)}
			}
			return append(l, r...), nil
		}
		if len(l)*len(r) > maxTerms {
			return nil, &Error{0, fmt.Sprintf("more than %d alternatives once && is distributed over ||", maxTerms)}
		}
		var out [][]*Cond
		for _, a := range l {
			for _, b := range r {
				t := make([]*Cond, 0, len(a)+len(b))
				out = append(out, append(append(t, a...), b...))
			}
		}
		return out, nil
	}
	return nil, &Error{0, "unknown expression"}
}
