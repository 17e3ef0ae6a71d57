package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/ztsd/ztsd/bucketadmin"
	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/recovery"
	"github.com/ztsd/ztsd/storedir"
)

func init() { extraCommands = append(extraCommands, newRecoverCmd) }

// offlineTarget is what an offline command works on: a data directory or
// one store directory.
type offlineTarget struct {
	dataDir, store string
}

func (o *offlineTarget) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.dataDir, "data-dir", "", "the data directory (every store in it); default "+config.Default().DataDir)
	cmd.Flags().StringVar(&o.store, "store", "", "one store directory (e.g. DATA_DIR/000003) instead of a whole data directory")
}

// resolve checks the flags and returns the directory and whether it is a
// single store.
func (o *offlineTarget) resolve() (dir string, single bool, err error) {
	if o.dataDir != "" && o.store != "" {
		return "", false, usageErr("--data-dir and --store are mutually exclusive")
	}
	dir, single = o.dataDir, false
	if o.store != "" {
		dir, single = o.store, true
	}
	if dir == "" {
		dir = config.Default().DataDir
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return "", false, &exitError{exitNotFound, err}
	}
	if !fi.IsDir() {
		return "", false, usageErr("%s is not a directory", dir)
	}
	if single && !recovery.IsStoreDir(dir) {
		return "", false, usageErr("%s is not a store directory (no %s or %s); use --data-dir for a data directory", dir, recovery.DataFile, recovery.PropsFile)
	}
	if !single && recovery.IsStoreDir(dir) {
		return "", false, usageErr("%s is a store directory; use --store %s (or --data-dir %s)", dir, dir, filepath.Dir(dir))
	}
	return dir, single, nil
}

// progress returns a progress callback drawing a bar on stderr when it is
// a terminal (nil otherwise), and a function that finishes the bar.
func (a *app) progress(what string) (func(done, total int64), func()) {
	if !isTerminal(a.stderr) {
		return nil, func() {}
	}
	var mu sync.Mutex
	var bar *progressbar.ProgressBar
	update := func(done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		if bar == nil {
			bar = progressbar.NewOptions64(total,
				progressbar.OptionSetWriter(a.stderr),
				progressbar.OptionSetDescription(what),
				progressbar.OptionShowBytes(true),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish())
		}
		bar.Set64(done)
	}
	finish := func() {
		mu.Lock()
		defer mu.Unlock()
		if bar != nil {
			bar.Finish()
		}
	}
	return update, finish
}

// offlineGC makes the garbage collector of an offline scan or rebuild run
// less often (GOGC=400) unless GOGC is set: the heap stays small (chunks
// are indexed in bounded batches) and collection costs about a quarter of
// the rebuild time at the default. Unless GOMEMLIMIT is set, it also sets
// a soft limit of offlineHeapLimit on the Go heap, past which the
// collector runs sooner, so that the process stays within the default
// memory_budget (1 GiB) together with Pebble's memory of a rebuild. It
// returns what restores the earlier settings (ztsctl bench's recovery
// phase runs in a process that goes on).
func offlineGC() (restore func()) {
	restoreGC, restoreLimit := func() {}, func() {}
	if os.Getenv("GOGC") == "" {
		old := debug.SetGCPercent(400)
		restoreGC = func() { debug.SetGCPercent(old) }
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		old := debug.SetMemoryLimit(offlineHeapLimit)
		restoreLimit = func() { debug.SetMemoryLimit(old) }
	}
	return func() { restoreGC(); restoreLimit() }
}

// offlineHeapLimit is the soft limit offlineGC sets on the Go heap: the
// default memory_budget (1 GiB) less what a rebuild's two Pebble databases
// hold outside it (bulk-load memtables and block caches, ~320 MiB) and
// some room. A rebuild's live heap is ~100-250 MB whatever the store's
// size (a group of at most 16k decoded spans, one interned group, the
// scan queue), so the limit only makes the collector run sooner.
const offlineHeapLimit = 640 << 20

// writeReport prints the report of an offline command (recover, verify,
// migrate) to w: indented JSON of its fields when asJSON, else its text.
// err is the command's own error, returned as it is: the report of a
// command that failed part-way says how far it got, and is printed all the
// same. A write error is returned only when err is nil. A nil report (the
// command failed before it had one) prints nothing.
func writeReport[R any, P interface {
	*R
	WriteText(io.Writer) error
}](w io.Writer, rep P, asJSON bool, err error) error {
	if rep == nil {
		return err
	}
	var werr error
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		werr = enc.Encode(rep)
	} else {
		werr = rep.WriteText(w)
	}
	if err == nil {
		return werr
	}
	return err
}

