package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ztsd/ztsd/trace"
)

// Formats of ingest request bodies.
const (
	FormatCBOR = "cbor" // application/cbor: the chunk payload encoding (client.PutCBOR)
	FormatJSON = "json" // application/x-ndjson: Trace JSON lines (client.Put)
)

// Config is one benchmark run. Zero fields take the defaults noted.
type Config struct {
	// ZtsdPath, when set, is the ztsd binary to start on DataDir with a
	// generated config; the daemon is stopped before recovery. Otherwise
	// Socket (or TCP) names a running daemon.
	ZtsdPath string
	Socket   string
	TCP      string
	// DataDir is the spawned daemon's data directory (default: WorkDir/data,
	// which must not exist yet or be empty), or the running daemon's, if
	// known, for the space measurements.
	DataDir string
	// WorkDir holds the spawned daemon's config and log (default: a new
	// temporary directory, removed at the end unless Keep).
	WorkDir string
	Keep    bool
	// Sync is the spawned daemon's sync policy (default "batch").
	Sync string
	// Pprof turns on the spawned daemon's /debug/pprof/ endpoint.
	Pprof bool
	// ExtraConfig is appended to the spawned daemon's TOML config.
	ExtraConfig string

	Workload Workload
	// Spans is how many spans to ingest (default 200,000); whole traces
	// are sent, so a few more may be.
	Spans int
	// Clients is the number of concurrent ingest clients (default 8).
	Clients int
	// BatchSpans is the spans per ingest request (default 500; whole
	// traces, so a request may hold a few more).
	BatchSpans int
	// Format is FormatCBOR (default) or FormatJSON.
	Format string
	// RoundBytes bounds the encoded request bodies held in memory at once
	// (default 256 MiB): ingest runs in rounds of at most this much.
	RoundBytes int64

	// OtherFormatSpans is how many spans of the same workload are then
	// sent, batched alike, in the other format (Trace JSON when Format is
	// CBOR, and the reverse) to the same daemon (default Spans/4;
	// negative: none).
	OtherFormatSpans int
	// UnbatchedClients clients (default 2) then send requests of one span
	// each in a closed loop for UnbatchedFor (default 10 s; negative:
	// skipped), to the same daemon.
	UnbatchedClients int
	UnbatchedFor     time.Duration
	// SkipRestart leaves out the kill -9 and restart of a started daemon
	// after the read phases (timed until /healthz answers and until the
	// last span acknowledged is read).
	SkipRestart bool
	// OTLPFor is the measured length of each OTLP load (RunOTLP, issue
	// 19's load: OTLPSenders senders, requests of 10 traces × 10 spans of
	// six attributes), over OTLP/gRPC and then OTLP/HTTP, each on a daemon
	// of its own (default 20 s; negative: skipped). Needs ZtsdPath. The
	// OTLP/gRPC daemon's data directory gives the bytes per span.
	OTLPFor     time.Duration
	OTLPSenders int
	// SpaceSpans spans of the OTLP shape (six attributes, one root record,
	// no nested method calls) are stored by a daemon of their own for the
	// bytes on disk per span (default 200,000; negative: skipped). Needs
	// a started daemon (ZtsdPath).
	SpaceSpans int

	// Existing says DataDir already holds the store an earlier run built
	// with the same Workload, Spans, BatchSpans and Format: the main
	// workload is generated again to know what is stored (nothing is
	// sent), the other ingest phases and recovery are skipped, and the read
	// phases, the restart and the space measurement run on it (the OTLP
	// loads and the span store, which need daemons of their own, do not).
	Existing bool

	// KeySpace measures, once the daemon is stopped, the bytes of each
	// kind of index key (MeasureDataDirKeySpace); it writes each index
	// again three times, so it is off by default.
	KeySpace bool

	// Settle, when positive, waits after the ingest phases (up to Settle)
	// until the daemon reports no index compaction debt and none running
	// (GET /v1/stores) before the read phases, so that they measure the
	// store at rest. The gets then also run once before the wait, right
	// after ingest while the indexes compact, reported apart (GetBusy*).
	Settle time.Duration

	// Gets is the number of get-by-id requests (default 20,000), sent by
	// GetClients concurrent clients (default 1).
	Gets       int
	GetClients int
	// Searches is the number of searches of each kind (default 2,000).
	Searches int

	// SkipProbes leaves out the disk probes; ProbeBytes is the size of the
	// disk probe file (default 256 MiB), FsyncFor the length of each of
	// the two fsync loops and of the HTTP commit probe (default 2 s),
	// LZ4For the length of each LZ4 pass (default 1 s) and LZ4SampleBytes
	// the payload bytes it runs on (default 64 MiB).
	SkipProbes     bool
	ProbeBytes     int64
	FsyncFor       time.Duration
	LZ4For         time.Duration
	LZ4SampleBytes int64

	// Recover, when set, rebuilds the stopped daemon's data directory (what
	// `ztsctl recover` does); the run times it.
	Recover RecoverFunc

	// ProfileDir, when set (with Pprof), receives the daemon's CPU profile
	// of the ingest phase, of the unbatched phase and of the read phases and
	// its heap profile after ingest, each CPU profile covering up to
	// ProfileSeconds (default 30), and a runtime execution trace of the
	// unbatched phase (unbatched.trace, up to 2 s).
	ProfileDir     string
	ProfileSeconds int

	// Progress receives one line per step (nil: silent).
	Progress io.Writer
}

