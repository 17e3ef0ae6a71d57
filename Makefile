# ztsd — build, run and test. See README.md.
GO        ?= go
BIN       ?= bin
PREFIX    ?= /usr/local
DESTDIR   ?=
FUZZTIME  ?= 30s
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
SOAK_ITER ?= 500

.PHONY: all build run test vet tools fuzz soak compat recovery-speed bench bench-micro bench-baseline bench-large install clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/ ./cmd/...

# run serves the API on ./ztsd.sock and, on UI_LISTEN (loopback), the web UI.
UI_LISTEN ?= 127.0.0.1:7070
run: build
	@echo "ztsd web UI: http://$(UI_LISTEN)/"
	$(BIN)/ztsd --listen $(UI_LISTEN)

vet:
	$(GO) vet ./...

# tools builds the programs the tests run, outside ztsd's go.mod, into
# TOOLS: versitygw, the S3 server the object-store tests run against
# (internal/s3test finds it there, or where ZTSD_VERSITYGW says).
TOOLS         ?= $(CURDIR)/.tools
VERSITYGW_VER ?= v1.8.0
tools: $(TOOLS)/versitygw
$(TOOLS)/versitygw:
	GOBIN=$(TOOLS) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VER)

# The CI test command: vet; every library package with the race detector
# (fuzz seed corpora run as ordinary tests); the end-to-end tests that
# start real ztsd/ztsctl binaries, built normally; and the concurrent
# writers-and-searchers test once more against a race-built daemon.
LIB_PKGS = $(shell $(GO) list ./... | grep -v -e '/cmd/' -e '/e2e$$')
test: export ZTSD_VERSITYGW ?= $(TOOLS)/versitygw
test: vet tools
	$(GO) test -race -timeout 20m $(LIB_PKGS)
	$(GO) test -timeout 20m ./cmd/... ./e2e/
	$(GO) test -race -timeout 20m -run '^TestConcurrentWritersAndSearchers$$' ./cmd/ztsd/

# fuzz runs every fuzz target for FUZZTIME each.
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# compat builds jaeger-query (the release jaegerapi.JaegerVersion names,
# from the Go module proxy, in its own module: never in ztsd's go.mod) into
# $(ZTSD_COMPAT_CACHE) (default: the user cache dir), runs it with
# in-memory storage, sends it and ztsd the same OTLP load, compares every
# Jaeger endpoint ztsd serves and records jaeger-query's answers in
# jaegerapi/testdata/jaeger (which make test then checks ztsd against).
compat:
	ZTSD_COMPAT=1 $(GO) test -count=1 -run '^TestJaegerCompat$$' -v ./jaegerapi/

# install puts the binaries, systemd units, sysusers entry and the sample
# config (kept if one is already there) under DESTDIR/PREFIX.
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)/etc/ztsd $(DESTDIR)/usr/lib/systemd/system $(DESTDIR)/usr/lib/sysusers.d
	install -m 0755 $(BIN)/ztsd $(BIN)/ztsctl $(DESTDIR)$(PREFIX)/bin/
	sed 's|/usr/local/bin/|$(PREFIX)/bin/|g' deploy/ztsd.service > $(DESTDIR)/usr/lib/systemd/system/ztsd.service
	install -m 0644 deploy/ztsd.socket $(DESTDIR)/usr/lib/systemd/system/ztsd.socket
	install -m 0644 deploy/sysusers.d/ztsd.conf $(DESTDIR)/usr/lib/sysusers.d/ztsd.conf
	test -e $(DESTDIR)/etc/ztsd/ztsd.toml || install -m 0644 deploy/ztsd.toml $(DESTDIR)/etc/ztsd/ztsd.toml

# bench runs the Go micro-benchmarks (-count 6, compared with benchstat)
# and `ztsctl bench` against a real daemon (300k spans, < 10 min on 2 cores),
# and prints each result next to this machine's measured limits.
bench: build
	GO=$(GO) BIN=$(BIN) sh scripts/bench.sh

# bench-baseline runs only the micro-benchmarks and saves them as
# bench-out/baseline.txt; later bench-micro (micro-benchmarks only) and
# bench compare with it (benchstat before/after). BENCH_FILTER and
# BENCH_PKGS narrow them (see scripts/bench.sh).
bench-baseline: build
	GO=$(GO) BIN=$(BIN) BENCH_MICRO=only BENCH_SAVE_BASELINE=1 sh scripts/bench.sh

