// Command ztsd is the trace store daemon: it takes the data directory's
// lock, opens every store, and serves the socket API until SIGTERM/SIGINT.
// SIGHUP reloads the parts of the config that can change live (retention,
// request limits, access lists, log level) and logs what changed.
//
// With no arguments it runs on the embedded default config: data in
// ./ztsd-data, socket ./ztsd.sock. Under systemd it reads
// /etc/ztsd/ztsd.toml (--config), reports READY/RELOADING/STOPPING with
// sd_notify, and accepts a socket-activated listener (LISTEN_FDS).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"os/user"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/ingest/otlp"
	"github.com/ztsd/ztsd/ingest/zorka"
	buildversion "github.com/ztsd/ztsd/internal/version"
	"github.com/ztsd/ztsd/jaegerapi"
	"github.com/ztsd/ztsd/membudget"
	"github.com/ztsd/ztsd/server"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/tempoapi"
	"github.com/ztsd/ztsd/tiering"
	"github.com/ztsd/ztsd/trace"
	"github.com/ztsd/ztsd/webui"
)

// version is set by the linker (-X main.version=...).
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

type flags struct {
	configPath, dataDir, socket, listen, logLevel string
	showVersion, query                            bool
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("ztsd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.configPath, "config", "", "TOML config file (default: the embedded config: data in ./ztsd-data, socket ./ztsd.sock)")
	fs.StringVar(&f.dataDir, "data-dir", "", "data directory (overrides data_dir)")
	fs.StringVar(&f.socket, "socket", "", "unix socket path (overrides socket)")
	fs.StringVar(&f.listen, "listen", "", "optional TCP address for the same API, e.g. 127.0.0.1:7070 (overrides listen)")
	fs.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (overrides log_level)")
	fs.BoolVar(&f.showVersion, "version", false, "print the version and exit")
	fs.BoolVar(&f.query, "query", false, "run as a query node: no local writes, serve every node's stores in [object_store]'s bucket (query_only = true)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return f, nil
}

func loadConfig(f flags) (config.Config, error) {
	cfg := config.Default()
	if f.configPath != "" {
		var err error
		if cfg, err = config.Load(f.configPath); err != nil {
			return cfg, err
		}
	}
	if f.dataDir != "" {
		cfg.DataDir = f.dataDir
	}
	if f.socket != "" {
		cfg.Socket = f.socket
	}
	if f.listen != "" {
		cfg.Listen = f.listen
	}
	if f.logLevel != "" {
		cfg.LogLevel = f.logLevel
	}
	if f.query {
		cfg.QueryOnly = true
	}
	return cfg, cfg.Validate()
}

func run(args []string, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "ztsd:", err)
		return 2
	}
	if f.showVersion {
		fmt.Println(buildversion.String("ztsd", version))
		return 0
	}
	cfg, err := loadConfig(f)
	if err != nil {
		fmt.Fprintln(stderr, "ztsd: config:", err)
		return 2
	}
	var level slog.LevelVar
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		fmt.Fprintf(stderr, "ztsd: log_level %q: %v\n", cfg.LogLevel, err)
		return 2
	}
	var handler slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: &level})
	if cfg.LogFormat == "json" {
		handler = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: &level})
	}
	log := slog.New(handler)
	d := &daemonState{cfg: cfg, flags: f, log: log, level: &level}
	if err := d.serve(); err != nil {
		log.Error("ztsd stopped", "err", err)
		return 1
	}
	return 0
}

type daemonState struct {
	cfg    config.Config
	flags  flags
	log    *slog.Logger
	level  *slog.LevelVar
	db     *storedir.DB
	srv    *server.Server
	budget *membudget.Budget
	conns  *server.ConnLimiter
	// tiering uploads sealed stores to the bucket (nil without one);
	// uploader is what storedir's OnSealed wakes.
	tiering  *tieringState
	uploader atomic.Pointer[tiering.Uploader]
	// query is a query node's bucket and discovery (nil otherwise).
	query *queryState
}

func storeOptions(cfg config.Config, log *slog.Logger, obs storedir.Observer) (storedir.Options, error) {
	o := storedir.DefaultOptions()
	comp, err := chunk.ParseCompression(cfg.Store.Compression)
	if err != nil {
		return o, err
	}
	o.Chunk = chunk.Options{Compression: comp, Checksums: cfg.Store.Checksums}
	if o.Sync, err = storedir.ParseSyncPolicy(cfg.Sync); err != nil {
		return o, err
	}
	o.BatchMaxDelay = time.Duration(cfg.BatchMaxDelay)
	o.MaxStoreSize = int64(cfg.Store.MaxStoreSize)
	o.MaxStoreAge = time.Duration(cfg.Store.MaxStoreAge)
	o.ChunkTargetSize = int(cfg.Store.ChunkTargetSize)
	o.IndexCacheBytes = cfg.IndexCacheBytes()
	o.Retention = retention(cfg)
	// Reading the data files applies no request limit: a store keeps what
	// was accepted under the limits in force when it was written.
	o.Limits = trace.DefaultLimits()
	o.Logger = log
	o.Observer = obs
	return o, nil
}

