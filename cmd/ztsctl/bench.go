package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ztsd/ztsd/bench"
	"github.com/ztsd/ztsd/recovery"
)

func init() { extraCommands = append(extraCommands, newBenchCmd) }

func newBenchCmd(a *app) *cobra.Command {
	var cfg bench.Config
	var asJSON bool
	var jsonOut, profileDir string
	var probeMiB int
	var noRecover bool
	var ocfg bench.OTLPConfig
	cmd := &cobra.Command{
		Use:   "bench [--ztsd PATH | --socket PATH] [--spans N] [--clients N] [--otlp grpc|http] [--json]",
		Short: "Load-test a daemon with a realistic workload and compare the results with this machine's limits",
		Long: `bench drives a real ztsd over its socket with a seeded, reproducible workload
(traces of 1–12 nested spans, six attributes per span of low and high
cardinality, 1–200 method-call records per span on a skewed law, 1% errors
with exceptions) through these phases:

  ingest      N concurrent clients send requests of --batch spans (CBOR or
              Trace JSON): spans/s, records/s, MB/s, request p50/p99
  get         random stored traces by id: p50/p99/p99.9
  search      attribute, text, duration, errors and time-range searches
              (limit 100): p50/p99
  recover     the stopped daemon's data directory is recovered (indexes
              rebuilt from the data files, as ztsctl recover does): MB/s
  space       bytes on disk per span and per record, by file, and the
              compression ratio

In the same run it measures this machine's limits — sequential write with
fsync, fsyncs per second, what the unbatched writers reach against a server
that does nothing but answer HTTP and group-commit, sequential read with
O_DIRECT, single-core LZ4 on the chunk payloads the store wrote — and
prints one table with each result next to its limit, the ratio and the
DESIGN.md budget (--json: one object).

With --ztsd (default: the ztsd next to this ztsctl, when --socket and --tcp
are not given) bench starts the daemon on a new data directory with a
generated config and stops it before recovery. With --socket it uses a
running daemon; then recovery is skipped and bytes on disk need --data-dir.

With --otlp grpc|http bench runs only the OTLP load instead: --senders
concurrent senders, each in a closed loop for --duration (after --warmup),
send OTLP requests (binary protobuf, as the OpenTelemetry SDKs do) of
--otlp-traces traces × --otlp-spans spans with 6 attributes per span, over
OTLP/gRPC (a started daemon listens on a free loopback port; a running
one's address is --otlp-grpc) or OTLP/HTTP (POST /v1/traces on the
socket). It prints acknowledged spans/s, request p50/p99 and the daemon's
CPU time per span (utime+stime from /proc; a running daemon needs
--daemon-pid). --json field names start with otlp_.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("otlp") {
				return runOTLPBench(cmd, a, cfg, ocfg, profileDir, asJSON, jsonOut)
			}
			if cfg.Format != bench.FormatCBOR && cfg.Format != bench.FormatJSON {
				return usageErr("--format %q: want %s or %s", cfg.Format, bench.FormatCBOR, bench.FormatJSON)
			}
			cfg.Socket, cfg.TCP = "", ""
			if !cmd.Flags().Changed("ztsd") && (cmd.Flags().Changed("socket") || a.tcp != "") {
				cfg.Socket, cfg.TCP = a.socket, a.tcp
			} else if cfg.ZtsdPath == "" {
				p, err := findZtsd()
				if err != nil {
					return usageErr("%v; give --ztsd PATH, or --socket PATH for a running daemon", err)
				}
				cfg.ZtsdPath = p
			}
			if profileDir != "" {
				cfg.ProfileDir, cfg.Pprof = profileDir, true
			}
			cfg.ProbeBytes = int64(probeMiB) << 20
			if !noRecover {
				cfg.Recover = recoverDataDir
			}
			cfg.OTLPSenders = ocfg.Senders
			cfg.Progress = a.stderr
			rep, err := bench.Run(cmd.Context(), cfg)
			if errors.Is(err, bench.ErrNoDaemon) {
				return usageErr("%v", err)
			}
			if err != nil {
				return &exitError{exitFailure, fmt.Errorf("bench: %w", err)}
			}
			if jsonOut != "" {
				f, err := os.Create(jsonOut)
				if err != nil {
					return &exitError{exitFailure, err}
				}
				err = rep.WriteJSON(f)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return &exitError{exitFailure, fmt.Errorf("write %s: %w", jsonOut, err)}
				}
			}
			if asJSON {
				return rep.WriteJSON(a.stdout)
			}
			return rep.WriteTable(a.stdout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.ZtsdPath, "ztsd", "", "start this ztsd binary on a new data directory (default: ztsd next to ztsctl, or on $PATH)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "data directory of the started daemon (must be empty; default: a temp dir), or of the running one")
	f.StringVar(&cfg.WorkDir, "work-dir", "", "directory for the started daemon's config and log (default: a new temp dir)")
	f.BoolVar(&cfg.Keep, "keep", false, "keep the work directory (data, config, log) afterwards")
	f.StringVar(&cfg.Sync, "sync", "batch", "sync policy of the started daemon: batch, always or none")
	f.StringVar(&cfg.ExtraConfig, "daemon-config", "", "extra TOML lines for the started daemon's config")
	f.BoolVar(&cfg.Pprof, "pprof", false, "serve /debug/pprof/ in the started daemon")
	f.StringVar(&profileDir, "daemon-profile", "", "save the daemon's CPU profiles of the ingest, unbatched and read phases, its heap profile and a runtime trace of the unbatched phase (unbatched.trace, for go tool trace) here (turns on --pprof)")
	f.IntVar(&cfg.ProfileSeconds, "profile-seconds", 30, "length of each daemon CPU profile")
	f.Uint64Var(&cfg.Workload.Seed, "seed", 1, "workload seed: equal seeds send equal traffic")
	f.IntVar(&cfg.Spans, "spans", 200_000, "spans to ingest")
	f.BoolVar(&cfg.Workload.SpansOnly, "spans-only", false, "spans of the OTLP shape: one root record each, no nested method calls")
	f.IntVar(&cfg.Clients, "clients", 8, "concurrent ingest clients")
	f.IntVar(&cfg.BatchSpans, "batch", 500, "spans per ingest request")
	f.StringVar(&cfg.Format, "format", bench.FormatCBOR, "ingest body format: cbor (application/cbor) or json (Trace JSON lines)")
	f.IntVar(&cfg.OtherFormatSpans, "other-format-spans", 0, "spans then sent batched in the other format (json after cbor), to the same daemon (default spans/4; negative: none)")
	f.IntVar(&cfg.UnbatchedClients, "unbatched-clients", 2, "clients of the unbatched phase (one span per request)")
	f.DurationVar(&cfg.UnbatchedFor, "unbatched-for", 10*time.Second, "length of the unbatched phase (negative: skipped)")
	f.DurationVar(&cfg.OTLPFor, "otlp-for", 20*time.Second, "length of each OTLP load (gRPC, then HTTP; --senders senders) of the full run, each on a daemon of its own (negative: skipped)")
	f.IntVar(&cfg.SpaceSpans, "space-spans", 200_000, "six-attribute spans without method calls stored by a daemon of their own, for the bytes per span (negative: skipped)")
	f.BoolVar(&cfg.SkipRestart, "no-restart", false, "skip the kill -9 and restart after the read phases")
	f.BoolVar(&cfg.Existing, "existing", false, "--data-dir already holds the store of an earlier run with equal --seed, --spans, --batch and --format: read it (nothing is ingested)")
	f.BoolVar(&cfg.KeySpace, "key-space", false, "measure the index bytes of each kind of key (rewrites each index three times)")
	f.DurationVar(&cfg.Settle, "settle", 0, "after ingest, run the gets once, then wait up to this long for the indexes' compactions to finish before the read phases (0: read right after ingest)")
	f.IntVar(&cfg.Gets, "gets", 20_000, "get-by-id requests")
	f.IntVar(&cfg.GetClients, "get-clients", 1, "concurrent get-by-id clients")
	f.IntVar(&cfg.Searches, "searches", 2_000, "searches of each kind")
	f.IntVar(&probeMiB, "probe-mib", 256, "size of the disk probe file in MiB")
	f.BoolVar(&cfg.SkipProbes, "no-probes", false, "skip the disk probes")
	f.BoolVar(&noRecover, "no-recover", false, "skip the recovery phase")
	f.BoolVar(&asJSON, "json", false, "print the report as one JSON object instead of the table")
	f.StringVar(&jsonOut, "json-out", "", "also write the JSON report to this file")
	f.StringVar(&ocfg.Protocol, "otlp", bench.OTLPGRPC, "run only the OTLP load, over grpc (OTLP/gRPC) or http (OTLP/HTTP protobuf)")
	f.IntVar(&ocfg.Senders, "senders", 4, "OTLP: concurrent closed-loop senders")
	f.IntVar(&ocfg.Traces, "otlp-traces", 10, "OTLP: traces per request")
	f.IntVar(&ocfg.SpansPerTrace, "otlp-spans", 10, "OTLP: spans per trace")
	f.DurationVar(&ocfg.Duration, "duration", 60*time.Second, "OTLP: measured length of the closed loop")
	f.DurationVar(&ocfg.Warmup, "warmup", 2*time.Second, "OTLP: unmeasured load before it (0: none)")
	f.StringVar(&ocfg.GRPCAddr, "otlp-grpc", "", "OTLP: the running daemon's otlp_grpc_listen address (host:port)")
	f.IntVar(&ocfg.PID, "daemon-pid", 0, "OTLP: the running daemon's pid, for its CPU time")
	return cmd
}

// runOTLPBench is `ztsctl bench --otlp`: the daemon flags of cfg with the
// OTLP load of ocfg.
func runOTLPBench(cmd *cobra.Command, a *app, cfg bench.Config, ocfg bench.OTLPConfig, profileDir string, asJSON bool, jsonOut string) error {
	if ocfg.Protocol != bench.OTLPGRPC && ocfg.Protocol != bench.OTLPHTTP {
		return usageErr("--otlp %q: want %s or %s", ocfg.Protocol, bench.OTLPGRPC, bench.OTLPHTTP)
	}
	if ocfg.Warmup == 0 {
		ocfg.Warmup = -1 // --warmup 0: none
	}
	if !cmd.Flags().Changed("ztsd") && (cmd.Flags().Changed("socket") || a.tcp != "" || ocfg.GRPCAddr != "") {
		ocfg.Socket, ocfg.TCP = a.socket, a.tcp
	} else if ocfg.ZtsdPath = cfg.ZtsdPath; ocfg.ZtsdPath == "" {
		p, err := findZtsd()
		if err != nil {
			return usageErr("%v; give --ztsd PATH, or --socket PATH / --otlp-grpc ADDR for a running daemon", err)
		}
		ocfg.ZtsdPath = p
	}
	ocfg.DataDir, ocfg.WorkDir, ocfg.Keep, ocfg.Sync = cfg.DataDir, cfg.WorkDir, cfg.Keep, cfg.Sync
	ocfg.Pprof, ocfg.ExtraConfig, ocfg.Seed = cfg.Pprof, cfg.ExtraConfig, cfg.Workload.Seed
	if profileDir != "" {
		ocfg.ProfileDir, ocfg.Pprof = profileDir, true
	}
	ocfg.ProfileSeconds = cfg.ProfileSeconds
	ocfg.Progress = a.stderr
	rep, err := bench.RunOTLP(cmd.Context(), ocfg)
	if errors.Is(err, bench.ErrNoDaemon) {
		return usageErr("%v", err)
	}
	if err != nil {
		return &exitError{exitFailure, fmt.Errorf("bench: %w", err)}
	}
	if jsonOut != "" {
		f, err := os.Create(jsonOut)
		if err != nil {
			return &exitError{exitFailure, err}
		}
		err = rep.WriteJSON(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return &exitError{exitFailure, fmt.Errorf("write %s: %w", jsonOut, err)}
		}
	}
	if asJSON {
		return rep.WriteJSON(a.stdout)
	}
	return rep.WriteTable(a.stdout)
}

// findZtsd looks for the daemon next to this executable, then on $PATH.
func findZtsd() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "ztsd")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("ztsd")
	if err != nil {
		return "", errors.New("no ztsd binary next to ztsctl or on $PATH")
	}
	return p, nil
}

// recoverDataDir is the recovery phase: what `ztsctl recover --data-dir`
// runs, in process, with its garbage collector setting (offlineGC; the
// earlier setting is restored afterwards).
func recoverDataDir(ctx context.Context, dir string) (int64, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Hour)
	defer cancel()
	defer offlineGC()()
	rep, err := recovery.RecoverDataDir(ctx, dir, recovery.Options{})
	if err != nil {
		return 0, 0, err
	}
	if rep.ChunksBad > 0 {
		return rep.DataBytes, rep.Spans, fmt.Errorf("recovery found %d bad regions in a freshly written store", rep.ChunksBad)
	}
	return rep.DataBytes, rep.Spans, nil
}
