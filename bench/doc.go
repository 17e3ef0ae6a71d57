// Package bench is ztsd's load generator and measuring kit, behind
// `ztsctl bench` and `make bench`:
//
//   - Generator: a seeded, reproducible, realistic workload — traces of
//     1–12 nested spans, six attributes per span of low cardinality
//     (service, route, status, host) and high cardinality (user id, SQL
//     text), 1–200 method-call records per span drawn from a skewed (Zipf)
//     law, 1% of spans failing with an exception.
//   - Run: drives a real ztsd over its socket (one it spawns with a
//     generated config, or a running one) through the phases: batched
//     ingest (N concurrent clients) in one format, then in the other (CBOR
//     and Trace JSON), 2 unbatched writers of one span per request,
//     get-by-id, searches of each kind, kill -9 and restart (timed to
//     /healthz and to the first read), and, once the daemon is stopped,
//     bytes on disk and recovery of the data directory; a second daemon
//     stores OTLP-shaped spans (six attributes, no method calls) for the
//     bytes per span. Config.Existing reads a store an earlier run built
//     (the workload is generated again, nothing sent), for read latency
//     on a large store after a code change.
//   - Probes of this machine's limits, taken in the same run: sequential
//     write with fsync, fsyncs per second (a chunk appended into the data
//     file's preallocated zeros and fdatasynced, as the daemon's committer
//     does, and the older "append growing the file" figure), the HTTP
//     commit ceiling (as many closed-loop net/http writers as the
//     unbatched phase has, to a server process of the bench's own that
//     only group-commits: the unbatched phase's limit), sequential direct-I/O
//     read, and single-core LZ4 and CBOR (the chunk payload codec) on the
//     very chunk payloads the store wrote.
//   - Report: one table setting each goal of DESIGN.md's budget next to
//     its result, the limit it is bounded by, the ratio and met / NOT MET
//     / not measured, or the same as one JSON object.
//
// Invariants:
//   - The traffic is a pure function of the seed and the size: two runs
//     with equal flags send byte-identical requests, in the same order per
//     request (the interleaving of concurrent clients varies).
//   - Only network round trips are timed. Requests are generated and
//     encoded before each timed ingest round (the unbatched phase's too:
//     its clock stops while the next round is made), and a round holds at
//     most Config.RoundBytes of encoded bodies, so memory stays bounded
//     whatever the size of the run.
//   - Percentiles are nearest-rank over every sample taken (no histogram
//     buckets, no sampling).
//   - Probes write only their own temporary file (in the data directory's
//     file system) and remove it; a spawned daemon's temporary directory is
//     removed unless Config.Keep is set.
package bench
