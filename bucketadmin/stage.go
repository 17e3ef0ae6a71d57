package bucketadmin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ztsd/ztsd/discovery"
	"github.com/ztsd/ztsd/objstore"
)

// StagePlanFile, in a staging directory, records which generation of
// which store Stage downloads, so that a re-run downloads the same ones
// (a migration resumes only over unchanged sources).
const StagePlanFile = "bucket-stage.json"

// stagePlan is the content of StagePlanFile.
type stagePlan struct {
	Bucket    string                          `json:"bucket"`
	Prefix    string                          `json:"prefix"`
	Nodes     []string                        `json:"nodes"`
	Manifests map[string][]*objstore.Manifest `json:"manifests"` // by node, ascending store id
}

// migrateFiles are what a migration reads of a store: its data file and
// config.props (never its indexes).
func migrateFiles(p string) bool { return p == "traces.zts" || p == "config.props" }

// StageOptions tune Stage.
type StageOptions struct {
	// Bucket names the bucket in the plan (a re-run against another bucket
	// is refused).
	Bucket string
	// Progress, when set, is told the bytes downloaded so far and the total.
	Progress func(done, total int64)
}

// ErrStageChanged: a staging directory holds the plan of another
// bucket, prefix or node list.
var ErrStageChanged = errors.New("the staging directory holds a download of other stores")

// Stage downloads the data files and config.props of every store of the
// given nodes into dir/<node>/<store id>/, one data directory per node, for
// package migrate to read as sources, and returns those data directories
// in node order. The first run records the stores and generations it
// downloads in dir/bucket-stage.json; a re-run (after an interruption)
// downloads exactly those, skipping files already complete. A file that
// does not match its manifest fails the staging: repair the store with
// `ztsctl recover --remote` first.
func Stage(ctx context.Context, b objstore.Bucket, prefix string, nodes []string, dir string, opt StageOptions) ([]string, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("no node to download")
	}
	for _, n := range nodes {
		if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\\ ") {
			return nil, fmt.Errorf("node %q is not a node name", n)
		}
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("staging directory %s: %w", dir, err)
	}
	planPath := filepath.Join(dir, StagePlanFile)
	plan, err := readStagePlan(planPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		plan = &stagePlan{Bucket: opt.Bucket, Prefix: prefix, Nodes: nodes, Manifests: map[string][]*objstore.Manifest{}}
		for _, node := range nodes {
			stores, err := ListStores(ctx, b, prefix, node)
			if err != nil {
				return nil, err
			}
			if len(stores) == 0 {
				return nil, fmt.Errorf("node %s has no stores in the bucket (no %s*/%s): %w", node, objstore.NodePrefix(prefix, node), objstore.ManifestName, objstore.ErrNotFound)
			}
			for _, s := range stores {
				m, err := discovery.ReadManifest(ctx, b, s.ManifestKey, s.StoreKey)
				if err != nil {
					return nil, err
				}
				plan.Manifests[node] = append(plan.Manifests[node], m)
			}
			sort.Slice(plan.Manifests[node], func(i, j int) bool { return plan.Manifests[node][i].Store < plan.Manifests[node][j].Store })
		}
		data, err := json.MarshalIndent(plan, "", "  ")
		if err != nil {
			return nil, err
		}
		if err := writeFileAtomic(planPath, data); err != nil {
			return nil, fmt.Errorf("writing %s: %w", planPath, err)
		}
	case err != nil:
		return nil, err
	default:
		if plan.Bucket != opt.Bucket || plan.Prefix != prefix || fmt.Sprint(plan.Nodes) != fmt.Sprint(nodes) {
			return nil, fmt.Errorf("%w: %s holds s3://%s/%s nodes %v, not s3://%s/%s nodes %v; use another directory or remove it",
				ErrStageChanged, dir, plan.Bucket, plan.Prefix, plan.Nodes, opt.Bucket, prefix, nodes)
		}
	}
	var total, done int64
	for _, ms := range plan.Manifests {
		for _, m := range ms {
			for _, f := range m.Files {
				if migrateFiles(f.Path) {
					total += f.Size
				}
			}
		}
	}
	var dirs []string
	for _, node := range nodes {
		nodeDir := filepath.Join(dir, node)
		dirs = append(dirs, nodeDir)
		for _, m := range plan.Manifests[node] {
			base := done
			_, err := Download(ctx, b, prefix, m, filepath.Join(nodeDir, fmt.Sprintf("%06x", m.Store)), DownloadOptions{Only: migrateFiles,
				Progress: func(d, _ int64) {
					if opt.Progress != nil {
						opt.Progress(base+d, total)
					}
				}})
			if errors.Is(err, objstore.ErrNotFound) {
				return nil, fmt.Errorf("store %s/%06x generation %s is gone from the bucket (recovered or removed since the download started): remove %s and run again: %w",
					node, m.Store, m.Generation, dir, err)
			}
			if err != nil {
				return nil, fmt.Errorf("store %s/%06x: %w (repair it with ztsctl recover --remote %s/%06x)", node, m.Store, err, node, m.Store)
			}
			for _, f := range m.Files {
				if migrateFiles(f.Path) {
					done += f.Size
				}
			}
		}
	}
	return dirs, nil
}

func readStagePlan(path string) (*stagePlan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p stagePlan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w (remove the staging directory and run again)", path, err)
	}
	return &p, nil
}

// writeFileAtomic writes path through a synced temporary file and a rename.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