func newRecoverCmd(a *app) *cobra.Command {
	var target offlineTarget
	var dryRun, asJSON, verbose bool
	var remote, tempDir string
	var bf bucketFlags
	cmd := &cobra.Command{
		Use:   "recover [--data-dir DIR | --store DIR] [--dry-run] [--json]  |  recover --remote NODE/STOREID [--config ztsd.toml] [--dry-run] [--json]",
		Short: "Repair a stopped data directory: cut torn tails, repair headers, rebuild both indexes",
		Long: `recover works offline on a data directory (or one store) that no daemon holds.
For each store it scans the data file chunk by chunk (checksums, decompression,
payload decoding), reports every bad region with its offset, length and reason,
repairs a damaged file header, cuts a torn tail (the cut bytes are kept in
traces.zts.broken), rebuilds meta/ and text/ from the good chunks and swaps them
in atomically, and rewrites config.props. Damaged chunks in the middle of a data
file are skipped (their traces are lost) and left in place; verify keeps naming them.

--dry-run scans and reports what would be done without changing anything.

--remote NODE/STOREID repairs a store in the bucket of --config's [object_store]
(or --bucket, --endpoint, ...; credentials from the environment): it downloads
the generation the store's manifest names into --temp-dir (keeping objects that
differ from the manifest: they are what needs repair), recovers the copy as
above, uploads it as a new generation, replaces the manifest (the old one stays
visible until then, and nothing is replaced if the manifest changed meanwhile),
and only then deletes the old generation's objects. Daemons serving the store
switch to the new generation at their next discovery scan. It is for stores that
live only in the bucket: a store an ingesting daemon still holds locally is
repaired on that host (recover --data-dir on the stopped daemon's directory).

Exit status: 0 when the stores were recovered (the report says what was lost),
2 on bad usage, 3 when recovery failed or a daemon holds the data directory.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if remote != "" {
				if target.dataDir != "" || target.store != "" {
					return usageErr("--remote repairs a store in a bucket: --data-dir and --store do not apply")
				}
				return recoverRemote(cmd, a, &bf, remote, dryRun, verbose, tempDir, asJSON)
			}
			if bf.used(cmd) || tempDir != "" {
				return usageErr("--temp-dir and the bucket flags need --remote NODE/STOREID")
			}
			dir, single, err := target.resolve()
			if err != nil {
				return err
			}
			offlineGC()
			update, finish := a.progress("recover")
			opt := recovery.Options{DryRun: dryRun, Progress: update}
			if verbose {
				opt.Logger = slog.New(slog.NewTextHandler(a.stderr, nil))
			}
			var rep *recovery.Report
			if single {
				rep, err = recovery.RecoverStore(cmd.Context(), dir, opt)
			} else {
				rep, err = recovery.RecoverDataDir(cmd.Context(), dir, opt)
			}
			finish()
			err = writeReport(a.stdout, rep, asJSON, err)
			if errors.Is(err, storedir.ErrLocked) {
				return &exitError{exitFailure, fmt.Errorf("recover: %w (recover works on a stopped daemon's data directory)", err)}
			}
			if err != nil {
				return &exitError{exitFailure, fmt.Errorf("recover: %w", err)}
			}
			return nil
		},
	}
	target.flags(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be repaired without changing anything")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log each step to stderr")
	cmd.Flags().StringVar(&remote, "remote", "", "repair the store NODE/STOREID in the bucket instead of a data directory")
	tempDirFlag(cmd, &tempDir)
	bf.register(cmd)
	return cmd
}

func recoverRemote(cmd *cobra.Command, a *app, bf *bucketFlags, ref string, dryRun, verbose bool, tempDir string, asJSON bool) error {
	k, err := bucketadmin.ParseStoreRef(ref)
	if err != nil {
		return usageErr("--remote: %v", err)
	}
	b, o, err := bf.open(cmd.Context(), cmd)
	if err != nil {
		return err
	}
	offlineGC()
	opt := bucketadmin.RecoverOptions{DryRun: dryRun, TempDir: tempDir}
	if verbose {
		opt.Logger = slog.New(slog.NewTextHandler(a.stderr, nil))
	}
	rep, err := bucketadmin.Recover(cmd.Context(), b, o.Prefix, k, opt)
	err = writeReport(a.stdout, rep, asJSON, err)
	if errors.Is(err, objstore.ErrNotFound) {
		return &exitError{exitNotFound, fmt.Errorf("recover --remote: %w", err)}
	}
	if err != nil {
		return &exitError{exitFailure, fmt.Errorf("recover --remote: %w", err)}
	}
	return nil
}
