#!/bin/sh
# bench.sh runs ztsd's benchmarks for `make bench` and `make bench-large`:
#
#   1. the Go micro-benchmarks of the hot paths (storedir append, get-by-id
#      and search; the trace codec; chunk compression and reads) with
#      -count $BENCH_COUNT, summarised by benchstat (installed into a
#      temporary GOBIN when it is not on PATH);
#   2. the load generator: `ztsctl bench` starts $BIN/ztsd on a fresh data
#      directory and prints one table of results next to this machine's
#      limits (and writes the same as JSON).
#
# Everything lands in $BENCH_OUT: micro.txt (raw `go test -bench` output,
# for benchstat comparisons with a later run), benchstat.txt, table.txt and
# bench.json.
#
# Environment (all optional):
#   GO            go command (default go)
#   BIN           directory holding ztsd and ztsctl (default bin; `make
#                 build` fills it)
#   BENCH_OUT     output directory (default bench-out)
#   BENCH_COUNT   -count of the micro-benchmarks (default 6: enough for
#                 benchstat's confidence intervals)
#   BENCH_TIME    -benchtime of the micro-benchmarks (default 500ms)
#   BENCH_MICRO   0 skips the micro-benchmarks (bench-large does)
#   BENCH_SPANS   spans the load generator ingests (default 300000)
#   BENCH_ARGS    further `ztsctl bench` flags, e.g. "--clients 16 --pprof"
set -eu

GO=${GO:-go}
BIN=${BIN:-bin}
OUT=${BENCH_OUT:-bench-out}
COUNT=${BENCH_COUNT:-6}
BENCHTIME=${BENCH_TIME:-500ms}
MICRO=${BENCH_MICRO:-1}
SPANS=${BENCH_SPANS:-300000}
ARGS=${BENCH_ARGS:-}

mkdir -p "$OUT"
for b in ztsd ztsctl; do
	if [ ! -x "$BIN/$b" ]; then
		echo "bench.sh: $BIN/$b missing: run make build first" >&2
		exit 2
	fi
done

if [ "$MICRO" != 0 ]; then
	if command -v benchstat >/dev/null 2>&1; then
		BENCHSTAT=benchstat
	else
		gobin=$(mktemp -d)
		trap 'rm -rf "$gobin"' EXIT
		echo "bench.sh: installing benchstat into $gobin" >&2
		GOBIN=$gobin $GO install golang.org/x/perf/cmd/benchstat@latest
		BENCHSTAT=$gobin/benchstat
	fi
	echo "== micro-benchmarks (-count $COUNT -benchtime $BENCHTIME) -> $OUT/micro.txt" >&2
	$GO test -run '^$' -bench . -benchmem -count "$COUNT" -benchtime "$BENCHTIME" \
		./storedir ./trace ./chunk >"$OUT/micro.txt"
	"$BENCHSTAT" "$OUT/micro.txt" | tee "$OUT/benchstat.txt"
fi

echo "== ztsctl bench --spans $SPANS $ARGS -> $OUT/table.txt, $OUT/bench.json" >&2
# shellcheck disable=SC2086 # BENCH_ARGS is a list of flags
"$BIN/ztsctl" bench --ztsd "$BIN/ztsd" --spans "$SPANS" --json-out "$OUT/bench.json" $ARGS | tee "$OUT/table.txt"