// RecoverFunc rebuilds the indexes of a stopped data directory and returns
// how many data-file bytes it read and how many spans it indexed.
type RecoverFunc func(ctx context.Context, dataDir string) (dataBytes, spans int64, err error)

func (c *Config) fill() error {
	if c.Sync == "" {
		c.Sync = "batch"
	}
	if c.Spans <= 0 {
		c.Spans = 200_000
	}
	if c.Clients <= 0 {
		c.Clients = 8
	}
	if c.BatchSpans <= 0 {
		c.BatchSpans = 500
	}
	switch c.Format {
	case "":
		c.Format = FormatCBOR
	case FormatCBOR, FormatJSON:
	default:
		return fmt.Errorf("format %q: want %s or %s", c.Format, FormatCBOR, FormatJSON)
	}
	if c.OtherFormatSpans == 0 {
		c.OtherFormatSpans = c.Spans / 4
	}
	if c.UnbatchedClients <= 0 {
		c.UnbatchedClients = 2
	}
	if c.UnbatchedFor == 0 {
		c.UnbatchedFor = 10 * time.Second
	}
	if c.OTLPFor == 0 {
		c.OTLPFor = 20 * time.Second
	}
	if c.SpaceSpans == 0 {
		c.SpaceSpans = 200_000
	}
	if c.RoundBytes <= 0 {
		c.RoundBytes = 256 << 20
	}
	if c.Gets <= 0 {
		c.Gets = 20_000
	}
	if c.GetClients <= 0 {
		c.GetClients = 1
	}
	if c.Searches <= 0 {
		c.Searches = 2_000
	}
	if c.ProbeBytes <= 0 {
		c.ProbeBytes = 256 << 20
	}
	if c.FsyncFor <= 0 {
		c.FsyncFor = 2 * time.Second
	}
	if c.LZ4For <= 0 {
		c.LZ4For = time.Second
	}
	if c.LZ4SampleBytes <= 0 {
		c.LZ4SampleBytes = 64 << 20
	}
	if c.ProfileSeconds <= 0 {
		c.ProfileSeconds = 30
	}
	if c.ZtsdPath == "" && c.Socket == "" && c.TCP == "" {
		return ErrNoDaemon
	}
	return nil
}

// runner is the state of one Run.
type runner struct {
	// logMu serialises progress lines: profiles are saved from their own
	// goroutine while a phase logs.
	logMu  sync.Mutex
	cfg    Config
	rep    *Report
	hc     *httpClient
	daemon *Daemon
	// What the ingest phase remembers for the read phases.
	sample    []sampledTrace // reservoir of stored traces
	lastTrace trace.TraceID  // the main phase's last trace
	durations []int64        // reservoir of span durations
	firstNS   int64
	lastNS    int64
	bodies    [][]byte   // a few CBOR bodies, for the LZ4 probe without a data dir
	gen       *Generator // the main workload, continued by later ingest phases
	rng       *rand.Rand
	// ownWork and ownData say the run created the work and data
	// directories (cleanup removes only what the run created).
	ownWork, ownData bool
}

type sampledTrace struct {
	id    trace.TraceID
	spans int
	user  string
}

const reservoirSize = 100_000

func (r *runner) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "bench: "+format+"\n", args...)
	}
}

