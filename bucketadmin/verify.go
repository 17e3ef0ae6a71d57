package bucketadmin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/discovery"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/recovery"
)

// VerifyOptions select what Verify checks.
type VerifyOptions struct {
	// Node limits the check to one node's stores; "" is every node.
	Node string
	// Store, when set, checks that one store only.
	Store *discovery.StoreKey
	// Deep downloads every store, checks each file's SHA-256 and runs
	// recovery.VerifyStore (what `ztsctl verify` runs) on the copy.
	Deep bool
	// TempDir is where Deep downloads (a fresh directory below it, removed
	// after); "" is os.TempDir().
	TempDir string
	// Progress, when set, is told the stores checked so far and their
	// number.
	Progress func(done, total int64)
}

// StoreCheck is what Verify found for one store.
type StoreCheck struct {
	Node       string `json:"node"`
	Store      string `json:"store"`
	Generation string `json:"generation,omitempty"`
	Files      int    `json:"files"`
	Bytes      int64  `json:"bytes"`
	Spans      int64  `json:"spans"`
	Chunks     int64  `json:"chunks"`
	// Problems make verify fail; Notes do not.
	Problems []string `json:"problems"`
	Notes    []string `json:"notes"`
	// Deep is the local verification of the downloaded copy (--deep).
	Deep *recovery.VerifyReport `json:"deep,omitempty"`
}

func (s *StoreCheck) problem(format string, args ...any) {
	s.Problems = append(s.Problems, fmt.Sprintf(format, args...))
}

// VerifyReport is what Verify found in a bucket.
type VerifyReport struct {
	Bucket string       `json:"bucket"`
	Prefix string       `json:"prefix"`
	Deep   bool         `json:"deep"`
	Stores []StoreCheck `json:"stores"`
	// Notes are about the bucket, not one visible store (objects of
	// uploads that never wrote a manifest).
	Notes    []string `json:"notes"`
	Problems int      `json:"problems"`
	Bytes    int64    `json:"bytes"`
	OK       bool     `json:"ok"`
}

// Verify checks the stores of a bucket: every manifest parses and names
// its own node and store, holds the files a store needs, and every file it
// names exists with the manifest's size; with Deep every file's SHA-256 and
// the store itself (recovery.VerifyStore on a downloaded copy). Objects
// outside any manifest's generation are reported as notes. A bucket that
// cannot be listed is an error; what is wrong with a store is in the report
// (OK false).
func Verify(ctx context.Context, b objstore.Bucket, bucketName, prefix string, opt VerifyOptions) (*VerifyReport, error) {
	rep := &VerifyReport{Bucket: bucketName, Prefix: prefix, Deep: opt.Deep, Stores: []StoreCheck{}, Notes: []string{}}
	node := opt.Node
	if opt.Store != nil {
		node = opt.Store.Node
	}
	// One listing: the manifests and every generation's objects.
	listPrefix := strings.TrimSuffix(prefix, "/")
	if listPrefix != "" {
		listPrefix += "/"
	}
	if node != "" {
		listPrefix = objstore.NodePrefix(prefix, node)
	}
	if opt.Store != nil {
		listPrefix = objstore.StorePrefix(prefix, opt.Store.Node, opt.Store.ID)
	}
	manifests := map[discovery.StoreKey]string{}
	objects := map[discovery.StoreKey][]objstore.Object{}
	var stray []string
	err := b.List(ctx, listPrefix, func(o objstore.Object) error {
		if k, ok := discovery.ParseManifestKey(prefix, o.Key); ok {
			manifests[k] = o.Key
			return nil
		}
		k, ok := storeOfObject(prefix, o.Key)
		if !ok {
			stray = append(stray, o.Key)
			return nil
		}
		objects[k] = append(objects[k], o)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %q: %w", listPrefix, err)
	}
	if len(stray) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d objects outside the store layout, e.g. %s", len(stray), stray[0]))
	}
	var keys []discovery.StoreKey
	for k := range manifests {
		keys = append(keys, k)
	}
	for k, objs := range objects {
		if _, ok := manifests[k]; !ok {
			var n int64
			for _, o := range objs {
				n += o.Size
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("store %s has %d objects (%d bytes) and no manifest: an upload in progress or abandoned; it is not visible", k, len(objs), n))
		}
	}
	sort.Strings(rep.Notes)
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Node != keys[j].Node {
			return keys[i].Node < keys[j].Node
		}
		return keys[i].ID < keys[j].ID
	})
	if opt.Store != nil && len(keys) == 0 {
		return rep, fmt.Errorf("store %s: no manifest at %s: %w", *opt.Store, objstore.ManifestKey(prefix, opt.Store.Node, opt.Store.ID), objstore.ErrNotFound)
	}
	var tmp string
	if opt.Deep {
		if tmp, err = os.MkdirTemp(opt.TempDir, "ztsctl-verify-remote-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
	}
	for i, k := range keys {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		sc, err := verifyStore(ctx, b, prefix, k, manifests[k], objects[k], opt.Deep, tmp)
		if err != nil {
			return rep, err
		}
		rep.Stores = append(rep.Stores, *sc)
		rep.Problems += len(sc.Problems)
		rep.Bytes += sc.Bytes
		if opt.Progress != nil {
			opt.Progress(int64(i+1), int64(len(keys)))
		}
	}
	rep.OK = rep.Problems == 0
	return rep, nil
}

