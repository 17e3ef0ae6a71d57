package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/ztsd/ztsd/bucketadmin"
	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/migrate"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/storedir"
)

func init() { extraCommands = append(extraCommands, newMigrateCmd) }

func newMigrateCmd(a *app) *cobra.Command {
	var from, dropAttrs, fromBucket []string
	var to, compression, checksums, since, until, downloadDir string
	var bf bucketFlags
	var inPlace, asJSON, verbose bool
	var batchBytes int
	var maxStoreSize int64
	cmd := &cobra.Command{
		Use:   "migrate (--from DATA_DIR | --from-bucket NODE [--config ztsd.toml])... (--to DATA_DIR | --in-place) [--compression none|lz4|zlib|zstd] [--checksums on|off] [--since T] [--until T] [--drop-attr k=v]... [--json]",
		Short: "Rewrite stopped data directories: change compression or checksums, upgrade old stores, merge, copy a time range, drop traces",
		Long: `migrate works offline: it refuses to run while a daemon holds a --from directory.
It reads every store of the --from data directories (in order; their data files,
not their indexes) and writes the traces into --to, a new or empty data directory,
through the same code the daemon writes with:

  --compression, --checksums  the target's data-file options (default: those of
                              the first source store)
  stores of older format versions are upgraded to the current one
  --from repeated             merges directories; a span stored in several of
                              them (or twice in one) is written once, so traces
                              split over directories come out whole
  --since, --until T          copy only traces whose earliest span starts in
                              [since, until) (RFC 3339, ns since the epoch, or a
                              duration ago like 72h)
  --drop-attr k=v             leave out every trace with a span carrying k=v (a
                              span attribute or one of its root record)

Then it verifies: every trace of the sources that the filters keep is read back
from the target, index included, and compared span by span; the target's data
files hold nothing else and nothing twice; and what ` + "`ztsctl verify`" + ` checks passes.
Only then is the migration complete (the target gets .migrate-report.json).

--in-place rewrites the first --from directory: it migrates into DIR.migrate-new,
verifies, renames DIR to DIR.migrate-old and DIR.migrate-new to DIR, and removes
DIR.migrate-old. Any further --from directories are merged into DIR.

--from-bucket NODE copies the stores NODE uploaded to the bucket of --config's
[object_store] (or --bucket, --endpoint, ...; credentials from the environment)
back into a local directory: their data files and config.props are downloaded
(SHA-256 checked against the manifests) into --download-dir, default
TO.bucket-download, one data directory per node, which then are sources like
--from directories (after them, in the order given). It is removed once the
migration is complete. A store that does not match its manifest stops the
migration: repair it first with ztsctl recover --remote NODE/STOREID.

It can be interrupted at any moment (Ctrl-C, kill -9, power loss): re-running the
same command resumes from its last checkpoint, and also finishes an interrupted
in-place swap. A progress bar with throughput and ETA is drawn on a terminal.

Exit status: 0 done (or already done), 1 a --from directory does not exist,
2 bad usage, 3 failure: a daemon holds a directory, I/O error, verification failed
(the report lists the problems), or interrupted (re-run to resume).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opt := migrate.Options{Sources: from, Target: to, InPlace: inPlace, BatchBytes: batchBytes, MaxStoreSize: maxStoreSize}
			if len(from) == 0 && len(fromBucket) == 0 {
				return usageErr("migrate needs --from DATA_DIR or --from-bucket NODE")
			}
			if (to == "") == !inPlace {
				return usageErr("migrate needs exactly one of --to DATA_DIR and --in-place")
			}
			if len(fromBucket) == 0 && (bf.used(cmd) || downloadDir != "") {
				return usageErr("--download-dir and the bucket flags need --from-bucket NODE")
			}
			if len(fromBucket) > 0 && inPlace {
				return usageErr("--from-bucket copies into a new directory: use --to DATA_DIR, not --in-place")
			}
			if compression != "" {
				c, err := chunk.ParseCompression(compression)
				if err != nil {
					return usageErr("--compression %q: want none, lz4, zlib or zstd", compression)
				}
				opt.Compression = &c
			}
			switch strings.ToLower(checksums) {
			case "":
			case "on", "true", "yes":
				opt.Checksums = ptrTo(true)
			case "off", "false", "no":
				opt.Checksums = ptrTo(false)
			default:
				return usageErr("--checksums %q: want on or off", checksums)
			}
			for _, t := range []struct {
				flag, s string
				dst     *int64
			}{{"--since", since, &opt.SinceNS}, {"--until", until, &opt.UntilNS}} {
				if t.s == "" {
					continue
				}
				ns, err := parseWhen(t.s)
				if err != nil {
					return usageErr("%s: %v", t.flag, err)
				}
				*t.dst = ns
			}
			for _, d := range dropAttrs {
				attr, err := migrate.ParseDropAttr(d)
				if err != nil {
					return usageErr("--drop-attr %q: want key=value", d)
				}
				opt.DropAttrs = append(opt.DropAttrs, attr)
			}
			if verbose {
				opt.Logger = slog.New(slog.NewTextHandler(a.stderr, nil))
			}
			bars := newPhaseBars(a)
			if len(fromBucket) > 0 {
				if downloadDir == "" {
					downloadDir = filepath.Clean(to) + ".bucket-download"
				}
				b, o, err := bf.open(cmd.Context(), cmd)
				if err != nil {
					return err
				}
				dirs, err := bucketadmin.Stage(cmd.Context(), b, o.Prefix, fromBucket, downloadDir, bucketadmin.StageOptions{Bucket: o.Bucket,
					Progress: func(done, total int64) { bars.update("download", done, total) }})
				if err != nil {
					if errors.Is(err, objstore.ErrNotFound) {
						return &exitError{exitNotFound, fmt.Errorf("migrate --from-bucket: %w", err)}
					}
					if errors.Is(err, bucketadmin.ErrStageChanged) {
						return usageErr("migrate --from-bucket: %v", err)
					}
					return migrateExit(cmd.Context(), fmt.Errorf("downloading from s3://%s/%s: %w", o.Bucket, o.Prefix, err))
				}
				opt.Sources = append(append([]string(nil), from...), dirs...)
			}
			opt.Progress = bars.update
			rep, err := migrate.Run(cmd.Context(), opt)
			bars.finish()
			if err == nil && len(fromBucket) > 0 {
				if rerr := os.RemoveAll(downloadDir); rerr != nil {
					fmt.Fprintf(a.stderr, "ztsctl: migrate: the migration is complete, but removing %s failed: %v\n", downloadDir, rerr)
				}
			}
			err = writeReport(a.stdout, rep, asJSON, err)
			return migrateExit(cmd.Context(), err)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&from, "from", nil, "a data directory to read (repeat to merge several)")
	f.StringVar(&to, "to", "", "the data directory to write (new or empty)")
	f.BoolVar(&inPlace, "in-place", false, "rewrite the first --from directory in place")
	f.StringVar(&compression, "compression", "", "none, lz4, zlib or zstd (default: as the first source store)")
	f.StringVar(&checksums, "checksums", "", "on or off: CRC32 per chunk (default: as the first source store)")
	f.StringVar(&since, "since", "", "copy traces whose earliest span starts at or after T")
	f.StringVar(&until, "until", "", "copy traces whose earliest span starts before T")
	f.StringArrayVar(&dropAttrs, "drop-attr", nil, "leave out traces with a span carrying key=value (repeatable)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVarP(&verbose, "verbose", "v", false, "log each step to stderr")
	f.IntVar(&batchBytes, "batch-bytes", 0, "source bytes copied between checkpoints (default 4 MiB)")
	f.Int64Var(&maxStoreSize, "max-store-size", 0, "bytes of a target store's data file before starting another (default as the daemon's)")
	f.MarkHidden("batch-bytes")
	f.StringArrayVar(&fromBucket, "from-bucket", nil, "copy the stores this node uploaded to the bucket (repeat for several nodes)")
	f.StringVar(&downloadDir, "download-dir", "", "with --from-bucket: where the stores are downloaded (default TO.bucket-download)")
	bf.register(cmd)
	return cmd
}

func ptrTo[T any](v T) *T { return &v }

// migrateExit maps a migration error to an exit code and a message.
func migrateExit(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, migrate.ErrUsage):
		return usageErr("%v", err)
	case ctx.Err() != nil:
		return &exitError{exitFailure, fmt.Errorf("migrate: interrupted (%v); re-run the same command to resume", err)}
	case errors.Is(err, storedir.ErrLocked):
		return &exitError{exitFailure, fmt.Errorf("migrate: %w (migrate works on stopped daemons' data directories)", err)}
	case errors.Is(err, fs.ErrNotExist) && !errors.Is(err, migrate.ErrVerifyFailed):
		return &exitError{exitNotFound, fmt.Errorf("migrate: %w", err)}
	}
	return &exitError{exitFailure, fmt.Errorf("migrate: %w", err)}
}

// phaseBars draws one progress bar per phase on stderr when it is a
// terminal: bytes with throughput and ETA, or traces read back.
type phaseBars struct {
	a     *app
	on    bool
	mu    sync.Mutex
	phase migrate.Phase
	bar   *progressbar.ProgressBar
}

func newPhaseBars(a *app) *phaseBars {
	return &phaseBars{a: a, on: isTerminal(a.stderr)}
}

var phaseNames = map[migrate.Phase]string{
	migrate.PhasePlan:   "plan (filters)",
	migrate.PhaseCopy:   "copy",
	migrate.PhaseVerify: "verify",
	migrate.PhaseReads:  "read back",
}

func (p *phaseBars) update(phase migrate.Phase, done, total int64) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil || p.phase != phase {
		if p.bar != nil {
			p.bar.Finish()
		}
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(p.a.stderr),
			progressbar.OptionSetDescription(phaseNames[phase]),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionThrottle(100 * time.Millisecond),
			progressbar.OptionClearOnFinish(),
		}
		if phase == migrate.PhaseReads {
			opts = append(opts, progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("spans"))
		} else {
			opts = append(opts, progressbar.OptionShowBytes(true))
		}
		p.bar = progressbar.NewOptions64(total, opts...)
		p.phase = phase
	}
	if total != p.bar.GetMax64() {
		p.bar.ChangeMax64(total)
	}
	p.bar.Set64(done)
}

func (p *phaseBars) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Finish()
	}
}