// Run performs one benchmark run: (start the daemon,) ingest, get-by-id,
// searches, (stop the daemon,) bytes on disk, recovery, machine limits.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Workload.Seed, 99)),
		rep: &Report{Seed: cfg.Workload.Seed, CPUs: runtime.NumCPU(), Sync: cfg.Sync, Format: cfg.Format,
			Clients: cfg.Clients, BatchSpans: cfg.BatchSpans}}
	if cfg.ZtsdPath != "" {
		defer r.cleanup()
		if err := r.startDaemon(ctx); err != nil {
			return nil, err
		}
	} else {
		r.hc = newHTTPClient(cfg.Socket, cfg.TCP)
		r.rep.Sync = "(running daemon)"
	}
	defer func() { r.hc.close() }()
	if err := r.ingest(ctx); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	probe := r.lastTrace
	if cfg.OtherFormatSpans > 0 && !cfg.Existing {
		other := FormatJSON
		if cfg.Format == FormatJSON {
			other = FormatCBOR
		}
		ph, err := r.ingestPhase(ctx, "batched "+other, r.gen, other, cfg.OtherFormatSpans, cfg.Clients, cfg.BatchSpans, false)
		if err != nil {
			return nil, fmt.Errorf("ingest %s: %w", other, err)
		}
		r.addPhase(ph)
	}
	if cfg.UnbatchedFor > 0 && !cfg.Existing {
		var last trace.TraceID
		err := r.profiled(ctx, PhaseUnbatched, func() error {
			var err error
			last, err = r.unbatched(ctx)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("ingest %s: %w", PhaseUnbatched, err)
		}
		if !last.IsZero() {
			probe = last
		}
	}
	if cfg.Settle > 0 {
		cpu0 := r.cpuTimes()
		s, err := r.gets(ctx)
		if err != nil {
			return nil, fmt.Errorf("get-by-id right after ingest: %w", err)
		}
		r.rep.GetBusy = s
		r.addCPU(cpu0, &r.rep.GetBusyDaemonCPUSeconds, nil)
		if err := r.settle(ctx); err != nil {
			return nil, err
		}
	}
	if err := r.profiled(ctx, "read", func() error {
		cpu0 := r.cpuTimes()
		s, err := r.gets(ctx)
		if err != nil {
			return fmt.Errorf("get-by-id: %w", err)
		}
		r.rep.Gets = s.Count
		r.rep.GetP50Ms, r.rep.GetP99Ms, r.rep.GetP999Ms, r.rep.GetMaxMs = s.P50Ms, s.P99Ms, s.P999Ms, s.MaxMs
		r.addCPU(cpu0, &r.rep.GetDaemonCPUSeconds, nil)
		cpu0 = r.cpuTimes()
		if err := r.searches(ctx); err != nil {
			return fmt.Errorf("search: %w", err)
		}
		r.addCPU(cpu0, &r.rep.SearchDaemonCPUSeconds, nil)
		return nil
	}); err != nil {
		return nil, err
	}
	if r.daemon != nil && !cfg.SkipRestart {
		if err := r.restartAfterKill(ctx, probe); err != nil {
			return nil, err
		}
	}
	stopped := false
	if r.daemon != nil {
		r.logf("stopping the daemon")
		if err := r.daemon.Stop(2 * time.Minute); err != nil {
			return nil, err
		}
		stopped = true
	}
	if err := r.measureSpace(); err != nil {
		return nil, err
	}
	if cfg.KeySpace && stopped {
		r.logf("measuring the bytes of each kind of index key")
		ks, err := MeasureDataDirKeySpace(r.cfg.DataDir)
		if err != nil {
			return nil, fmt.Errorf("key space: %w", err)
		}
		r.rep.KeySpace = ks
	}
	switch {
	case cfg.Existing:
		r.rep.Notes = append(r.rep.Notes, "recovery not measured: the run read an existing store (--existing)")
	case r.cfg.Recover == nil:
		r.rep.Notes = append(r.rep.Notes, "recovery not measured: skipped (no recover function; ztsctl bench --no-recover)")
	case !stopped:
		r.rep.Notes = append(r.rep.Notes, "recovery not measured: it needs a daemon this run started (--ztsd) and stopped")
	default:
		if err := r.recover(ctx); err != nil {
			return nil, fmt.Errorf("recover: %w", err)
		}
	}
	if cfg.OTLPFor > 0 && cfg.ZtsdPath != "" && !cfg.Existing {
		if err := r.otlp(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.SpaceSpans > 0 && cfg.ZtsdPath != "" && r.rep.SpanSpaceSpans == 0 && !cfg.Existing {
		if err := r.spanSpace(ctx); err != nil {
			return nil, fmt.Errorf("space per span: %w", err)
		}
	}
	if !cfg.SkipProbes {
		dir := r.cfg.DataDir
		if dir == "" {
			dir = os.TempDir()
			r.rep.Notes = append(r.rep.Notes, "disk probes ran in "+dir+", which may not be the daemon's file system")
		}
		r.logf("probing the disk under %s (%d MiB, fsync loops 2 × %v)", dir, cfg.ProbeBytes>>20, cfg.FsyncFor)
		lim, err := ProbeDisk(dir, cfg.ProbeBytes, cfg.FsyncFor)
		if err != nil {
			return nil, err
		}
		r.rep.DiskLimits = lim
		if !lim.ReadDirect {
			r.rep.Notes = append(r.rep.Notes, "O_DIRECT refused by the file system: the read probe evicted its file from the page cache instead")
		}
		r.logf("probing %d net/http writers to a server that only group-commits under %s (%v)", cfg.UnbatchedClients, dir, cfg.FsyncFor)
		hl, err := ProbeHTTPCommit(ctx, dir, cfg.UnbatchedClients, cfg.FsyncFor)
		if err != nil {
			return nil, err
		}
		r.rep.HTTPCommitLimit = hl
	}
	r.rep.finish()
	return r.rep, nil
}

func (r *runner) startDaemon(ctx context.Context) error {
	cfg := &r.cfg
	if cfg.WorkDir == "" {
		dir, err := os.MkdirTemp("", "ztsd-bench-")
		if err != nil {
			return err
		}
		cfg.WorkDir, r.ownWork = dir, true
	} else if err := os.MkdirAll(cfg.WorkDir, 0o750); err != nil {
		return err
	}
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join(cfg.WorkDir, "data")
	}
	ents, err := os.ReadDir(cfg.DataDir)
	if cfg.Existing {
		if len(ents) == 0 {
			return fmt.Errorf("data directory %s holds no store to read (--existing): %v", cfg.DataDir, err)
		}
	} else if err == nil && len(ents) > 0 {
		return fmt.Errorf("data directory %s is not empty: the benchmark measures a store it builds from nothing", cfg.DataDir)
	}
	r.ownData = err != nil // the daemon creates it
	r.logf("starting %s on %s (sync=%s, pprof=%t)", cfg.ZtsdPath, cfg.DataDir, cfg.Sync, cfg.Pprof)
	d, err := StartDaemon(ctx, cfg.ZtsdPath, cfg.WorkDir, cfg.DataDir, cfg.Sync, cfg.Pprof, cfg.ExtraConfig)
	if err != nil {
		return err
	}
	r.daemon = d
	r.hc = newHTTPClient(d.Socket, "")
	return nil
}

// cleanup stops a daemon still running and, unless Keep, removes what the
// run created: its temporary work directory, or (in a work directory
// that was given) the generated config, the daemon's log and the data
// directory if the run created it.
func (r *runner) cleanup() {
	if r.daemon != nil {
		r.daemon.Kill()
	}
	switch {
	case r.cfg.WorkDir == "":
	case r.cfg.Keep:
		r.logf("kept %s", r.cfg.WorkDir)
	case r.ownWork:
		os.RemoveAll(r.cfg.WorkDir)
	default:
		os.Remove(filepath.Join(r.cfg.WorkDir, daemonConfigFile))
		os.Remove(filepath.Join(r.cfg.WorkDir, daemonLogFile))
		if r.ownData {
			os.RemoveAll(r.cfg.DataDir)
		}
	}
}

// request is one encoded ingest request.
type request struct {
	body           []byte
	spans, records int
}

// ingest is the main ingest phase: cfg.Spans spans in cfg.Format from
// cfg.Clients clients, remembered for the read phases.
func (r *runner) ingest(ctx context.Context) error {
	cfg := r.cfg
	r.gen = NewGenerator(cfg.Workload)
	ph, err := r.ingestPhase(ctx, "batched "+cfg.Format, r.gen, cfg.Format, cfg.Spans, cfg.Clients, cfg.BatchSpans, true)
	if err != nil {
		return err
	}
	if cfg.Existing {
		if err := r.countExisting(ctx, ph); err != nil {
			return err
		}
	} else {
		r.addPhase(ph)
	}
	r.rep.Spans, r.rep.Records, r.rep.IngestRequests = ph.Spans, ph.Records, ph.Requests
	r.rep.IngestBytesSent = ph.BytesSent
	r.rep.IngestSeconds = ph.Seconds
	r.rep.IngestDaemonCPUSeconds, r.rep.IngestClientCPUSeconds = ph.DaemonCPUSeconds, ph.ClientCPUSeconds
	r.rep.IngestP50Ms, r.rep.IngestP99Ms, r.rep.IngestP999Ms = ph.P50Ms, ph.P99Ms, ph.P999Ms
	r.rep.Traces = r.gen.Traces()
	return nil
}

// countExisting sets the stored spans of an existing store from
// /v1/stores, and its records from the main workload's records per span
// (the store may hold later phases' spans too).
func (r *runner) countExisting(ctx context.Context, main IngestPhase) error {
	body, err := r.hc.get(ctx, "/v1/stores")
	if err != nil {
		return err
	}
	var st struct {
		Stores []struct {
			Spans int64 `json:"spans"`
		} `json:"stores"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("/v1/stores: %w", err)
	}
	for _, s := range st.Stores {
		r.rep.StoredSpans += s.Spans
	}
	r.rep.StoredRecords = int64(float64(r.rep.StoredSpans) * div(float64(main.Records), float64(main.Spans)))
	r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("existing store of %d spans (from /v1/stores); its records estimated at the workload's %.1f per span; no ingest measured",
		r.rep.StoredSpans, div(float64(main.Records), float64(main.Spans))))
	return nil
}

// ingestPhase sends n spans of gen in rounds: generate and encode up to
// RoundBytes of requests of batch spans (untimed), then send them with
// clients concurrent clients (timed). The main phase remembers what it
// sent for the read phases, keeps a few bodies for the LZ4 probe and is
// the one profiled.
func (r *runner) ingestPhase(ctx context.Context, name string, gen *Generator, format string, n, clients, batchSpans int, main bool) (IngestPhase, error) {
	cfg := r.cfg
	ph := IngestPhase{Name: name, Format: format, Clients: clients, BatchSpans: batchSpans}
	contentType := "application/cbor"
	if format == FormatJSON {
		contentType = "application/x-ndjson"
	}
	var enc trace.ChunkEncoder
	var all Latencies
	var elapsed time.Duration
	var spansSent int
	sampleRng := rand.New(rand.NewPCG(cfg.Workload.Seed, 7))
	seenTraces, seenSpans := 0, 0
	round := 0
	var stopProfile func() error
	for spansSent < n {
		// Build a round.
		var reqs []request
		var roundBytes int64
		var batch []*trace.Span
		for spansSent < n && roundBytes < cfg.RoundBytes {
			batch = batch[:0]
			for len(batch) < batchSpans && spansSent+len(batch) < n {
				tr := gen.Trace()
				if main {
					r.remember(tr, sampleRng, &seenTraces, &seenSpans)
					r.lastTrace = tr[0].TraceID
				}
				batch = append(batch, tr...)
			}
			req := request{spans: len(batch)}
			for _, sp := range batch {
				req.records += int(sp.Recs)
			}
			var err error
			switch {
			case main && cfg.Existing: // nothing is sent
			case format == FormatCBOR:
				req.body, err = enc.Encode(nil, batch)
			default:
				req.body, err = encodeJSONLines(batch)
			}
			if err != nil {
				return ph, fmt.Errorf("encode request %d: %w", len(reqs), err)
			}
			if main && format == FormatCBOR && len(r.bodies) < 64 {
				r.bodies = append(r.bodies, req.body)
			}
			reqs = append(reqs, req)
			roundBytes += int64(len(req.body)) + 1 // +1: an existing store's rounds are bounded too
			spansSent += req.spans
		}
		round++
		if main && r.cfg.Existing {
			for _, q := range reqs {
				ph.Spans += int64(q.spans)
				ph.Records += int64(q.records)
				ph.BytesSent += int64(len(q.body))
			}
			ph.Requests += int64(len(reqs))
			r.logf("existing store: replayed round %d of the workload (%d spans so far), nothing sent", round, spansSent)
			continue
		}
		if main && round == 1 && r.canProfile() {
			stopProfile = r.startCPUProfile(ctx, "ingest")
		}
		r.logf("ingest %s round %d: %d requests, %d spans so far, %.1f MB of %s", name, round, len(reqs), spansSent, float64(roundBytes)/1e6, format)
		cpu0 := r.cpuTimes()
		lat, d, err := r.send(ctx, reqs, contentType, clients)
		r.addCPU(cpu0, &ph.DaemonCPUSeconds, &ph.ClientCPUSeconds)
		if err != nil {
			if stopProfile != nil {
				stopProfile()
			}
			return ph, err
		}
		all.Merge(lat)
		elapsed += d
		for _, q := range reqs {
			ph.Spans += int64(q.spans)
			ph.Records += int64(q.records)
			ph.BytesSent += int64(len(q.body))
		}
		ph.Requests += int64(len(reqs))
	}
	ph.Seconds = elapsed.Seconds()
	s := all.Summary()
	ph.P50Ms, ph.P99Ms, ph.P999Ms = s.P50Ms, s.P99Ms, s.P999Ms
	ph.finish()
	r.logf("ingest %s: %d spans, %d records in %.2f s", name, ph.Spans, ph.Records, ph.Seconds)
	if stopProfile != nil {
		if err := stopProfile(); err != nil {
			return ph, err
		}
		if err := r.saveProfile(ctx, "/debug/pprof/heap", "ingest.heap.pprof"); err != nil {
			return ph, err
		}
	}
	return ph, nil
}

// remember keeps a reservoir sample of traces and span durations and the
// time range, for the read phases.
func (r *runner) remember(tr []*trace.Span, rng *rand.Rand, traces, spans *int) {
	root := tr[0]
	user, _ := root.Attrs.Get("user.id")
	st := sampledTrace{id: root.TraceID, spans: len(tr), user: user.Str}
	*traces++
	if len(r.sample) < reservoirSize {
		r.sample = append(r.sample, st)
	} else if j := rng.IntN(*traces); j < reservoirSize {
		r.sample[j] = st
	}
	for _, sp := range tr {
		*spans++
		if len(r.durations) < reservoirSize {
			r.durations = append(r.durations, sp.DurationNS)
		} else if j := rng.IntN(*spans); j < reservoirSize {
			r.durations[j] = sp.DurationNS
		}
		if r.firstNS == 0 || sp.StartNS < r.firstNS {
			r.firstNS = sp.StartNS
		}
		r.lastNS = max(r.lastNS, sp.StartNS)
	}
}

func encodeJSONLines(spans []*trace.Span) ([]byte, error) {
	var buf bytes.Buffer
	for _, sp := range spans {
		b, err := sp.MarshalJSON()
		if err != nil {
			return nil, err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

// send posts reqs with clients concurrent clients and returns the request
// latencies and the wall time.
func (r *runner) send(ctx context.Context, reqs []request, contentType string, clients int) (*Latencies, time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	lats := make([]Latencies, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range lats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			for {
				i := int(next.Add(1)) - 1
				if i >= len(reqs) || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				err := r.hc.do(ctx, "POST", "/v1/traces", contentType, reqs[i].body, &out)
				if err != nil {
					cancel(fmt.Errorf("request %d (%d spans): %w", i, reqs[i].spans, err))
					return
				}
				lats[c].Add(time.Since(t0))
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return nil, d, err
	}
	var all Latencies
	for i := range lats {
		all.Merge(&lats[i])
	}
	return &all, d, nil
}

// gets fetches random stored traces by id and checks each answer holds
// the trace's spans.
func (r *runner) gets(ctx context.Context) (LatencySummary, error) {
	if len(r.sample) == 0 {
		return LatencySummary{}, errors.New("no traces were stored")
	}
	n := r.cfg.Gets
	r.logf("get-by-id: %d random traces, %d client(s)", n, r.cfg.GetClients)
	picks := make([]int, n)
	for i := range picks {
		picks[i] = r.rng.IntN(len(r.sample))
	}
	var next atomic.Int64
	lats := make([]Latencies, r.cfg.GetClients)
	errs := make([]error, r.cfg.GetClients)
	var wg sync.WaitGroup
	for c := range lats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				st := r.sample[picks[i]]
				path := "/v1/traces/" + st.id.String()
				t0 := time.Now()
				if err := r.hc.do(ctx, "GET", path, "", nil, &out); err != nil {
					errs[c] = err
					return
				}
				lats[c].Add(time.Since(t0))
				if i < 200 { // check the first answers in full
					if got := countSpans(out.Bytes()); got != st.spans {
						errs[c] = fmt.Errorf("trace %s: answer holds %d spans, %d were stored", st.id, got, st.spans)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return LatencySummary{}, err
	}
	var all Latencies
	for i := range lats {
		all.Merge(&lats[i])
	}
	return all.Summary(), nil
}

// settle waits, up to cfg.Settle, until the daemon's indexes are at rest:
// no flush or compaction running on settlePolls polls in a row, half a
// second apart, with the compaction debt unchanged across them (a
// compaction that ran between two polls changes it). The debt need not
// be 0: Pebble counts tables in L0 as debt, but compacts them only once
// enough have arrived. It records how long that took (SettleSeconds;
// Settled false when it did not happen in time).
func (r *runner) settle(ctx context.Context) error {
	const settlePolls = 4
	r.logf("waiting up to %v for the indexes' compactions to finish", r.cfg.Settle)
	t0 := time.Now()
	quiet, lastDebt := 0, int64(-1)
	for {
		debt, running, err := r.compactionState(ctx)
		if err != nil {
			return fmt.Errorf("settle: %w", err)
		}
		if running == 0 && (quiet == 0 || debt == lastDebt) {
			quiet++
		} else if running == 0 {
			quiet = 1 // debt changed: a compaction ran since the last poll
		} else {
			quiet = 0
		}
		lastDebt = debt
		waited := time.Since(t0)
		if quiet == settlePolls || waited >= r.cfg.Settle {
			r.rep.SettleSeconds, r.rep.Settled = waited.Seconds(), quiet == settlePolls
			r.rep.SettleDebtBytes = debt
			if !r.rep.Settled {
				r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("reads measured while the indexes still compact: %d compactions running, %d bytes of compaction debt after --settle %v", running, debt, r.cfg.Settle))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// compactionState sums the stores' index compaction debt and running
// compactions from /v1/stores.
func (r *runner) compactionState(ctx context.Context) (debt, running int64, err error) {
	body, err := r.hc.get(ctx, "/v1/stores")
	if err != nil {
		return 0, 0, err
	}
	var st struct {
		Stores []struct {
			Debt    int64 `json:"index_compaction_debt_bytes"`
			Running int64 `json:"index_compactions_running"`
		} `json:"stores"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return 0, 0, fmt.Errorf("/v1/stores: %w", err)
	}
	for _, s := range st.Stores {
		debt, running = debt+s.Debt, running+s.Running
	}
	return debt, running, nil
}

// countSpans counts the spans (roots and nested children) of Trace JSON
// lines; -1 when a line does not parse.
func countSpans(body []byte) int {
	n := 0
	var walk func(sp *trace.Span)
	walk = func(sp *trace.Span) {
		n++
		for _, c := range sp.Children {
			walk(c)
		}
	}
	for line := range bytes.SplitSeq(bytes.TrimSpace(body), []byte{'\n'}) {
		var sp trace.Span
		if err := sp.UnmarshalJSON(line); err != nil {
			return -1
		}
		walk(&sp)
	}
	return n
}

// Search kinds, in report order.
var searchKinds = []string{"attribute", "text", "duration", "errors", "time_range"}

// searches runs cfg.Searches searches of each kind (trace mode, limit 100).
func (r *runner) searches(ctx context.Context) error {
	slices.Sort(r.durations)
	p99 := r.durations[len(r.durations)*99/100]
	span := max(r.lastNS-r.firstNS, 1)
	r.logf("search: %d of each kind (%v)", r.cfg.Searches, searchKinds)
	var out bytes.Buffer
	for _, kind := range searchKinds {
		var lat Latencies
		results := 0
		for i := 0; i < r.cfg.Searches; i++ {
			v := url.Values{"limit": {"100"}}
			switch kind {
			case "attribute":
				v.Set("attr", "service.name:"+Services[r.rng.IntN(len(Services))])
			case "text":
				v.Set("text", r.sample[r.rng.IntN(len(r.sample))].user)
			case "duration":
				v.Set("min_duration", strconv.FormatInt(p99, 10))
			case "errors":
				v.Set("errors", "true")
			case "time_range":
				since := r.firstNS + r.rng.Int64N(span)
				v.Set("since", strconv.FormatInt(since, 10))
				v.Set("until", strconv.FormatInt(since+int64(time.Second), 10))
			}
			path := "/v1/search?" + v.Encode()
			t0 := time.Now()
			if err := r.hc.do(ctx, "GET", path, "", nil, &out); err != nil {
				return err
			}
			lat.Add(time.Since(t0))
			var page struct {
				Results []json.RawMessage `json:"results"`
			}
			if err := json.Unmarshal(out.Bytes(), &page); err != nil {
				return fmt.Errorf("search answer: %w", err)
			}
			results += len(page.Results)
		}
		s := lat.Summary()
		sr := SearchResult{Kind: kind, Count: s.Count, P50Ms: s.P50Ms, P99Ms: s.P99Ms, MaxMs: s.MaxMs,
			MeanResults: float64(results) / float64(max(s.Count, 1))}
		if sr.MeanResults == 0 {
			return fmt.Errorf("%s searches found nothing (last: %s)", kind, out.String())
		}
		r.rep.Searches = append(r.rep.Searches, sr)
	}
	return nil
}

func (r *runner) measureSpace() error {
	if r.cfg.DataDir == "" {
		r.rep.Notes = append(r.rep.Notes, "bytes on disk not measured: the running daemon's --data-dir was not given")
		if len(r.bodies) > 0 {
			return r.probeLZ4(r.bodies, "the CBOR request bodies (no data directory to read chunk payloads from)")
		}
		return nil
	}
	r.logf("measuring bytes on disk in %s", r.cfg.DataDir)
	sp, payloads, err := MeasureSpace(r.cfg.DataDir, r.cfg.LZ4SampleBytes)
	if err != nil {
		return err
	}
	r.rep.Space = sp
	if r.daemon == nil {
		r.rep.Notes = append(r.rep.Notes, "bytes on disk measured next to a running daemon: a snapshot")
	}
	return r.probeLZ4(payloads, "")
}

func (r *runner) probeLZ4(payloads [][]byte, note string) error {
	if len(payloads) == 0 {
		return nil
	}
	r.logf("LZ4 on %d chunk payloads, one core", len(payloads))
	lim, err := ProbeLZ4(payloads, r.cfg.LZ4For)
	if err != nil {
		return err
	}
	r.rep.CodecLimits = lim
	r.logf("CBOR on the same payloads, one core")
	clim, err := ProbeCBOR(payloads, r.cfg.LZ4For)
	if err != nil {
		return err
	}
	r.rep.CBORLimits = clim
	if note != "" {
		r.rep.Notes = append(r.rep.Notes, "LZ4 measured on "+note)
	}
	return nil
}

func (r *runner) recover(ctx context.Context) error {
	files, err := dataFiles(r.cfg.DataDir)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := EvictFromPageCache(f); err != nil {
			r.rep.Notes = append(r.rep.Notes, "recovery may have read from the page cache: "+err.Error())
		}
	}
	r.logf("recovering %s", r.cfg.DataDir)
	t0 := time.Now()
	dataBytes, spans, err := r.cfg.Recover(ctx, r.cfg.DataDir)
	d := time.Since(t0)
	if err != nil {
		return err
	}
	r.rep.RecoverSeconds = d.Seconds()
	r.rep.RecoverDataBytes = dataBytes
	r.rep.RecoverMBPerS = mbPerS(dataBytes, d)
	r.rep.RecoverSpans = spans
	if spans != r.rep.StoredSpans {
		return fmt.Errorf("recovery indexed %d spans, %d were stored", spans, r.rep.StoredSpans)
	}
	return nil
}