bench-micro: build
	GO=$(GO) BIN=$(BIN) BENCH_MICRO=only sh scripts/bench.sh

# bench-large builds a store of 10 million spans for the read latency
# targets (the ingest goals are make bench's: the other ingest phases and
# the span store are left out). Its gets run right after ingest, while
# Pebble compacts the indexes, and again with the searches once the
# compactions have finished (--settle: at rest, as a store is read most
# of its life). To read the store again after a code
# change, keep it and read it with --existing, e.g.:
#   make bench-large BENCH_LARGE_ARGS="--keep --work-dir /tmp/large"
#   bin/ztsctl bench --existing --data-dir /tmp/large/data --spans 10000000 --no-probes
BENCH_LARGE_ARGS ?=
bench-large: build
	GO=$(GO) BIN=$(BIN) BENCH_MICRO=0 BENCH_SPANS=10000000 BENCH_OUT=bench-out/large \
		BENCH_ARGS="--other-format-spans -1 --unbatched-for -1s --otlp-for -1s --space-spans -1 --settle 10m $(BENCH_LARGE_ARGS)" sh scripts/bench.sh

# soak runs the kill -9 crash loop SOAK_ITER times (make test runs 20), the
# kill -9 loop of a daemon uploading to versitygw TIERING_CRASHES times
# (make test: 5), then
# the fault-injection soak for FAULT_SOAK (make test runs 25 s of it):
# writers and searchers while bits flip in sealed stores, the disk fills
# and frees, slow connections and oversized bodies arrive (needs root for
# its tmpfs). SOAK_RSS_BUDGET (bytes) is the daemon's memory_budget, which
# its RSS must stay under.
# Last, a crash during the index replay of 1.5M spans (make test: 12k).
FAULT_SOAK      ?= 10m
TIERING_CRASHES ?= 30
SOAK_RSS_BUDGET ?= 268435456
# BUCKET_SOAK_SPANS: spans each ingesting daemon writes in the two nodes,
# one bucket acceptance test (make test: 4000).
BUCKET_SOAK_SPANS ?= 50000
soak: tools
	ZTSD_CRASH_ITERATIONS=$(SOAK_ITER) $(GO) test -count=1 -timeout 12h -run '^TestCrashLoop' -v ./cmd/ztsd/
	ZTSD_VERSITYGW=$${ZTSD_VERSITYGW:-$(TOOLS)/versitygw} ZTSD_TIERING_CRASHES=$(TIERING_CRASHES) $(GO) test -count=1 -timeout 2h -run '^TestTieringCrashLoop$$' -v ./cmd/ztsd/
	ZTSD_VERSITYGW=$${ZTSD_VERSITYGW:-$(TOOLS)/versitygw} ZTSD_BUCKET_SOAK_SPANS=$(BUCKET_SOAK_SPANS) $(GO) test -count=1 -timeout 1h -run '^TestTwoNodesOneBucket$$' -v ./cmd/ztsd/
	ZTSD_FAULT_SOAK=$(FAULT_SOAK) ZTSD_SOAK_RSS_BUDGET=$(SOAK_RSS_BUDGET) $(GO) test -count=1 -timeout 3h -run '^TestFaultSoak$$' -v ./cmd/ztsd/
	ZTSD_SOAK=1 $(GO) test -count=1 -timeout 1h -run '^(TestSlowBodiesAndConnectionCap|TestMemoryBudgetBoundsRSS)$$' -v ./cmd/ztsd/
	ZTSD_SOAK=1 $(GO) test -count=1 -timeout 1h -run '^TestIndexOpensAnyRowItWrote$$' -v ./index/
	ZTSD_REPLAY_SPANS=1500000 $(GO) test -count=1 -timeout 2h -run '^TestReplayCheckpointSurvivesCrash$$' -v ./storedir/

# recovery-speed measures `ztsctl recover` on a ≥ 1 GiB store next to the
# disk's direct-I/O sequential read speed.
RECOVERY_DIR ?= /var/tmp/ztsd-recovery-speed
recovery-speed:
	ZTSD_RECOVERY_DIR=$(RECOVERY_DIR) $(GO) test -count=1 -timeout 3h -run '^TestRecoverySpeed$$' -v ./recovery/

clean:
	rm -rf $(BIN)
