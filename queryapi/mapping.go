package queryapi

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// ServiceOf names the service of a stored span (see the package doc).
func ServiceOf(sp *trace.Span) string {
	if v, ok := sp.Attrs.Get(AttrServiceName); ok && v.Kind == trace.KindString && v.Str != "" {
		return v.Str
	}
	format := sp.Source
	if format == "" {
		format = trace.SourceJSON
	}
	if format == trace.SourceZorka {
		if v, ok := sp.Attrs.Get(AttrComponent); ok && v.Text() != "" {
			return format + " " + v.Text()
		}
	}
	if v, ok := sp.Attrs.Get(AttrSourceFile); ok && v.Text() != "" {
		return format + " " + v.Text()
	}
	return format
}

var formats = []string{trace.SourceZorka, trace.SourceWTF, trace.SourceATF, trace.SourceDial9, trace.SourceJSON, trace.SourceOTLP}

func isFormat(s string) bool {
	for _, f := range formats {
		if f == s {
			return true
		}
	}
	return false
}

// ServiceTerms returns the alternative attribute conjunctions (OR of ANDs)
// that select the spans of service: always service.name = service; for a
// format name alone, source.format = it; for "<format> <x>", the spans of
// that format whose source.file is x, and for Zorka also those whose
// component is x.
func ServiceTerms(service string) [][]trace.Attr {
	alts := [][]trace.Attr{{{Key: AttrServiceName, Value: trace.String(service)}}}
	format, rest, hasRest := strings.Cut(service, " ")
	switch {
	case !hasRest && isFormat(service):
		alts = append(alts, []trace.Attr{{Key: AttrSourceFormat, Value: trace.String(service)}})
	case hasRest && isFormat(format) && rest != "":
		alts = append(alts, []trace.Attr{{Key: AttrSourceFormat, Value: trace.String(format)},
			{Key: AttrSourceFile, Value: trace.String(rest)}})
		if format == trace.SourceZorka {
			alts = append(alts, []trace.Attr{{Key: AttrSourceFormat, Value: trace.String(format)},
				{Key: AttrComponent, Value: trace.String(rest)}})
		}
	}
	return alts
}

// MaxServiceValues bounds the attribute values each services listing reads
// per key (service.name, component, source.file).
const MaxServiceValues = 10000

// MaxMappedServices bounds the Zorka components and source files that a
// services listing checks (one search of limit 1 each).
const MaxMappedServices = 1000

// Services lists every service name (see ServiceOf), sorted: the
// service.name values; "<format> <file>" for each imported source file
// whose spans have no service.name (as GET /v1/services names them);
// "zorka <component>" for the Zorka components; and each source format
// but OTLP (whose spans all name their service) as a service of its own
// that matches all its spans.
func Services(ctx context.Context, db *storedir.DB) ([]string, error) {
	set := map[string]bool{}
	names, err := db.AttributeValues(ctx, AttrServiceName, MaxServiceValues)
	if err != nil {
		return nil, fmt.Errorf("services: %w", err)
	}
	for _, n := range names {
		set[n] = true
	}
	fmts, err := db.AttributeValues(ctx, AttrSourceFormat, 100)
	if err != nil {
		return nil, fmt.Errorf("services: %w", err)
	}
	hasFiles := false
	for _, f := range fmts {
		if f != trace.SourceOTLP {
			set[f] = true
			hasFiles = true
		}
		if f != trace.SourceZorka {
			continue
		}
		comps, err := db.AttributeValues(ctx, AttrComponent, MaxMappedServices)
		if err != nil {
			return nil, fmt.Errorf("services: %w", err)
		}
		for _, c := range comps {
			res, err := db.Search(ctx, storedir.Query{Attrs: []trace.Attr{{Key: AttrSourceFormat, Value: trace.String(f)},
				{Key: AttrComponent, Value: trace.String(c)}}, Spans: true, Limit: 1})
			if err != nil {
				return nil, fmt.Errorf("services: component %q: %w", c, err)
			}
			if len(res.Spans) == 1 {
				set[ServiceOf(res.Spans[0])] = true
			}
		}
	}
	if hasFiles {
		files, err := db.AttributeValues(ctx, AttrSourceFile, MaxMappedServices)
		if err != nil {
			return nil, fmt.Errorf("services: %w", err)
		}
		for _, file := range files {
			res, err := db.Search(ctx, storedir.Query{Attrs: []trace.Attr{{Key: AttrSourceFile, Value: trace.String(file)}},
				Spans: true, Limit: 1})
			if err != nil {
				return nil, fmt.Errorf("services: source file %q: %w", file, err)
			}
			if len(res.Spans) == 1 {
				set[ServiceOf(res.Spans[0])] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out, nil
}

// Operation is an operation name and the span kind it was seen with.
type Operation struct {
	Name string
	Kind Kind
}

// MaxOperationSpans bounds the newest spans of a service that an
// operations listing reads (the operation is a span's root method, which
// no index lists).
const MaxOperationSpans = 5000

// Operations lists the distinct (name, kind) of the newest
// MaxOperationSpans spans of service, sorted by name then kind; kind, when
// not "", keeps only that kind.
func Operations(ctx context.Context, db *storedir.DB, service, kind string) ([]Operation, error) {
	set := map[Operation]bool{}
	for _, alt := range ServiceTerms(service) {
		q := storedir.Query{Attrs: alt, Spans: true, Limit: 1000}
		read := 0
		for read < MaxOperationSpans {
			res, err := db.Search(ctx, q)
			if err != nil {
				return nil, fmt.Errorf("operations of %q: %w", service, err)
			}
			for _, sp := range res.Spans {
				if ServiceOf(sp) != service && !isFormat(service) {
					continue
				}
				op := Operation{Name: OperationOf(sp)}
				if sp.Source == trace.SourceOTLP {
					op.Kind, _ = ParseKind(sp.Type)
				}
				if kind != "" && op.Kind.String() != kind {
					continue
				}
				set[op] = true
			}
			read += len(res.Spans)
			if res.Cursor == "" {
				break
			}
			q.Cursor = res.Cursor
		}
	}
	out := make([]Operation, 0, len(set))
	for op := range set {
		out = append(out, op)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Kind < out[j].Kind
	})
	return out, nil
}
