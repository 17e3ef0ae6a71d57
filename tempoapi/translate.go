package tempoapi

import (
	"fmt"
	"regexp"

	"github.com/ztsd/ztsd/queryapi"
	"github.com/ztsd/ztsd/trace"
	"github.com/ztsd/ztsd/traceql"
)

// MaxAlternatives bounds the || alternatives of a query (after && is
// distributed over ||): each is one index search.
const MaxAlternatives = 16

// Translate turns a TraceQL query into conjuncts for queryapi.FindTraces;
// it also returns the attribute keys the query names (search results show
// them).
func Translate(q string) ([]queryapi.Conjunct, []string, error) {
	e, err := traceql.Parse(q)
	if err != nil {
		return nil, nil, err
	}
	terms, err := traceql.DNF(e, MaxAlternatives)
	if err != nil {
		return nil, nil, err
	}
	var keys []string
	seenKey := map[string]bool{}
	var out []queryapi.Conjunct
	for _, term := range terms {
		c, err := conjunct(term)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, c)
		for _, cond := range term {
			if cond.Field.Scope != traceql.Intrinsic && !seenKey[cond.Field.Name] {
				seenKey[cond.Field.Name] = true
				keys = append(keys, cond.Field.Name)
			}
		}
	}
	return out, keys, nil
}

func isServiceField(f traceql.Field) bool {
	return f.Name == queryapi.AttrServiceName && (f.Scope == traceql.ResourceAttr || f.Scope == traceql.AnyAttr)
}

// conjunct maps one AND of conditions: index terms where the index can
// answer exactly, checks for the rest.
func conjunct(conds []*traceql.Cond) (queryapi.Conjunct, error) {
	var c queryapi.Conjunct
	var checks []func(*trace.Span) bool
	for _, cond := range conds {
		f, v := cond.Field, cond.Value
		if cond.Op == "=" {
			switch {
			case f.Scope == traceql.Intrinsic && f.Name == "name" && c.Operation == "":
				c.Operation = v.Str
				continue
			case f.Scope == traceql.Intrinsic && f.Name == "status" && v.Str == "error":
				c.ErrorsOnly = true
				continue
			case f.Scope == traceql.Intrinsic && f.Name == "kind" && v.Str != "unspecified":
				c.Attrs = append(c.Attrs, trace.Attr{Key: "otel.span.kind", Value: trace.String(v.Str)})
				continue
			case isServiceField(f) && v.Kind == traceql.String && c.Service == "":
				c.Service = v.Str
				continue
			case f.Scope != traceql.Intrinsic && !isServiceField(f) && v.Kind != traceql.Duration:
				c.Attrs = append(c.Attrs, trace.Attr{Key: f.Name, Value: trace.String(v.Text())})
				continue
			}
		}
		if f.Scope == traceql.Intrinsic && f.Name == "duration" && (cond.Op == ">" || cond.Op == ">=") {
			min := v.Int
			if cond.Op == ">" {
				min++
			}
			c.MinDurationNS = max(c.MinDurationNS, min)
			continue
		}
		if f.Scope == traceql.Intrinsic && f.Name == "duration" && (cond.Op == "<" && v.Int > 1 || cond.Op == "<=" && v.Int > 0) {
			most := v.Int
			if cond.Op == "<" {
				most--
			}
			if c.MaxDurationNS == 0 || most < c.MaxDurationNS {
				c.MaxDurationNS = most
			}
			continue
		}
		chk, err := checkOf(cond)
		if err != nil {
			return c, err
		}
		checks = append(checks, chk)
	}
	if len(checks) > 0 {
		c.Check = func(sp *trace.Span) bool {
			for _, chk := range checks {
				if !chk(sp) {
					return false
				}
			}
			return true
		}
	}
	return c, nil
}

// statusOf is a span's TraceQL status: error, ok or unset.
func statusOf(sp *trace.Span) string {
	if sp.Error {
		return "error"
	}
	if sp.Source == trace.SourceOTLP {
		if v, ok := sp.Attrs.Get("otel.status.code"); ok && v.Text() == "ok" {
			return "ok"
		}
	}
	return "unset"
}

func kindOf(sp *trace.Span) string {
	if sp.Source == trace.SourceOTLP {
		if k, ok := queryapi.ParseKind(sp.Type); ok && k != queryapi.KindUnspecified {
			return k.String()
		}
	}
	return "unspecified"
}

// checkOf builds the predicate of one condition, evaluated on a span head.
// A missing attribute fails every comparison, as in TraceQL.
func checkOf(cond *traceql.Cond) (func(*trace.Span) bool, error) {
	f, v, op := cond.Field, cond.Value, cond.Op
	var re *regexp.Regexp
	if op == "=~" || op == "!~" {
		var err error
		if re, err = regexp.Compile("^(?:" + v.Str + ")$"); err != nil {
			return nil, &traceql.Error{Offset: cond.Offset, Msg: fmt.Sprintf("bad regular expression %q: %v", v.Str, err)}
		}
	}
	matchText := func(s string) bool {
		switch op {
		case "=":
			return s == v.Text()
		case "!=":
			return s != v.Text()
		case "=~":
			return re.MatchString(s)
		case "!~":
			return !re.MatchString(s)
		}
		return false
	}
	cmpNum := func(x float64) bool {
		var y float64
		switch v.Kind {
		case traceql.Int, traceql.Duration:
			y = float64(v.Int)
		case traceql.Float:
			y = v.Float
		default:
			return false
		}
		switch op {
		case "=":
			return x == y
		case "!=":
			return x != y
		case ">":
			return x > y
		case ">=":
			return x >= y
		case "<":
			return x < y
		case "<=":
			return x <= y
		}
		return false
	}
	if f.Scope == traceql.Intrinsic {
		switch f.Name {
		case "name":
			return func(sp *trace.Span) bool { return matchText(queryapi.OperationOf(sp)) }, nil
		case "status":
			return func(sp *trace.Span) bool { return matchText(statusOf(sp)) }, nil
		case "kind":
			return func(sp *trace.Span) bool { return matchText(kindOf(sp)) }, nil
		case "duration":
			return func(sp *trace.Span) bool { return cmpNum(float64(sp.DurationNS)) }, nil
		}
		return nil, &traceql.Error{Offset: cond.Offset, Msg: fmt.Sprintf("intrinsic %s is not supported", f.Name)}
	}
	key := f.Name
	service := isServiceField(f)
	return func(sp *trace.Span) bool {
		if service {
			return matchText(queryapi.ServiceOf(sp))
		}
		a, ok := sp.Attrs.Get(key)
		if !ok {
			return false
		}
		switch a.Kind {
		case trace.KindInt:
			if v.Kind == traceql.Int || v.Kind == traceql.Float || v.Kind == traceql.Duration {
				return cmpNum(float64(a.Int))
			}
		case trace.KindFloat:
			if v.Kind == traceql.Int || v.Kind == traceql.Float {
				return cmpNum(a.Float)
			}
		case trace.KindList, trace.KindMap:
			return false
		}
		if op == ">" || op == ">=" || op == "<" || op == "<=" {
			return false
		}
		return matchText(a.Text())
	}, nil
}