func retention(cfg config.Config) storedir.Retention {
	return storedir.Retention{MaxStores: cfg.Retention.MaxStores, MaxTotalSize: int64(cfg.Retention.MaxTotalSize),
		MaxAge: time.Duration(cfg.Retention.MaxAge)}
}

// decodeLimits bound what the request body decoders build; the documented
// per-span limits are ingestLimits, checked after decoding.
func decodeLimits(cfg config.Config) trace.Limits {
	l := trace.DefaultLimits()
	if cfg.Limits.MaxDepth > 0 {
		l.MaxDepth = cfg.Limits.MaxDepth
	}
	return l
}

// ingestLimits are the [limits] every write path checks per span.
func ingestLimits(cfg config.Config) trace.IngestLimits {
	return trace.IngestLimits{MaxAttrs: cfg.Limits.MaxAttrs, MaxStringSize: int(cfg.Limits.MaxStringSize),
		MaxRecordsPerSpan: cfg.Limits.MaxRecordsPerSpan, MaxDepth: cfg.Limits.MaxDepth}
}

func serverLimits(cfg config.Config) server.Limits {
	l := server.DefaultLimits()
	l.MaxBodySize = int64(cfg.Limits.MaxBodySize)
	l.MaxTracesPerRequest = cfg.Limits.MaxTracesPerRequest
	l.MaxSearchLimit = cfg.Limits.MaxSearchLimit
	l.Decode = decodeLimits(cfg)
	l.Ingest = ingestLimits(cfg)
	return l
}

// access is root and the daemon's own uid (always allowed) plus the
// configured lists.
func access(cfg config.Config) server.Access {
	a := server.DefaultAccess()
	a.ReadUIDs, a.WriteUIDs = cfg.Access.ReadUIDs, cfg.Access.WriteUIDs
	a.ReadGIDs, a.WriteGIDs = cfg.Access.ReadGIDs, cfg.Access.WriteGIDs
	return a
}

// daemonGCPercent is the garbage collector's target (GOGC) of the daemon
// unless the GOGC environment variable sets one. At Go's default of 100 the
// collector (marking and sweeping) took ~7% of the daemon's CPU under OTLP
// ingest, whose heap is mostly short-lived request and chunk buffers; at 200
// it runs half as often, for ~0.5 µs less CPU per OTLP span and ~30% more
// peak RSS (~130 -> ~170 MB). memory_budget is the runtime's soft memory
// limit, so as the heap nears it the collector runs as often as it must
// whatever this target.
const daemonGCPercent = 200

// daemonGC sets the collector's target to daemonGCPercent unless
// getenv("GOGC") is set (the runtime has then applied it already).
func daemonGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(daemonGCPercent)
	}
}

// pprofRoutes serve net/http/pprof behind the admin access check (the
// peers that may write).
func pprofRoutes() []server.Route {
	return []server.Route{
		{Pattern: "GET /debug/pprof/", Access: server.AccessAdmin, Handler: http.HandlerFunc(pprof.Index)},
		{Pattern: "GET /debug/pprof/cmdline", Access: server.AccessAdmin, Handler: http.HandlerFunc(pprof.Cmdline)},
		{Pattern: "GET /debug/pprof/profile", Access: server.AccessAdmin, Handler: http.HandlerFunc(pprof.Profile)},
		{Pattern: "GET /debug/pprof/symbol", Access: server.AccessAdmin, Handler: http.HandlerFunc(pprof.Symbol)},
		{Pattern: "POST /debug/pprof/symbol", Access: server.AccessAdmin, Handler: http.HandlerFunc(pprof.Symbol)},
		{Pattern: "GET /debug/pprof/trace", Access: server.AccessAdmin, Handler: http.HandlerFunc(pprof.Trace)},
	}
}

