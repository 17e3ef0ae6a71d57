package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ztsd/ztsd/recovery"
)

func init() { extraCommands = append(extraCommands, newVerifyCmd) }

func newVerifyCmd(a *app) *cobra.Command {
	var target offlineTarget
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify [--data-dir DIR | --store DIR] [--json]",
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

Exit status: 0 when nothing is wrong, 3 on any problem (or when verify cannot
run), 2 on bad usage.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			if rep != nil {
				if asJSON {
					if werr := printReportJSON(a.stdout, rep); werr != nil && err == nil {
						err = werr
					}
				} else if werr := rep.WriteText(a.stdout); werr != nil && err == nil {
					err = werr
				}
			}
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
	return cmd
}
