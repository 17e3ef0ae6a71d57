// Package e2e holds ztsd's end-to-end acceptance tests for the importers and
// the agent and OpenTelemetry ingest paths. Every test runs the real ztsd
// and ztsctl binaries (built once per test binary by internal/daemontest,
// with the race detector when the tests run with it) against a fresh data
// directory and talks to the daemon the way an operator or an agent would:
// curl and raw HTTP over the unix socket, the TCP listener, OTLP/gRPC, and
// ztsctl import/get/search.
//
// The package has no non-test code besides this comment. Its tests own
// these invariants:
//
//   - Samples are read in place from ../../shared/testdata (never copied).
//   - Each test starts its own daemon, so counts (search results, attribute
//     values, stores) are exact, not "at least".
//   - Expected values come from the sample README, WTF's reference tables
//     and zorka-tdb's test suite (shared/notes), not from the code under
//     test.
//
// Optional parts: curl replays are skipped when curl is not installed, and
// the telemetrygen load run needs ZTSD_TELEMETRYGEN to name a telemetrygen
// binary.
package e2e