func (d *daemonState) serve() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	metrics := server.NewMetrics(nil)
	opts, err := storeOptions(d.cfg, d.log, metrics)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if tieringOn(d.cfg) {
		if err := d.openBucket(ctx, &opts); err != nil {
			return fmt.Errorf("object_store: %w", err)
		}
	}
	if d.cfg.QueryOnly {
		if err := d.openQueryBucket(ctx, &opts); err != nil {
			return fmt.Errorf("object_store: %w", err)
		}
	}
	t0 := time.Now()
	d.db, err = storedir.Open(ctx, d.cfg.DataDir, opts)
	if err != nil {
		return err
	}
	defer d.db.Close()
	metrics = server.NewMetrics(d.db)
	// The committer reports into the metrics that /metrics serves.
	d.db.SetObserver(metrics)
	d.log.Info("stores open", "data_dir", d.cfg.DataDir, "stores", len(d.db.Stores()), "took", time.Since(t0).Round(time.Millisecond))
	if tieringOn(d.cfg) {
		if err := d.startTiering(metrics.Registry()); err != nil {
			return fmt.Errorf("object_store: %w", err)
		}
		defer d.stopTiering()
	}
	if d.query != nil {
		d.startQuery()
		defer d.stopQuery()
	}

	// The memory budget starts with what the daemon holds once its stores
	// are open (their indexes' caches fill lazily: counting their capacity
	// per store would refuse every write on a data directory of many
	// stores).
	d.budget = membudget.New(int64(d.cfg.Limits.MemoryBudget))
	debug.SetMemoryLimit(int64(d.cfg.Limits.MemoryBudget))
	daemonGC(os.Getenv)
	baseline := heldMemory()
	d.budget.Reserve(baseline)
	d.log.Info("memory budget", "memory_budget", int64(d.cfg.Limits.MemoryBudget), "baseline", baseline)
	d.conns = server.NewConnLimiter(d.cfg.Limits.MaxConnections)
	registerResourceMetrics(metrics.Registry(), d.budget, d.conns)

	sessions := zorka.NewSessions(zorka.Options{IdleTimeout: time.Duration(d.cfg.Zorka.SessionIdleTimeout), Budget: d.budget})
	otlpOpt := otlp.Options{MaxBodySize: int64(d.cfg.Limits.MaxBodySize), MaxSpansPerRequest: d.cfg.Limits.MaxTracesPerRequest,
		Limits: decodeLimits(d.cfg), Status: server.StatusOf, Logger: d.log,
		Ingest: func() trace.IngestLimits { return d.srv.Limits().Ingest }, Budget: d.budget}
	counted := server.IngestCounter{Appender: d.db, Metrics: metrics}
	var routes []server.Route
	if d.cfg.Pprof {
		routes = pprofRoutes()
	}
	// The Jaeger and Tempo query APIs (Grafana, Jaeger UI): read access.
	tempo := tempoapi.New(d.db, d.log)
	routes = append(routes, jaegerapi.New(d.db, d.log, tempo.TraceV1Handler()).Routes()...)
	routes = append(routes, tempo.Routes()...)
	uiOn := d.cfg.UI && d.cfg.Listen != ""
	if uiOn {
		ui, err := webui.New()
		if err != nil {
			return err
		}
		routes = append(routes, ui.Routes()...)
	}
	d.srv = server.New(d.db, server.Options{Limits: serverLimits(d.cfg), Access: access(d.cfg), Logger: d.log, Metrics: metrics,
		Zorka: sessions, OTLP: otlp.NewHTTPHandler(counted, otlpOpt), Routes: routes, Budget: d.budget,
		QueryOnly: d.cfg.QueryOnly, RemoteStores: d.remoteStoreCount()})
	if d.cfg.OTLPGRPCListen != "" && d.cfg.QueryOnly {
		d.log.Warn("query node: otlp_grpc_listen is not opened (writes go to an ingesting node)", "otlp_grpc_listen", d.cfg.OTLPGRPCListen)
	} else if d.cfg.OTLPGRPCListen != "" {
		gl, err := listenGRPC(d.cfg.OTLPGRPCListen)
		if err != nil {
			return err
		}
		// The connection cap counts gRPC connections too; the timeouts
		// are the API's (see otlp.GRPCConnLimits).
		gl = d.conns.GRPCListener(gl)
		gs := grpc.NewServer(append(otlp.GRPCServerOptions(otlpOpt), otlp.GRPCConnOptions(otlp.GRPCConnLimits{
			ReadTimeout: time.Duration(d.cfg.Limits.ReadTimeout), IdleTimeout: time.Duration(d.cfg.Limits.IdleTimeout)})...)...)
		otlp.Register(gs, counted, otlpOpt)
		go func() {
			if err := gs.Serve(gl); err != nil {
				d.log.Error("OTLP/gRPC listener stopped", "err", err)
			}
		}()
		defer gs.GracefulStop()
		d.log.Info("listening for OTLP/gRPC", "addr", gl.Addr().String())
	}
	go func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if n := sessions.DropIdle(); n > 0 {
					d.log.Info("dropped idle agent sessions", "count", n)
				}
			}
		}
	}()
	readTimeout := time.Duration(d.cfg.Limits.ReadTimeout)
	httpSrv := &http.Server{Handler: d.srv.Handler(),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return server.ConnContext(ctx, server.UnwrapConn(c))
		},
		ReadHeaderTimeout: min(10*time.Second, readTimeout), ReadTimeout: readTimeout,
		IdleTimeout: time.Duration(d.cfg.Limits.IdleTimeout),
		ErrorLog:    slog.NewLogLogger(d.log.Handler(), slog.LevelWarn)}

	listeners, cleanup, err := d.listen()
	if err != nil {
		return err
	}
	defer cleanup()
	errc := make(chan error, len(listeners))
	for _, l := range listeners {
		l = d.conns.Listener(l)
		go func(l net.Listener) {
			if err := httpSrv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serve %s: %w", l.Addr(), err)
			}
		}(l)
	}
	if uiOn {
		d.log.Info("web UI", "url", "http://"+listeners[len(listeners)-1].Addr().String()+"/")
	}
	go d.housekeeping(ctx)
	daemon.SdNotify(false, daemon.SdNotifyReady)
	d.log.Info("ztsd ready", "version", buildversion.String("ztsd", version), "sync", d.cfg.Sync, "pid", os.Getpid())

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	for {
		select {
		case err := <-errc:
			d.shutdown(httpSrv)
			return err
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				d.reload()
				continue
			}
			d.log.Info("shutting down", "signal", sig.String())
			daemon.SdNotify(false, daemon.SdNotifyStopping)
			d.shutdown(httpSrv)
			return nil
		}
	}
}

