package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// OTLP protocols of the OTLP benchmark.
const (
	OTLPGRPC = "grpc" // OTLP/gRPC TraceService/Export on the daemon's otlp_grpc_listen
	OTLPHTTP = "http" // OTLP/HTTP POST /v1/traces, binary protobuf, on the daemon's socket (or TCP)
)

// OTLPAttrsPerSpan is the number of span attributes of the OTLP load.
const OTLPAttrsPerSpan = 6

// OTLPConfig is one run of the OTLP load of issue 19: Senders concurrent
// senders, each in a closed loop for Duration, sending requests of
// Traces traces × SpansPerTrace spans with OTLPAttrsPerSpan attributes per
// span. Zero fields take the defaults noted.
type OTLPConfig struct {
	// Protocol is OTLPGRPC (default) or OTLPHTTP.
	Protocol string
	// ZtsdPath, when set, is the ztsd binary to start on a new data
	// directory with a generated config (its OTLP/gRPC listener on a free
	// loopback port). Otherwise the daemon is a running one: Socket (or
	// TCP) for OTLP/HTTP, GRPCAddr for OTLP/gRPC, and PID, when known,
	// for its CPU time.
	ZtsdPath string
	Socket   string
	TCP      string
	GRPCAddr string
	PID      int
	// DataDir, WorkDir, Keep, Sync (default "batch"), Pprof and
	// ExtraConfig are as in Config, for the spawned daemon.
	DataDir     string
	WorkDir     string
	Keep        bool
	Sync        string
	Pprof       bool
	ExtraConfig string
	// ProfileDir, when set (with Pprof for a spawned daemon), receives the
	// daemon's CPU profile of the load (otlp-<protocol>.cpu.pprof) covering
	// up to ProfileSeconds (default 30) from the end of the warm-up.
	ProfileDir     string
	ProfileSeconds int

	Senders       int           // default 4
	Traces        int           // traces per request, default 10
	SpansPerTrace int           // default 10
	Duration      time.Duration // default 60 s
	// Warmup is sent before the measured Duration and not counted
	// (default 2 s; negative: none).
	Warmup time.Duration
	Seed   uint64

	Progress io.Writer
}

func (c *OTLPConfig) fill() error {
	switch c.Protocol {
	case "":
		c.Protocol = OTLPGRPC
	case OTLPGRPC, OTLPHTTP:
	default:
		return fmt.Errorf("OTLP protocol %q: want %s or %s", c.Protocol, OTLPGRPC, OTLPHTTP)
	}
	if c.Sync == "" {
		c.Sync = "batch"
	}
	if c.Senders <= 0 {
		c.Senders = 4
	}
	if c.Traces <= 0 {
		c.Traces = 10
	}
	if c.SpansPerTrace <= 0 {
		c.SpansPerTrace = 10
	}
	if c.Duration <= 0 {
		c.Duration = 60 * time.Second
	}
	if c.Warmup == 0 {
		c.Warmup = 2 * time.Second
	}
	if c.ProfileSeconds <= 0 {
		c.ProfileSeconds = 30
	}
	if c.ZtsdPath == "" {
		switch {
		case c.Protocol == OTLPGRPC && c.GRPCAddr == "":
			return fmt.Errorf("%w (OTLP/gRPC against a running daemon needs its otlp_grpc_listen address)", ErrNoDaemon)
		case c.Protocol == OTLPHTTP && c.Socket == "" && c.TCP == "":
			return ErrNoDaemon
		}
	}
	return nil
}