// cpuTimes returns the CPU time used so far by the daemon (when this run
// started it; else 0) and by this process.
func (r *runner) cpuTimes() [2]time.Duration {
	var t [2]time.Duration
	if r.daemon != nil {
		t[0], _ = r.daemon.CPUTime()
	}
	t[1], _ = processCPU(os.Getpid())
	return t
}

// addCPU adds the CPU time used since t0 to daemon and client (in seconds;
// client may be nil).
func (r *runner) addCPU(t0 [2]time.Duration, daemon, client *float64) {
	t := r.cpuTimes()
	if r.daemon != nil {
		*daemon += (t[0] - t0[0]).Seconds()
	}
	if client != nil {
		*client += (t[1] - t0[1]).Seconds()
	}
}

// canProfile reports whether daemon profiles were asked for and can be had.
func (r *runner) canProfile() bool {
	return r.cfg.ProfileDir != "" && (r.cfg.Pprof || r.daemon == nil)
}

// startCPUProfile starts a CPU profile of the daemon lasting up to
// ProfileSeconds; the returned function waits for it and saves it as
// ProfileDir/<phase>.cpu.pprof. CPU profiles only sample busy time, so a
// phase shorter than the profile adds no foreign samples as long as the
// next phase starts after the wait.
func (r *runner) startCPUProfile(ctx context.Context, phase string) func() error {
	done := make(chan error, 1)
	go func() {
		done <- r.saveProfile(ctx, "/debug/pprof/profile?seconds="+strconv.Itoa(r.cfg.ProfileSeconds), phase+".cpu.pprof")
	}()
	time.Sleep(50 * time.Millisecond) // let the profiler start
	return func() error {
		r.logf("waiting for the %s CPU profile (%d s)", phase, r.cfg.ProfileSeconds)
		return <-done
	}
}