// storeOfObject finds the store an object of a generation belongs to:
// <prefix>/<node>/<store id>/<generation>/<file...>.
func storeOfObject(prefix, key string) (discovery.StoreKey, bool) {
	rest := key
	if prefix != "" {
		p := strings.TrimSuffix(prefix, "/") + "/"
		if !strings.HasPrefix(key, p) {
			return discovery.StoreKey{}, false
		}
		rest = key[len(p):]
	}
	parts := strings.SplitN(rest, "/", 4)
	if len(parts) != 4 {
		return discovery.StoreKey{}, false
	}
	return discovery.ParseManifestKey("", parts[0]+"/"+parts[1]+"/"+objstore.ManifestName)
}

// indexLagNote starts recovery's note of an index behind its data file.
const indexLagNote = "index lag:"

// requiredFiles are the files every uploaded store holds.
var requiredFiles = []string{"traces.zts", "config.props"}

// verifyStore checks one store. An error is returned only for what stops
// the whole verification (the context); problems go into the report.
func verifyStore(ctx context.Context, b objstore.Bucket, prefix string, k discovery.StoreKey, mkey string, objs []objstore.Object, deep bool, tmp string) (*StoreCheck, error) {
	sc := &StoreCheck{Node: k.Node, Store: fmt.Sprintf("%06x", k.ID), Problems: []string{}, Notes: []string{}}
	m, err := discovery.ReadManifest(ctx, b, mkey, k)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		sc.problem("manifest: %v", err)
		return sc, nil
	}
	sc.Generation, sc.Files, sc.Spans, sc.Chunks = m.Generation, len(m.Files), m.Spans, m.Chunks
	for _, f := range m.Files {
		sc.Bytes += f.Size
		if _, err := localPath(tmp, f.Path); err != nil {
			sc.problem("manifest: %v", err)
		}
	}
	for _, req := range requiredFiles {
		if _, ok := m.File(req); !ok {
			sc.problem("manifest: names no %s", req)
		}
	}
	genPrefix := objstore.StorePrefix(prefix, k.Node, k.ID) + m.Generation + "/"
	var others int
	var otherBytes int64
	otherGens := map[string]bool{}
	for _, o := range objs {
		if !strings.HasPrefix(o.Key, genPrefix) {
			others++
			otherBytes += o.Size
			rest := strings.TrimPrefix(o.Key, objstore.StorePrefix(prefix, k.Node, k.ID))
			gen, _, _ := strings.Cut(rest, "/")
			otherGens[gen] = true
		}
	}
	if others > 0 {
		sc.Notes = append(sc.Notes, fmt.Sprintf("%d objects (%d bytes) of %d generations the manifest does not name (an interrupted upload, or a replaced generation not yet deleted): never read", others, otherBytes, len(otherGens)))
	}
	for _, f := range m.Files {
		key := objstore.FileKey(prefix, k.Node, k.ID, m.Generation, f.Path)
		o, err := b.Head(ctx, key)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, objstore.ErrNotFound):
			sc.problem("%s: missing (%s)", f.Path, key)
		case err != nil:
			sc.problem("%s: %v", f.Path, err)
		case o.Size != f.Size:
			sc.problem("%s: %d bytes in the bucket, the manifest says %d", f.Path, o.Size, f.Size)
		}
	}
	if !deep || len(sc.Problems) > 0 {
		return sc, nil
	}
	// Deep: download into <tmp>/<node>/<store id>/ (the store directory of
	// a data directory of its own), check it, remove it.
	dataDir := filepath.Join(tmp, k.Node)
	storeDir := filepath.Join(dataDir, sc.Store)
	defer os.RemoveAll(dataDir)
	if _, err := Download(ctx, b, prefix, m, storeDir, DownloadOptions{KeepMismatched: true}); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		for _, e := range unjoin(err) {
			sc.problem("%v", e)
		}
		if !errorsAllFileErrors(err) {
			return sc, nil
		}
	}
	if props, err := config.ReadPropsFile(filepath.Join(storeDir, "config.props")); err == nil {
		if sp, err := config.StorePropsFrom(props); err == nil {
			if cs := fmt.Sprintf("%08x", sp.MasterChecksum); m.MasterChecksum != "" && cs != m.MasterChecksum {
				sc.problem("config.props has master checksum %s, the manifest %s", cs, m.MasterChecksum)
			}
			if sp.State != config.StateSealed {
				sc.problem("config.props says the store is %s: only sealed stores are uploaded", sp.State)
			}
		}
	}
	vr, err := recovery.VerifyStore(ctx, storeDir, recovery.Options{})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		sc.problem("verifying the downloaded copy: %v", err)
		return sc, nil
	}
	vr.Dir = fmt.Sprintf("%s/%s (downloaded)", k.Node, sc.Store)
	for i := range vr.Stores {
		vr.Stores[i].Dir = vr.Dir
	}
	sc.Deep = vr
	for _, p := range vr.Problems {
		sc.problem("%s", p)
	}
	for _, st := range vr.Stores {
		if n := st.ChunksOK + int64(st.ChunksBad); n != m.Chunks {
			sc.problem("the data file holds %d chunks, the manifest says %d", n, m.Chunks)
		}
		// A local store's index lag is healed when the daemon opens it;
		// an uploaded store's indexes are read as they are: lag there
		// means spans a daemon serving it from the bucket cannot find.
		for _, note := range st.Notes {
			if strings.HasPrefix(note, indexLagNote) {
				sc.problem("uploaded with its indexes behind its data file (never healed in a bucket; ztsctl recover --remote rebuilds them): %s", note)
			}
		}
	}
	return sc, nil
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func errorsAllFileErrors(err error) bool {
	for _, e := range unjoin(err) {
		var fe *FileError
		if !errors.As(e, &fe) {
			return false
		}
	}
	return true
}

