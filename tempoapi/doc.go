// Package tempoapi serves the HTTP API of Grafana Tempo that Grafana's
// built-in Tempo data source calls, over a storedir.DB: trace by id
// (/api/traces/{id}, /api/v2/traces/{id}; OTLP protobuf for
// Accept: application/protobuf, else JSON), TraceQL search (/api/search,
// the subset package traceql parses), tag names and values
// (/api/search/tags, /api/v2/search/tags, /api/search/tag/{tag}/values,
// /api/v2/search/tag/{tag}/values), /api/echo and /api/status/buildinfo.
//
// The protobuf bodies are written by hand in Tempo's wire layout
// (protowire, see queryapi.ProtoWriter): tempopb.Trace is field 1,
// repeated ResourceSpans (the layout of OTLP TracesData), and
// TraceByIDResponse holds the Trace as its field 1. Tempo's module is not
// imported.
//
// Invariants: a TraceQL query is translated into queryapi.Conjuncts (one
// per || alternative): equality on attributes, service, name, status =
// error, kind and duration bounds are index terms, so a query of those
// costs what /v1/search costs for the same filter (the trace heads come
// from the same index walk); every other comparison is checked on the
// spans the index returns, over a bounded number of pages
// (queryapi.MaxFilterPages). Anything outside the subset is a 400 naming
// the unsupported part; as a tag-value listing's q it is ignored (a q of
// the subset scopes the values). A trace is written one span at a time.
package tempoapi
