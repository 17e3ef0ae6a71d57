package bucketadmin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/discovery"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/recovery"
)

// RecoverOptions tune Recover.
type RecoverOptions struct {
	// DryRun downloads and scans the store and reports what recovery would
	// do; nothing in the bucket changes.
	DryRun bool
	// TempDir is where the store is downloaded and repaired (a fresh
	// directory below it, removed after); "" is os.TempDir().
	TempDir string
	Logger  *slog.Logger
	// Upload tunes the re-upload (tests set BeforeManifest as a crash
	// point).
	Upload UploadOptions
}

// RecoverReport is what Recover did to one store.
type RecoverReport struct {
	Node          string `json:"node"`
	Store         string `json:"store"`
	OldGeneration string `json:"old_generation"`
	NewGeneration string `json:"new_generation,omitempty"`
	DryRun        bool   `json:"dry_run"`
	// Downloaded is the bytes fetched; Mismatched lists the files that
	// differed from the old manifest (missing, another size or SHA-256).
	Downloaded int64    `json:"downloaded_bytes"`
	Mismatched []string `json:"mismatched"`
	// Recovery is what recovery.RecoverStore did to the downloaded copy.
	Recovery *recovery.Report `json:"recovery"`
	// Uploaded is the bytes of the new generation; DeletedObjects the
	// objects of the old generation removed after the new manifest was
	// written.
	Uploaded       int64 `json:"uploaded_bytes"`
	DeletedObjects int   `json:"deleted_objects"`
}

// ErrStoreChanged: the store's manifest changed in the bucket while
// Recover worked on it; nothing was replaced.
var ErrStoreChanged = errors.New("the store's manifest changed in the bucket while it was being recovered")