// shutdown stops accepting, lets in-flight requests finish (30 s at most),
// then closes the stores (flush, fsync, config.props).
func (d *daemonState) shutdown(httpSrv *http.Server) {
	d.srv.BeginShutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := httpSrv.Shutdown(ctx); err != nil {
		d.log.Warn("in-flight requests did not finish in time", "err", err)
	}
	d.stopTiering()
	d.stopQuery()
	if err := d.db.Close(); err != nil {
		d.log.Error("closing stores", "err", err)
	}
}

// reload applies a changed config file: retention, limits, access lists and
// log level change live; anything else needs a restart and is logged.
func (d *daemonState) reload() {
	daemon.SdNotify(false, daemon.SdNotifyReloading+"\nMONOTONIC_USEC="+monotonicUsec())
	defer daemon.SdNotify(false, daemon.SdNotifyReady)
	next, err := loadConfig(d.flags)
	if err != nil {
		d.log.Error("reload: config rejected; keeping the running one", "err", err)
		return
	}
	changed := d.cfg.Diff(next)
	if len(changed) == 0 {
		d.log.Info("reload: config unchanged")
		return
	}
	var lv slog.LevelVar
	if err := lv.UnmarshalText([]byte(next.LogLevel)); err == nil {
		d.level.Set(lv.Level())
	}
	d.srv.SetLimits(serverLimits(next))
	d.srv.SetAccess(access(next))
	d.conns.SetMax(next.Limits.MaxConnections)
	d.budget.SetLimit(int64(next.Limits.MemoryBudget))
	debug.SetMemoryLimit(int64(next.Limits.MemoryBudget))
	switch {
	case d.tiering != nil && d.tiering.up != nil:
		d.tiering.up.SetLimits(localLimits(next), retentionLimits(next))
	case d.query != nil:
		// A query node deletes nothing: [retention] is the ingesting nodes'.
	default:
		if err := d.db.SetRetention(retention(next)); err != nil {
			d.log.Error("reload: applying retention", "err", err)
		}
	}
	live := next
	// Of [object_store], the local_max_* limits change live.
	live.ObjectStore, live.QueryOnly = d.cfg.ObjectStore, d.cfg.QueryOnly
	live.ObjectStore.LocalMaxStores, live.ObjectStore.LocalMaxTotalSize = next.ObjectStore.LocalMaxStores, next.ObjectStore.LocalMaxTotalSize
	live.ObjectStore.LocalMaxAge = next.ObjectStore.LocalMaxAge
	// Keys that need a restart keep their running values.
	live.DataDir, live.Socket, live.Listen, live.Sync, live.Store = d.cfg.DataDir, d.cfg.Socket, d.cfg.Listen, d.cfg.Sync, d.cfg.Store
	live.UI = d.cfg.UI
	live.BatchMaxDelay, live.OTLPGRPCListen = d.cfg.BatchMaxDelay, d.cfg.OTLPGRPCListen
	live.Limits.ReadTimeout, live.Limits.IdleTimeout = d.cfg.Limits.ReadTimeout, d.cfg.Limits.IdleTimeout
	restart := live.Diff(next)
	d.cfg = live
	d.log.Info("reload: applied", "changed", changed, "need_restart", restart)
}