// WriteText renders the report for a terminal.
func (r *VerifyReport) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, s := range r.Stores {
		state := "ok"
		if len(s.Problems) > 0 {
			state = fmt.Sprintf("%d problems", len(s.Problems))
		}
		deep := ""
		if s.Deep != nil && len(s.Deep.Stores) == 1 {
			d := s.Deep.Stores[0]
			deep = fmt.Sprintf(", downloaded and verified: %d chunks ok, %d bad, %d traces indexed", d.ChunksOK, d.ChunksBad, d.Traces)
		}
		fmt.Fprintf(&b, "store %s/%s generation %s: %d files, %d bytes, %d spans, %d chunks%s: %s\n",
			s.Node, s.Store, s.Generation, s.Files, s.Bytes, s.Spans, s.Chunks, deep, state)
		for _, p := range s.Problems {
			fmt.Fprintf(&b, "  PROBLEM %s\n", p)
		}
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
	}
	what := "manifests and object sizes checked"
	if r.Deep {
		what = "every object downloaded, SHA-256 and store verified"
	}
	if r.OK {
		fmt.Fprintf(&b, "verify --remote: OK: %d stores, %d bytes in s3://%s/%s (%s)\n", len(r.Stores), r.Bytes, r.Bucket, r.Prefix, what)
	} else {
		fmt.Fprintf(&b, "verify --remote: %d problems in %d stores in s3://%s/%s (%s)\n", r.Problems, len(r.Stores), r.Bucket, r.Prefix, what)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
