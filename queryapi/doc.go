// Package queryapi owns what the foreign query APIs (jaegerapi, tempoapi)
// share: the view of a stored ztsd span as OTLP-shaped spans, the mapping of
// every source onto "service" and "operation", the translation of their
// searches into storedir.Query, and the trace → OTLP encoders (protobuf wire
// and OTLP JSON) that stream one span at a time.
//
// # View of a stored span
//
// Expand turns one trace.Span into one or more View spans:
//
//   - the span itself, named after its root record's method (the OTLP span
//     name), with its attributes split into resource (service.name, and for
//     OTLP spans the semantic-convention resource namespaces host.*, os.*,
//     process.*, …), scope (otel.scope.*) and span attributes; the
//     otel.* attributes the OTLP importer writes become the fields they came
//     from (kind, status, trace state, links); source.format is dropped for
//     OTLP spans (it is implied) and kept for the other sources;
//   - each method-call record that has a duration or children becomes a
//     child span (Record true), so call trees show on the timeline of
//     Grafana and Jaeger UI; its id is derived from the span id and the
//     record's depth-first ordinal (splitmix64, never 0), the same on every
//     read;
//   - each zero-length leaf record becomes an event (a Jaeger log) of the
//     span or record-span that holds it: OTLP span events come back as
//     events, WTF instance events, dial9 wakes and Zorka marks as logs at
//     their time. A record's exception becomes an "exception" event with
//     exception.type, exception.message and exception.stacktrace.
//
// # Services and operations
//
// ServiceOf: service.name when the span has it; a Zorka span without it
// is "zorka <component>" (the Zorka component attribute: "http", "db", …);
// any other span without it is "<format> <source.file>" (as GET
// /v1/services names an imported file: "wtf blk-client.wtf-trace"), or
// its format alone ("zorka" for a live agent span without a component,
// "json"). A format name alone as a service matches every span of that
// format. The operation is the root record's method (the OTLP span name).
//
// Invariants: every search these APIs run is one or more storedir.Search
// calls with the filters translated into index terms (attributes, exact
// texts, duration, error flag, time range); what the index cannot express
// (maximum duration, numeric comparisons, regular expressions) is checked on
// the spans those searches return, over a bounded number of pages
// (MaxFilterPages), and the docs say so.
package queryapi