// Recover repairs one store of a bucket: it downloads the generation its
// manifest names (keeping files that differ from the manifest, which is
// what needs repair), runs recovery.RecoverStore on the copy, uploads the
// result as a new generation with a new manifest — the old manifest stays
// visible until the new one replaces it — and then deletes the old
// generation's objects. If the manifest changed meanwhile, nothing is
// replaced and the new generation's objects are removed.
func Recover(ctx context.Context, b objstore.Bucket, prefix string, k discovery.StoreKey, opt RecoverOptions) (*RecoverReport, error) {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	rep := &RecoverReport{Node: k.Node, Store: fmt.Sprintf("%06x", k.ID), DryRun: opt.DryRun, Mismatched: []string{}}
	m, err := ReadManifest(ctx, b, prefix, k)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", k, err)
	}
	rep.OldGeneration = m.Generation
	if _, ok := m.File("traces.zts"); !ok {
		return rep, fmt.Errorf("store %s: the manifest names no traces.zts: nothing to recover from", k)
	}
	tmp, err := os.MkdirTemp(opt.TempDir, "ztsctl-recover-remote-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(tmp)
	storeDir := filepath.Join(tmp, rep.Store)
	opt.Logger.Info("downloading", "store", k.String(), "generation", m.Generation, "dir", storeDir)
	rep.Downloaded, err = Download(ctx, b, prefix, m, storeDir, DownloadOptions{KeepMismatched: true})
	if err != nil {
		if !errorsAllFileErrors(err) {
			return rep, fmt.Errorf("store %s: downloading: %w", k, err)
		}
		for _, e := range unjoin(err) {
			rep.Mismatched = append(rep.Mismatched, e.Error())
		}
	}
	if _, err := os.Stat(filepath.Join(storeDir, "traces.zts")); err != nil {
		return rep, fmt.Errorf("store %s: its data file could not be downloaded (%s): nothing to recover from", k, strings.Join(rep.Mismatched, "; "))
	}
	rrep, err := recovery.RecoverStore(ctx, storeDir, recovery.Options{DryRun: opt.DryRun, Logger: opt.Logger})
	rep.Recovery = rrep
	if err != nil {
		return rep, fmt.Errorf("store %s: recovering the downloaded copy: %w", k, err)
	}
	if opt.DryRun {
		return rep, nil
	}
	sp, err := readStoreProps(storeDir)
	if err != nil {
		return rep, fmt.Errorf("store %s: after recovery: %w", k, err)
	}
	if sp.State != config.StateSealed {
		return rep, fmt.Errorf("store %s: after recovery the store is %s, not sealed; a bucket holds sealed stores only, nothing replaced", k, sp.State)
	}
	// recovery leaves traces.zts.broken (the cut bytes) and its own
	// scratch beside the store: the cut bytes go up with the store.
	upOpt := opt.Upload
	upOpt.Spans = rrep.Spans
	if upOpt.Generation == "" {
		upOpt.Generation = objstore.NewGeneration(nowOr(upOpt.Now))
	}
	userBefore := upOpt.BeforeManifest
	upOpt.BeforeManifest = func() error {
		if userBefore != nil {
			if err := userBefore(); err != nil {
				return err
			}
		}
		now, err := ReadManifest(ctx, b, prefix, k)
		if err != nil {
			return fmt.Errorf("re-reading the manifest before replacing it: %w", err)
		}
		if now.Generation != m.Generation {
			return fmt.Errorf("%w (generation %s when recovery started, %s now); re-run recover", ErrStoreChanged, m.Generation, now.Generation)
		}
		return nil
	}
	nm, err := Upload(ctx, b, prefix, k.Node, k.ID, storeDir, upOpt)
	if err != nil {
		// The objects of the generation just uploaded are named by no
		// manifest: remove them (best effort; they are never read).
		if _, derr := DeleteGeneration(context.WithoutCancel(ctx), b, prefix, k.Node, k.ID, upOpt.Generation); derr != nil {
			opt.Logger.Warn("removing the objects of a generation that was not made visible", "store", k.String(), "generation", upOpt.Generation, "err", derr)
		}
		return rep, fmt.Errorf("store %s: uploading the recovered store: %w", k, err)
	}
	rep.NewGeneration = nm.Generation
	for _, f := range nm.Files {
		rep.Uploaded += f.Size
	}
	opt.Logger.Info("new generation visible; deleting the old one", "store", k.String(), "new", nm.Generation, "old", m.Generation)
	n, err := DeleteGeneration(ctx, b, prefix, k.Node, k.ID, m.Generation)
	rep.DeletedObjects = n
	if err != nil {
		return rep, fmt.Errorf("store %s: the recovered store is in place (generation %s), but deleting the old generation failed (its objects are never read; re-run to retry is not needed): %w", k, nm.Generation, err)
	}
	return rep, nil
}

func nowOr(now func() time.Time) time.Time {
	if now == nil {
		return time.Now()
	}
	return now()
}

func readStoreProps(dir string) (config.StoreProps, error) {
	props, err := config.ReadPropsFile(filepath.Join(dir, "config.props"))
	if err != nil {
		return config.StoreProps{}, err
	}
	return config.StorePropsFrom(props)
}

// WriteText renders the report for a terminal.
func (r *RecoverReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "store %s/%s generation %s: downloaded %d bytes\n", r.Node, r.Store, r.OldGeneration, r.Downloaded)
	for _, m := range r.Mismatched {
		fmt.Fprintf(&b, "  not as the manifest says: %s\n", m)
	}
	if r.Recovery != nil {
		var rb strings.Builder
		r.Recovery.WriteText(&rb)
		for _, line := range strings.Split(strings.TrimRight(rb.String(), "\n"), "\n") {
			fmt.Fprintf(&b, "  %s\n", line)
		}
	}
	switch {
	case r.DryRun:
		fmt.Fprintf(&b, "dry run: nothing uploaded, the bucket is unchanged\n")
	case r.NewGeneration != "":
		fmt.Fprintf(&b, "uploaded as generation %s (%d bytes), manifest replaced; %d objects of generation %s deleted\n",
			r.NewGeneration, r.Uploaded, r.DeletedObjects, r.OldGeneration)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