// OTLPReport is the result of an OTLP run. Field names of its JSON form are
// stable (make bench reads them).
type OTLPReport struct {
	Protocol         string `json:"otlp_protocol"`
	Sync             string `json:"sync"`
	CPUs             int    `json:"cpus"`
	Senders          int    `json:"otlp_senders"`
	TracesPerRequest int    `json:"otlp_traces_per_request"`
	SpansPerTrace    int    `json:"otlp_spans_per_trace"`
	AttrsPerSpan     int    `json:"otlp_attrs_per_span"`
	RequestBytes     int    `json:"otlp_request_bytes"`

	Seconds float64 `json:"otlp_seconds"`
	// Requests and Spans are acknowledged (durable under the sync policy)
	// requests and spans within the measured time; Errors counts failed
	// requests (the run stops at the first).
	Requests    int64   `json:"otlp_requests"`
	Spans       int64   `json:"otlp_spans"`
	SpansPerS   float64 `json:"otlp_spans_per_s"`
	RequestP50  float64 `json:"otlp_request_p50_ms"`
	RequestP99  float64 `json:"otlp_request_p99_ms"`
	RequestP999 float64 `json:"otlp_request_p999_ms"`
	// DaemonCPUSeconds is the daemon's user+system CPU time over the
	// measured time (from /proc/<pid>/stat; 0 when its pid is unknown),
	// DaemonCPUUsPerSpan the same per acknowledged span;
	// ClientCPUSeconds is this process's.
	DaemonCPUSeconds   float64 `json:"otlp_daemon_cpu_s"`
	DaemonCPUUsPerSpan float64 `json:"otlp_daemon_cpu_us_per_span"`
	ClientCPUSeconds   float64 `json:"otlp_client_cpu_s"`

	Notes []string `json:"notes,omitempty"`
}

