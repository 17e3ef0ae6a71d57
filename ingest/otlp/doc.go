// Package otlp receives OpenTelemetry traces (OTLP) and turns them into
// trace.Span values: OTLP/HTTP (POST /v1/traces with binary protobuf or OTLP
// JSON, optionally gzip-compressed) and OTLP/gRPC (TraceService/Export).
// It owns decoding, the mapping onto the ztsd trace model and the OTLP
// response semantics; storing is the caller's Appender (storedir.DB), and
// routing (which path, which listener) is the caller's too.
//
// # Request handling
//
//   - A request is decoded whole and every span is mapped and validated
//     before anything is appended. A span that cannot be stored (zero or
//     wrong-length trace or span id, wrong-length parent id, non-hex id in
//     OTLP JSON, end before start, a time beyond int64 nanoseconds (2262),
//     attribute values nested deeper than trace.MaxValueDepth, a string
//     beyond Limits.MaxStringLen, more events than Limits.MaxRecords allows,
//     the profiles-only string_value_strindex / key_strindex)
//     is rejected on its own and counted in partial_success.rejected_spans
//     with the reasons in partial_success.error_message; the rest of the
//     request is stored. A body that cannot be decoded at all is rejected
//     whole (HTTP 400, gRPC INVALID_ARGUMENT, naming the byte offset and
//     the field, e.g. resource_spans[0].scope_spans[1].spans[7].name) and
//     stores nothing.
//   - Binary protobuf bodies (OTLP/HTTP application/x-protobuf, and every
//     OTLP/gRPC request of a server built with GRPCServerOptions and
//     Register) are decoded from their wire bytes straight into spans, with
//     protobuf's rules: unknown fields skipped, the last value of a field
//     sent twice, messages sent twice merged, proto3 strings checked for
//     UTF-8, nesting bounded as proto.Unmarshal bounds it (see wire.go).
//   - A request is answered with success only after the Appender returned,
//     which storedir does once the spans are durable under the sync policy.
//   - Every size is bounded before allocation: the HTTP body (compressed and
//     decompressed, each by Options.MaxBodySize: 413 beyond it, so a gzip
//     bomb stops at the bound), the gRPC message (GRPCServerOptions), the
//     spans per request (Options.MaxSpansPerRequest: 413 / RESOURCE_EXHAUSTED),
//     and the requests in flight (Options.MaxInFlight: 429 / RESOURCE_EXHAUSTED
//     with RetryInfo), which bounds the memory held by decoding.
//   - Append errors are mapped by Options.Status; 503 (disk full, shutting
//     down) answers with Retry-After (gRPC: UNAVAILABLE with RetryInfo), as
//     does 429 (gRPC: RESOURCE_EXHAUSTED with RetryInfo).
//   - A gRPC connection is bounded by GRPCConnOptions: its handshake and
//     each request message's receiving by a read timeout, its idle time,
//     its concurrent RPCs (MaxStreamsPerConn) and its ping rate. How many
//     connections are open is the caller's listener's business.
//
// # Mapping onto the trace model
//
// Each OTLP span becomes one trace.Span (Source = trace.SourceOTLP):
//
//   - TraceID = the 16-byte trace id; SpanID and ParentID = the 8-byte ids
//     read big-endian (an empty parent id is 0); StartNS = start time,
//     DurationNS = end − start; Type = the span kind in lower case (server,
//     client, internal, producer, consumer; "" when unspecified); Error =
//     status code ERROR.
//   - Span.Attrs: the span's attributes and the resource's attributes as
//     they are named (service.name, host.name, …; on a key collision the
//     resource's value wins, as it names the producer), then
//     otel.scope.name, otel.scope.version, otel.scope.attributes (a map),
//     otel.span.kind, otel.status.code ("ok" / "error", only when set),
//     otel.status.message (only when set), otel.trace_state, otel.links (a
//     list of maps {trace_id, span_id, trace_state, attributes,
//     dropped_attributes_count}, the last three only when set),
//     otel.resource.schema_url, otel.scope.schema_url,
//     otel.dropped_{attributes,events,links}_count,
//     otel.resource.dropped_attributes_count and
//     otel.scope.dropped_attributes_count (each only when non-empty or
//     non-zero) and source.format = "otlp". These reserved names win over
//     any attribute of the same name.
//   - Attribute values keep their type: string, int, double (trace Float),
//     bool, arrays (trace List) and key-value lists (trace Map, keys sorted,
//     the last of repeated keys wins). Bytes become the standard base64
//     (RFC 4648, padded) string of the bytes. A double that is NaN or ±Inf
//     stays a float (Trace JSON writes it {"$float":"NaN"}; see
//     docs/format/trace-json.md). An empty AnyValue is null.
//   - The root record: Method = span name, StartNS 0, DurationNS = the span's
//     duration, Calls 1, Errors = the number of exception events.
//   - Each span event is a zero-length child record of the root, in the
//     order sent: Method = event name, StartNS = event time − span start (0
//     when the event has no time), the event's attributes as record attrs
//     (plus otel.dropped_attributes_count when non-zero).
//   - An event named "exception" carries the record's Exception: Class =
//     exception.type, Message = exception.message, Stack parsed from
//     exception.stacktrace (Java "at pkg.Class.method(File.java:12)" frames
//     with "Caused by:" as the cause chain, Go runtime.Stack output of one
//     goroutine, Python tracebacks with chained exceptions as causes; frames
//     are stored innermost first). Those three attributes move into the
//     Exception; when the stack trace yields no frames its text stays as the
//     record attribute exception.stacktrace. Such a record has Errors 1 and
//     counts in Span.Errors; Span.Error follows the status code only.
//
// JSON and protobuf bodies of the same request map to identical spans: OTLP
// JSON is read into the generated protobuf types and mapped from them
// (mapRequest), which the binary decoder is tested against byte for byte
// (wire_test.go: the samples, random encodings, FuzzDecodeWire). OTLP JSON
// is read as the
// specification writes it: lowerCamelCase field names (encoding/json also
// matches them case-insensitively; snake_case names are not OTLP JSON and
// are ignored like any unknown field), trace and span ids as hex, 64-bit
// integers as strings or numbers, enums as integers or their names, bytes as
// base64, doubles as numbers or "NaN" / "Infinity" / "-Infinity".
package otlp
