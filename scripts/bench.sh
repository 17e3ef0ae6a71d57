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
# Everything lands in $BENCH_OUT: micro.txt (raw `go test -bench` output),
# benchstat.txt (its summary, or, when $BENCH_BASELINE exists, the
# comparison baseline → this run), table.txt and bench.json.
#
# Before/after comparisons of the micro-benchmarks:
#   make bench-baseline     # on the old code: micro-benchmarks only, saved
#                           # as bench-out/baseline.txt
#   (change the code)
#   make bench-micro        # micro-benchmarks only, compared with it
#   make bench              # everything, compared with it
#
# Environment (all optional):
#   GO            go command (default go)
#   BIN           directory holding ztsd and ztsctl (default bin; `make
#                 build` fills it)
#   BENCH_OUT     output directory (default bench-out)
#   BENCH_COUNT   -count of the micro-benchmarks (default 6: enough for
#                 benchstat's confidence intervals)
#   BENCH_TIME    -benchtime of the micro-benchmarks (default 500ms)
#   BENCH_MICRO   0 skips the micro-benchmarks (bench-large does);
#                 "only" runs nothing else
#   BENCH_PKGS    packages of the micro-benchmarks (default ./storedir
#                 ./index ./trace ./chunk)
#   BENCH_FILTER  -bench pattern (default .)
#   BENCH_BASELINE  an earlier micro.txt to compare with (default
#                 $BENCH_OUT/baseline.txt, when it exists)
#   BENCH_SAVE_BASELINE  1: also copy this run's micro.txt to
#                 $BENCH_BASELINE (make bench-baseline)
#   BENCH_SPANS   spans the load generator ingests (default 300000)
#   BENCH_ARGS    further `ztsctl bench` flags, e.g. "--clients 16 --pprof"
set -eu

GO=${GO:-go}
BIN=${BIN:-bin}
OUT=${BENCH_OUT:-bench-out}
COUNT=${BENCH_COUNT:-6}
BENCHTIME=${BENCH_TIME:-500ms}
MICRO=${BENCH_MICRO:-1}
PKGS=${BENCH_PKGS:-./storedir ./index ./trace ./chunk}
FILTER=${BENCH_FILTER:-.}
BASELINE=${BENCH_BASELINE:-$OUT/baseline.txt}
SAVE_BASELINE=${BENCH_SAVE_BASELINE:-0}
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
	echo "== micro-benchmarks $PKGS (-bench '$FILTER' -count $COUNT -benchtime $BENCHTIME) -> $OUT/micro.txt" >&2
	# shellcheck disable=SC2086 # BENCH_PKGS is a list of packages
	$GO test -run '^$' -bench "$FILTER" -benchmem -count "$COUNT" -benchtime "$BENCHTIME" \
		$PKGS >"$OUT/micro.txt"
	if [ "$SAVE_BASELINE" = 1 ]; then
		cp "$OUT/micro.txt" "$BASELINE"
		echo "bench.sh: saved the baseline $BASELINE" >&2
		"$BENCHSTAT" "$BASELINE" | tee "$OUT/benchstat.txt"
	elif [ -f "$BASELINE" ]; then
		echo "== benchstat $BASELINE (before) $OUT/micro.txt (after)" >&2
		"$BENCHSTAT" before="$BASELINE" after="$OUT/micro.txt" | tee "$OUT/benchstat.txt"
	else
		"$BENCHSTAT" "$OUT/micro.txt" | tee "$OUT/benchstat.txt"
	fi
fi
if [ "$MICRO" = only ]; then
	exit 0
fi

echo "== ztsctl bench --spans $SPANS $ARGS -> $OUT/table.txt, $OUT/bench.json" >&2
# Not piped into tee: sh would report tee's status, and a failed bench
# would end make bench with status 0.
status=0
# shellcheck disable=SC2086 # BENCH_ARGS is a list of flags
"$BIN/ztsctl" bench --ztsd "$BIN/ztsd" --spans "$SPANS" --json-out "$OUT/bench.json" $ARGS >"$OUT/table.txt" || status=$?
cat "$OUT/table.txt"
exit "$status"
