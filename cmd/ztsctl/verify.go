package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ztsd/ztsd/bucketadmin"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/recovery"
)

func init() { extraCommands = append(extraCommands, newVerifyCmd) }

func newVerifyCmd(a *app) *cobra.Command {
	var target offlineTarget
	var asJSON, remote, deep bool
	var node, tempDir string
	var bf bucketFlags
	cmd := &cobra.Command{
		Use:   "verify [--data-dir DIR | --store DIR] [--json]  |  verify --remote [--config ztsd.toml] [--node N] [--store [NODE/]ID] [--deep] [--json]",
		Short: "Check a data directory read-only: headers, master checksums, every chunk, and the indexes against the data",
		Long: `verify reads a data directory (or one store) without changing anything. It checks
each store's config.props, the data file header and, for sealed stores, the master
checksum; it validates every chunk (checksum, decompression, payload) and names
every bad region; and it checks that both indexes are intact and agree with the
data file: every indexed chunk exists and holds the indexed spans, every chunk is
indexed, and the text index knows every string. It works when the indexes are
missing. While a daemon holds the data directory only the data files are checked.
Index lag — an index behind its data file, which a crash (kill -9, power loss)
leaves because the indexes have no WAL, and which the daemon heals when it opens
the store — is noted, not counted as a problem.

--remote checks the stores in the bucket of --config's [object_store] (or
--bucket, --endpoint, ...; credentials from AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY or the shared credentials file): every manifest parses
and names its store, and every object it names exists with the manifest's
size. --deep also downloads each store (into --temp-dir, removed after),
checks every object's SHA-256 against the manifest and runs the checks above
on the copy. --node and --store (NODE/ID, or ID with --node) narrow it.
Objects no manifest names (an upload in progress or abandoned, a replaced
generation) are noted, not counted as problems.

Exit status: 0 when nothing is wrong, 3 on any problem (or when verify cannot
run), 2 on bad usage.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if remote {
				if target.dataDir != "" {
					return usageErr("--remote checks a bucket: --data-dir does not apply")
				}
				return verifyRemote(cmd, a, &bf, node, target.store, deep, tempDir, asJSON)
			}
			if deep || node != "" || bf.used(cmd) || tempDir != "" {
				return usageErr("--deep, --node, --temp-dir and the bucket flags need --remote")
			}
			dir, single, err := target.resolve()
			if err != nil {
				return err
			}
			offlineGC()
			update, finish := a.progress("verify")
			opt := recovery.Options{Progress: update}
			var rep *recovery.VerifyReport
			if single {
				rep, err = recovery.VerifyStore(cmd.Context(), dir, opt)
			} else {
				rep, err = recovery.VerifyDataDir(cmd.Context(), dir, opt)
			}
			finish()
			err = writeReport(a.stdout, rep, asJSON, err)
			if err != nil {
				return &exitError{exitFailure, fmt.Errorf("verify: %w", err)}
			}
			if !rep.OK {
				return &exitError{exitFailure, fmt.Errorf("verify: %d problems found in %s", len(rep.Problems), dir)}
			}
			return nil
		},
	}
	target.flags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&remote, "remote", false, "check the stores in the bucket instead of a data directory")
	cmd.Flags().BoolVar(&deep, "deep", false, "with --remote: download every store, check SHA-256s and verify it")
	cmd.Flags().StringVar(&node, "node", "", "with --remote: only this node's stores")
	tempDirFlag(cmd, &tempDir)
	bf.register(cmd)
	return cmd
}

func verifyRemote(cmd *cobra.Command, a *app, bf *bucketFlags, node, store string, deep bool, tempDir string, asJSON bool) error {
	sel, err := storeSelector(node, store)
	if err != nil {
		return err
	}
	b, o, err := bf.open(cmd.Context(), cmd)
	if err != nil {
		return err
	}
	update, finish := a.progress("verify --remote")
	rep, err := bucketadmin.Verify(cmd.Context(), b, o.Bucket, o.Prefix, bucketadmin.VerifyOptions{Node: node, Store: sel, Deep: deep,
		TempDir: tempDir, Progress: update})
	finish()
	err = writeReport(a.stdout, rep, asJSON, err)
	if errors.Is(err, objstore.ErrNotFound) {
		return &exitError{exitNotFound, fmt.Errorf("verify --remote: %w", err)}
	}
	if err != nil {
		return &exitError{exitFailure, fmt.Errorf("verify --remote: %w", err)}
	}
	if !rep.OK {
		return &exitError{exitFailure, fmt.Errorf("verify --remote: %d problems found in s3://%s/%s", rep.Problems, o.Bucket, o.Prefix)}
	}
	return nil
}