func (r *runner) saveProfile(ctx context.Context, path, name string) error {
	if err := os.MkdirAll(r.cfg.ProfileDir, 0o755); err != nil {
		return err
	}
	var out bytes.Buffer
	if err := r.hc.do(ctx, "GET", path, "", nil, &out); err != nil {
		return fmt.Errorf("daemon profile %s: %w", name, err)
	}
	p := filepath.Join(r.cfg.ProfileDir, name)
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		return err
	}
	r.logf("saved %s", p)
	return nil
}

// profiled runs fn under a daemon CPU profile named phase when profiles
// were asked for. The unbatched phase also gets a runtime execution trace
// of the daemon (unbatched.trace, for go tool trace) from a quarter into
// the phase, half of it long and at most 2 s: where the wall time of each
// group commit goes (the hand-offs between goroutines, the fdatasync, the
// waits) which a CPU profile does not show.
func (r *runner) profiled(ctx context.Context, phase string, fn func() error) error {
	if !r.canProfile() {
		return fn()
	}
	stop := r.startCPUProfile(ctx, phase)
	traced := make(chan error, 1)
	if phase == PhaseUnbatched {
		go func() {
			d := r.cfg.UnbatchedFor
			select {
			case <-time.After(d / 4):
			case <-ctx.Done():
				traced <- ctx.Err()
				return
			}
			secs := min(d/2, 2*time.Second).Seconds()
			traced <- r.saveProfile(ctx, "/debug/pprof/trace?seconds="+strconv.FormatFloat(secs, 'f', 3, 64), phase+".trace")
		}()
	} else {
		traced <- nil
	}
	err := fn()
	if terr := <-traced; err == nil {
		err = terr
	}
	if perr := stop(); err == nil {
		err = perr
	}
	return err
}