// WriteJSON writes the report as one indented JSON object.
func (r *OTLPReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as aligned lines.
func (r *OTLPReport) WriteTable(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "OTLP/%s load: %d senders, requests of %d traces × %d spans, %d attributes per span (%d B), sync=%s, %d CPUs\n",
		r.Protocol, r.Senders, r.TracesPerRequest, r.SpansPerTrace, r.AttrsPerSpan, r.RequestBytes, r.Sync, r.CPUs)
	row := func(name, value string) { fmt.Fprintf(&b, "  %-30s %s\n", name, value) }
	row("measured", fmt.Sprintf("%.1f s, %d requests, %d spans acknowledged", r.Seconds, r.Requests, r.Spans))
	row("spans/s acknowledged", fmt.Sprintf("%.0f", r.SpansPerS))
	row("request p50 / p99 / p99.9", fmt.Sprintf("%.2f / %.2f / %.2f ms", r.RequestP50, r.RequestP99, r.RequestP999))
	if r.DaemonCPUSeconds > 0 {
		row("daemon CPU per span", fmt.Sprintf("%.1f µs (%.1f s)", r.DaemonCPUUsPerSpan, r.DaemonCPUSeconds))
	} else {
		row("daemon CPU per span", "not measured (daemon pid unknown)")
	}
	row("client CPU", fmt.Sprintf("%.1f s", r.ClientCPUSeconds))
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// RunOTLP runs the OTLP load against a daemon it starts or a running one.
func RunOTLP(ctx context.Context, cfg OTLPConfig) (*OTLPReport, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	rep := &OTLPReport{Protocol: cfg.Protocol, Sync: cfg.Sync, CPUs: runtime.NumCPU(), Senders: cfg.Senders,
		TracesPerRequest: cfg.Traces, SpansPerTrace: cfg.SpansPerTrace, AttrsPerSpan: OTLPAttrsPerSpan}
	// The runner of the main benchmark provides the daemon's start, its
	// cleanup and profiles.
	r := &runner{cfg: Config{ZtsdPath: cfg.ZtsdPath, Socket: cfg.Socket, TCP: cfg.TCP, DataDir: cfg.DataDir,
		WorkDir: cfg.WorkDir, Keep: cfg.Keep, Sync: cfg.Sync, Pprof: cfg.Pprof, ExtraConfig: cfg.ExtraConfig,
		ProfileDir: cfg.ProfileDir, ProfileSeconds: cfg.ProfileSeconds, Progress: cfg.Progress}}
	pid := cfg.PID
	grpcAddr := cfg.GRPCAddr
	if cfg.ZtsdPath != "" {
		defer r.cleanup()
		port, err := freeLoopbackPort()
		if err != nil {
			return nil, err
		}
		grpcAddr = "127.0.0.1:" + strconv.Itoa(port)
		r.cfg.ExtraConfig = fmt.Sprintf("otlp_grpc_listen = %q\n%s", grpcAddr, cfg.ExtraConfig)
		if err := r.startDaemon(ctx); err != nil {
			return nil, err
		}
		pid = r.daemon.cmd.Process.Pid
	} else {
		r.hc = newHTTPClient(cfg.Socket, cfg.TCP)
		rep.Sync = "(running daemon)"
	}
	defer r.hc.close()

	var send func(ctx context.Context, body []byte) (rejected int64, err error)
	switch cfg.Protocol {
	case OTLPGRPC:
		conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, fmt.Errorf("OTLP/gRPC client for %s: %w", grpcAddr, err)
		}
		defer conn.Close()
		send = func(ctx context.Context, body []byte) (int64, error) {
			var resp collectortrace.ExportTraceServiceResponse
			if err := conn.Invoke(ctx, collectortrace.TraceService_Export_FullMethodName, body, &resp,
				grpc.ForceCodecV2(encodedCodec{})); err != nil {
				return 0, fmt.Errorf("OTLP/gRPC Export to %s: %w", grpcAddr, err)
			}
			return resp.GetPartialSuccess().GetRejectedSpans(), nil
		}
	case OTLPHTTP:
		send = func(ctx context.Context, body []byte) (int64, error) {
			var out bytes.Buffer
			if err := r.hc.do(ctx, "POST", "/v1/traces", "application/x-protobuf", body, &out); err != nil {
				return 0, err
			}
			var resp collectortrace.ExportTraceServiceResponse
			if err := proto.Unmarshal(out.Bytes(), &resp); err != nil {
				return 0, fmt.Errorf("OTLP/HTTP answer: %w", err)
			}
			return resp.GetPartialSuccess().GetRejectedSpans(), nil
		}
	}

	base := time.Now()
	senders := make([]*otlpSender, cfg.Senders)
	for i := range senders {
		s, err := newOTLPSender(cfg, i, base)
		if err != nil {
			return nil, err
		}
		senders[i] = s
	}
	rep.RequestBytes = len(senders[0].templates[0].body)

	if cfg.Warmup > 0 {
		r.logf("OTLP/%s warm-up: %v", cfg.Protocol, cfg.Warmup)
		if _, _, err := runSenders(ctx, senders, send, cfg.Warmup, base); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	var stopProfile func() error
	if r.canProfile() {
		r.cfg.ProfileSeconds = min(cfg.ProfileSeconds, int(cfg.Duration/time.Second))
		stopProfile = r.startCPUProfile(ctx, "otlp-"+cfg.Protocol)
	}
	r.logf("OTLP/%s load: %d senders, %d traces × %d spans per request, %v", cfg.Protocol, cfg.Senders,
		cfg.Traces, cfg.SpansPerTrace, cfg.Duration)
	var d0 time.Duration
	var err error
	if pid > 0 {
		if d0, err = processCPU(pid); err != nil {
			return nil, err
		}
	}
	c0, _ := processCPU(os.Getpid())
	lat, elapsed, runErr := runSenders(ctx, senders, send, cfg.Duration, base)
	if pid > 0 {
		d1, err := processCPU(pid)
		if err != nil {
			return nil, err
		}
		rep.DaemonCPUSeconds = (d1 - d0).Seconds()
	} else {
		rep.Notes = append(rep.Notes, "daemon CPU not measured: give the running daemon's pid")
	}
	c1, _ := processCPU(os.Getpid())
	rep.ClientCPUSeconds = (c1 - c0).Seconds()
	if stopProfile != nil {
		if err := stopProfile(); err != nil && runErr == nil {
			runErr = err
		}
	}
	if runErr != nil {
		return nil, runErr
	}
	rep.Seconds = elapsed.Seconds()
	rep.Requests = int64(lat.Len())
	for _, s := range senders {
		rep.Spans += s.acked
	}
	rep.SpansPerS = div(float64(rep.Spans), rep.Seconds)
	rep.DaemonCPUUsPerSpan = div(rep.DaemonCPUSeconds*1e6, float64(rep.Spans))
	sum := lat.Summary()
	rep.RequestP50, rep.RequestP99, rep.RequestP999 = sum.P50Ms, sum.P99Ms, sum.P999Ms
	if r.daemon != nil {
		r.logf("stopping the daemon")
		if err := r.daemon.Stop(2 * time.Minute); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// runSenders runs every sender in a closed loop for d and returns the
// latencies of the requests acknowledged within it and the wall time.
func runSenders(ctx context.Context, senders []*otlpSender, send func(context.Context, []byte) (int64, error),
	d time.Duration, base time.Time) (*Latencies, time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var stop atomic.Bool
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	lats := make([]Latencies, len(senders))
	t0 := time.Now()
	var wg sync.WaitGroup
	for i, s := range senders {
		s.acked = 0
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil {
				body, spans := s.next(base)
				t := time.Now()
				rejected, err := send(ctx, body)
				if err != nil {
					cancel(err)
					return
				}
				if rejected != 0 {
					cancel(fmt.Errorf("the daemon rejected %d of %d spans of a valid request", rejected, spans))
					return
				}
				lats[i].Add(time.Since(t))
				s.acked += int64(spans)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	if err := context.Cause(ctx); err != nil {
		return nil, 0, err
	}
	var all Latencies
	for i := range lats {
		all.Merge(&lats[i])
	}
	return &all, elapsed, nil
}

// freeLoopbackPort returns a TCP port free on 127.0.0.1 at the time of the
// call.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port for OTLP/gRPC: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// encodedCodec sends an already encoded protobuf message ([]byte) as is
// and decodes answers with protobuf: the load generator spends no CPU
// encoding requests, so the machine's cores go to the daemon.
type encodedCodec struct{}

func (encodedCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("encodedCodec: cannot send %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (encodedCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("encodedCodec: cannot decode into %T", v)
	}
	return proto.Unmarshal(data.Materialize(), m)
}

func (encodedCodec) Name() string { return "proto" }

// otlpTemplate is one encoded request and where its trace ids and times
// are in the encoding, so that a new request is a copy with those fields
// rewritten.
type otlpTemplate struct {
	body []byte
	// traceIDs[t] are the offsets of trace t's 16-byte id (one per span);
	// times are the offsets of every span's start and end (fixed64).
	traceIDs [][]int
	times    []int
	spans    int
}

// otlpSender is one closed-loop sender: its templates, a buffer for the
// request in flight and its sequence number, which makes trace ids unique
// across senders and requests.
type otlpSender struct {
	id        int
	templates []*otlpTemplate
	buf       []byte
	seq       uint64
	acked     int64
}

// otlpTemplatesPerSender varies the attribute values a sender sends.
const otlpTemplatesPerSender = 8

func newOTLPSender(cfg OTLPConfig, id int, base time.Time) (*otlpSender, error) {
	s := &otlpSender{id: id}
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(id)+1000))
	for range otlpTemplatesPerSender {
		t, err := newOTLPTemplate(rng, cfg.Traces, cfg.SpansPerTrace, base)
		if err != nil {
			return nil, err
		}
		s.templates = append(s.templates, t)
	}
	return s, nil
}

// next returns the sender's next request (valid until the next call) and
// its span count. Trace ids are (sender+1)<<56 | seq<<16 | trace in their
// first 8 bytes; times move forward with the wall clock.
func (s *otlpSender) next(base time.Time) ([]byte, int) {
	t := s.templates[s.seq%uint64(len(s.templates))]
	s.seq++
	s.buf = append(s.buf[:0], t.body...)
	for i, offs := range t.traceIDs {
		hi := uint64(s.id+1)<<56 | s.seq<<16 | uint64(i)
		for _, o := range offs {
			binary.BigEndian.PutUint64(s.buf[o:], hi)
		}
	}
	shift := uint64(time.Since(base))
	for _, o := range t.times {
		binary.LittleEndian.PutUint64(s.buf[o:], binary.LittleEndian.Uint64(s.buf[o:])+shift)
	}
	return s.buf, t.spans
}

// otlpRoutes are the operations and routes of the generated spans.
var otlpRoutes = []struct{ name, route, method string }{
	{"GET /api/orders/{id}", "/api/orders/{id}", "GET"},
	{"POST /api/orders", "/api/orders", "POST"},
	{"GET /api/catalog", "/api/catalog", "GET"},
	{"PUT /api/cart/{id}", "/api/cart/{id}", "PUT"},
	{"GET /healthz", "/healthz", "GET"},
}

// newOTLPTemplate builds one request as an OpenTelemetry SDK sends it: a
// resource with the SDK's attributes, one scope, traces of spansPerTrace
// spans (a server root, its children client and internal spans) with
// OTLPAttrsPerSpan attributes each, 1% of spans failed.
func newOTLPTemplate(rng *rand.Rand, traces, spansPerTrace int, base time.Time) (*otlpTemplate, error) {
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	num := func(k string, v int64) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
	}
	svc := []string{"orders", "catalog", "cart", "payments"}[rng.IntN(4)]
	ss := &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", Version: "0.60.0"}}
	tidOf := make([][]byte, traces)
	startNS := uint64(base.UnixNano())
	for t := range traces {
		tid := make([]byte, 16)
		for i := range tid {
			tid[i] = byte(rng.Uint32())
		}
		tidOf[t] = tid
		traceStart := startNS + uint64(t)*1000
		for sp := range spansPerTrace {
			rt := otlpRoutes[rng.IntN(len(otlpRoutes))]
			sid := make([]byte, 8)
			binary.BigEndian.PutUint64(sid, rng.Uint64()|1)
			start := traceStart + uint64(sp)*10_000 + uint64(rng.IntN(1000))
			span := &tracepb.Span{TraceId: tid, SpanId: sid, Name: rt.name,
				Kind:              tracepb.Span_SpanKind(1 + min(sp, 2)),
				StartTimeUnixNano: start, EndTimeUnixNano: start + uint64(20_000+rng.IntN(5_000_000)),
				Attributes: []*commonpb.KeyValue{
					str("http.request.method", rt.method),
					str("http.route", rt.route),
					num("http.response.status_code", 200),
					str("server.address", svc+".internal"),
					str("user.id", "u-"+strconv.Itoa(rng.IntN(100_000))),
					str("db.system", "postgresql"),
				},
				Status: &tracepb.Status{},
			}
			if sp > 0 {
				span.ParentSpanId = ss.Spans[len(ss.Spans)-sp].SpanId
			}
			if rng.IntN(100) == 0 {
				span.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "upstream timeout"}
				span.Attributes[2] = num("http.response.status_code", 504)
			}
			ss.Spans = append(ss.Spans, span)
		}
	}
	req := &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			str("service.name", svc), str("service.version", "1.4.2"), str("host.name", "web-"+strconv.Itoa(rng.IntN(20))),
			str("telemetry.sdk.name", "opentelemetry"), str("telemetry.sdk.language", "go"), str("telemetry.sdk.version", "1.47.0"),
		}},
		ScopeSpans: []*tracepb.ScopeSpans{ss},
	}}}
	body, err := proto.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("OTLP request template: %w", err)
	}
	t := &otlpTemplate{body: body, spans: len(ss.Spans)}
	for _, tid := range tidOf {
		offs := findAll(body, tid)
		if len(offs) != spansPerTrace {
			return nil, fmt.Errorf("OTLP request template: trace id found %d times, want %d", len(offs), spansPerTrace)
		}
		t.traceIDs = append(t.traceIDs, offs)
	}
	for _, sp := range ss.Spans {
		for _, v := range []uint64{sp.StartTimeUnixNano, sp.EndTimeUnixNano} {
			// A fixed64 field: tag (field 7 or 8, wire type 1), then the value.
			offs := findAll(body, binary.LittleEndian.AppendUint64(nil, v))
			if len(offs) == 0 {
				return nil, fmt.Errorf("OTLP request template: span time %d not found", v)
			}
			t.times = append(t.times, offs...)
		}
	}
	// Each time is rewritten once even where two spans share a value.
	t.times = dedupInts(t.times)
	return t, nil
}

func findAll(b, sub []byte) []int {
	var offs []int
	for i := 0; ; {
		j := bytes.Index(b[i:], sub)
		if j < 0 {
			return offs
		}
		offs = append(offs, i+j)
		i += j + 1
	}
}

func dedupInts(xs []int) []int {
	seen := make(map[int]bool, len(xs))
	out := xs[:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