// registerResourceMetrics exports the memory budget and the connection cap.
func registerResourceMetrics(reg *prometheus.Registry, b *membudget.Budget, c *server.ConnLimiter) {
	budget := func(pick func(used, peak, limit int64) int64) func() float64 {
		return func() float64 { return float64(pick(b.Stats())) }
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ztsd_memory_budget_bytes",
			Help: "limits.memory_budget."}, budget(func(_, _, l int64) int64 { return l })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ztsd_memory_budget_used_bytes",
			Help: "Bytes of the memory budget reserved now (request bodies, agent symbols, baseline)."}, budget(func(u, _, _ int64) int64 { return u })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ztsd_memory_budget_peak_bytes",
			Help: "Most bytes of the memory budget ever reserved at once."}, budget(func(_, p, _ int64) int64 { return p })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ztsd_connections_open",
			Help: "Connections open (unix socket, TCP and OTLP/gRPC), counted against limits.max_connections."}, func() float64 { return float64(c.Open()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ztsd_connections_refused_total",
			Help: "Connections refused past limits.max_connections (HTTP: 503; OTLP/gRPC: UNAVAILABLE)."}, func() float64 { return float64(c.Refused()) }),
	)
}

// heldMemory is the memory the Go runtime holds from the OS and has not
// returned (what RSS is made of, apart from code).
func heldMemory() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.Sys - ms.HeapReleased)
}

func monotonicUsec() string {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return "0"
	}
	return strconv.FormatInt(ts.Sec*1e6+ts.Nsec/1e3, 10)
}

// housekeeping applies age-based retention periodically.
func (d *daemonState) housekeeping(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := d.db.ApplyRetention(); err != nil {
				d.log.Error("retention", "err", err)
			}
		}
	}
}

// listen returns the API listeners: inherited ones (systemd socket
// activation) or a fresh unix socket, plus the optional TCP listener.
func (d *daemonState) listen() ([]net.Listener, func(), error) {
	var ls []net.Listener
	cleanup := func() {}
	inherited, err := activation.Listeners()
	if err != nil {
		return nil, cleanup, fmt.Errorf("socket activation: %w", err)
	}
	for _, l := range inherited {
		if l != nil {
			ls = append(ls, l)
		}
	}
	if len(ls) > 0 {
		d.log.Info("serving on sockets passed by the service manager", "count", len(ls))
	} else {
		ul, err := listenUnix(d.cfg.Socket, d.cfg.SocketMode, d.cfg.SocketGroup)
		if err != nil {
			return nil, cleanup, err
		}
		ls = append(ls, ul)
		path := d.cfg.Socket
		cleanup = func() { os.Remove(path) }
		d.log.Info("listening", "socket", path)
	}
	if d.cfg.Listen != "" {
		tl, err := net.Listen("tcp", d.cfg.Listen)
		if err != nil {
			cleanup()
			return nil, func() {}, fmt.Errorf("listen %s: %w", d.cfg.Listen, err)
		}
		ls = append(ls, tl)
		d.log.Info("listening", "tcp", tl.Addr().String())
	}
	return ls, cleanup, nil
}

// listenGRPC opens the OTLP/gRPC listener: "unix:/path" for a unix socket
// (a stale file is replaced as for the API socket), else a TCP address.
func listenGRPC(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		return listenUnix(path, "0660", "")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("otlp_grpc_listen %s: %w", addr, err)
	}
	return l, nil
}

// listenUnix creates the socket, removing a stale socket file only when no
// daemon answers on it, and sets its mode and group.
func listenUnix(path, mode, group string) (net.Listener, error) {
	if _, err := os.Lstat(path); err == nil {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("socket %s: another daemon is answering on it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	perm, err := strconv.ParseUint(mode, 8, 32)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("socket_mode %q: %w", mode, err)
	}
	if err := os.Chmod(path, os.FileMode(perm)); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	if group != "" {
		g, err := user.LookupGroup(group)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("socket_group %q: %w", group, err)
		}
		gid, _ := strconv.Atoi(g.Gid)
		if err := os.Chown(path, -1, gid); err != nil {
			l.Close()
			return nil, fmt.Errorf("chown %s to group %s: %w", path, group, err)
		}
	}
	return l, nil
}
