// Package jaegerapi serves the HTTP JSON API of jaeger-query over a
// storedir.DB, so that Grafana's Jaeger data source and Jaeger UI read
// ztsd: /api/services, /api/services/{service}/operations,
// /api/operations, /api/traces (search) and /api/traces/{id}, and the v3
// API (/api/v3/services, /api/v3/operations, /api/v3/traces/{id},
// /api/v3/traces, /api/v3/trace-summaries in Jaeger's TraceSummary shape).
//
// Traces are shown through queryapi's view: each stored span is a Jaeger
// span whose method-call records with a duration are child spans (tag
// ztsd.record=true) and whose zero-length leaf records are logs; service
// and operation follow queryapi.ServiceOf and queryapi.OperationOf. The
// tags are those Jaeger's own OTLP translator writes (span.kind,
// otel.status_code, otel.status_description, error, otel.scope.name,
// otel.scope.version, w3c.tracestate; the resource's attributes are the
// process tags). docs/query-apis.md lists where the answers differ from
// jaeger-query's.
//
// Invariants: a search is queryapi.FindTraces (the index does all the
// filtering: service, operation, tags, duration bounds, time range); a trace is written one span at a time, never
// held a second time as JSON; every error is Jaeger's structured error
// ({"data": null, …, "errors": [{"code", "msg"}]}) with the HTTP status.
package jaegerapi
