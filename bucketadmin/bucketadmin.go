// Package bucketadmin is what the operator CLI does to the stores in an
// S3-compatible bucket (`ztsctl verify --remote`, `ztsctl recover
// --remote`, `ztsctl migrate --from-bucket`): list them by manifest,
// check every object a manifest names, download a store into a local
// store directory, and upload a local store directory as a new generation.
//
// The layout and the manifest are package objstore's: a store is visible
// exactly when <prefix>/<node>/<store id>/manifest.json exists, and the
// manifest names the generation holding its files with each file's size
// and SHA-256.
//
// Invariants:
//   - Download writes each file under a temporary name, checks its size and
//     SHA-256 against the manifest, fsyncs it and only then renames it into
//     place, so a file present under its own name is complete; a re-run
//     skips files already downloaded whole.
//   - Upload puts every file of the new generation (each with its SHA-256
//     for the server to check), checks each with a Head, and writes the
//     manifest last: until then the store's old manifest, if any, stays the
//     visible one. Objects of the replaced generation are deleted only
//     after the new manifest is written.
package bucketadmin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/discovery"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/storedir"
)

// Store is one store listed in a bucket.
type Store struct {
	discovery.StoreKey
	// ManifestKey is the key of its manifest.
	ManifestKey string
}

// ListStores lists the stores of a bucket (one node's when node is not
// empty), ordered by node then id.
func ListStores(ctx context.Context, b objstore.Bucket, prefix, node string) ([]Store, error) {
	found, err := discovery.ListManifests(ctx, b, prefix, node)
	if err != nil {
		return nil, err
	}
	stores := make([]Store, 0, len(found))
	for k, o := range found {
		stores = append(stores, Store{StoreKey: k, ManifestKey: o.Key})
	}
	sort.Slice(stores, func(i, j int) bool {
		if stores[i].Node != stores[j].Node {
			return stores[i].Node < stores[j].Node
		}
		return stores[i].ID < stores[j].ID
	})
	return stores, nil
}

// ParseStoreRef parses NODE/STOREID (the store id as six hex digits, or
// any hex number).
func ParseStoreRef(s string) (discovery.StoreKey, error) {
	node, id, ok := strings.Cut(s, "/")
	if !ok || node == "" || id == "" || strings.Contains(id, "/") {
		return discovery.StoreKey{}, fmt.Errorf("store %q: want NODE/STOREID, e.g. web-1/000003", s)
	}
	var n uint32
	if len(id) > 8 {
		return discovery.StoreKey{}, fmt.Errorf("store %q: store id %q is not a hex number", s, id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | uint32(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | uint32(c-'a'+10)
		case c >= 'A' && c <= 'F':
			n = n<<4 | uint32(c-'A'+10)
		default:
			return discovery.StoreKey{}, fmt.Errorf("store %q: store id %q is not a hex number", s, id)
		}
	}
	return discovery.StoreKey{Node: node, ID: n}, nil
}

// StoreRef names the store id of node.
func StoreRef(node string, id uint32) discovery.StoreKey {
	return discovery.StoreKey{Node: node, ID: id}
}

// ReadManifest reads the manifest of store k.
func ReadManifest(ctx context.Context, b objstore.Bucket, prefix string, k discovery.StoreKey) (*objstore.Manifest, error) {
	return discovery.ReadManifest(ctx, b, objstore.ManifestKey(prefix, k.Node, k.ID), k)
}

// localPath is a manifest file's path under dir, refusing a path that
// would leave it.
func localPath(dir, file string) (string, error) {
	clean := path.Clean(file)
	if clean != file || path.IsAbs(file) || clean == "." || strings.HasPrefix(clean, "../") || clean == ".." || strings.Contains(file, "\\") {
		return "", fmt.Errorf("manifest file path %q is not a plain relative path", file)
	}
	return filepath.Join(dir, filepath.FromSlash(clean)), nil
}

// FileError is one manifest file that did not download as the manifest
// says (missing, another size, another SHA-256).
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string { return fmt.Sprintf("%s: %v", e.Path, e.Err) }
func (e *FileError) Unwrap() error { return e.Err }

// ErrMismatch marks a downloaded file whose size or SHA-256 is not the
// manifest's.
var ErrMismatch = errors.New("does not match the manifest")

// DownloadOptions tune Download.
type DownloadOptions struct {
	// KeepMismatched keeps a file whose size or SHA-256 differs from the
	// manifest (recover repairs it) instead of failing; Download then
	// returns the mismatches as FileErrors joined, with every file it
	// could read in place.
	KeepMismatched bool
	// Only, when set, limits the download to the files it accepts (slash
	// paths as the manifest names them).
	Only func(path string) bool
	// Progress, when set, is told the bytes downloaded so far and the
	// total.
	Progress func(done, total int64)
}

// Download copies the store m describes into dir (a store directory:
// dir/traces.zts, dir/config.props, dir/meta/...). A file already in dir
// with the manifest's size and SHA-256 is kept (a re-run resumes). It
// returns the bytes fetched.
func Download(ctx context.Context, b objstore.Bucket, prefix string, m *objstore.Manifest, dir string, opt DownloadOptions) (int64, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return 0, fmt.Errorf("store directory %s: %w", dir, err)
	}
	var total, done, fetched int64
	files := make([]objstore.ManifestFile, 0, len(m.Files))
	for _, f := range m.Files {
		if opt.Only == nil || opt.Only(f.Path) {
			files = append(files, f)
			total += f.Size
		}
	}
	var mismatches []error
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return fetched, err
		}
		dst, err := localPath(dir, f.Path)
		if err != nil {
			return fetched, err
		}
		if sameFile(dst, f) {
			done += f.Size
			if opt.Progress != nil {
				opt.Progress(done, total)
			}
			continue
		}
		n, err := downloadFile(ctx, b, objstore.FileKey(prefix, m.Node, m.Store, m.Generation, f.Path), dst, f, opt.KeepMismatched)
		fetched += n
		done += f.Size
		if opt.Progress != nil {
			opt.Progress(done, total)
		}
		if err != nil {
			var fe *FileError
			if opt.KeepMismatched && errors.As(err, &fe) {
				mismatches = append(mismatches, err)
				continue
			}
			return fetched, err
		}
	}
	if err := syncDirs(dir); err != nil {
		return fetched, err
	}
	return fetched, errors.Join(mismatches...)
}

// sameFile reports whether path holds exactly f (size and SHA-256).
func sameFile(p string, f objstore.ManifestFile) bool {
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != f.Size {
		return false
	}
	sum, err := fileSHA256(p)
	return err == nil && sum == f.SHA256
}

func fileSHA256(p string) (string, error) {
	file, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer file.Close()
	h := sha256.New()
	if _, err := io.Copy(h, file); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// downloadFile fetches key into dst through a temporary file. A missing
// object or a size or checksum mismatch is a *FileError; with keepBad a
// mismatched file is still put in place.
func downloadFile(ctx context.Context, b objstore.Bucket, key, dst string, f objstore.ManifestFile, keepBad bool) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return 0, err
	}
	r, _, err := b.Get(ctx, key)
	if err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return 0, &FileError{Path: f.Path, Err: fmt.Errorf("object %s is missing: %w", key, err)}
		}
		return 0, fmt.Errorf("downloading %s: %w", key, err)
	}
	defer r.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".download-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name()) // after a rename, nothing to remove
	h := sha256.New()
	// Read one byte past the manifest's size so that a longer object is
	// seen, without ever reading an unbounded object.
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, f.Size+1))
	if err != nil {
		tmp.Close()
		return n, fmt.Errorf("downloading %s: %w", key, err)
	}
	var bad error
	if n != f.Size {
		bad = &FileError{Path: f.Path, Err: fmt.Errorf("object %s has %d bytes (or more), the manifest says %d: %w", key, n, f.Size, ErrMismatch)}
	} else if sum := hex.EncodeToString(h.Sum(nil)); sum != f.SHA256 {
		bad = &FileError{Path: f.Path, Err: fmt.Errorf("object %s has SHA-256 %s, the manifest says %s: %w", key, sum, f.SHA256, ErrMismatch)}
	}
	if bad != nil && !keepBad {
		tmp.Close()
		return n, bad
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return n, err
	}
	if err := tmp.Close(); err != nil {
		return n, err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return n, err
	}
	return n, bad
}

// syncDirs fsyncs dir and every directory below it.
func syncDirs(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}

// skipUpload names what is never uploaded from a store directory.
func skipUpload(rel string, d fs.DirEntry) bool {
	base := d.Name()
	return base == "LOCK" || rel == "uploaded.json" || strings.HasPrefix(base, ".") || strings.HasSuffix(rel, ".rebuild") ||
		strings.Contains(rel, ".rebuild/") || strings.HasSuffix(base, ".tmp")
}

// StoreFiles lists the files of a store directory to upload (slash
// paths, sorted), with sizes and SHA-256s.
func StoreFiles(dir string) ([]objstore.ManifestFile, error) {
	var files []objstore.ManifestFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if skipUpload(rel, d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		sum, err := fileSHA256(p)
		if err != nil {
			return err
		}
		files = append(files, objstore.ManifestFile{Path: rel, Size: fi.Size(), SHA256: sum})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing store directory %s: %w", dir, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// UploadOptions tune Upload.
type UploadOptions struct {
	// Spans is the manifest's span count (the store's config.props does
	// not hold it).
	Spans int64
	// Generation names the new generation; "" is objstore.NewGeneration(Now()).
	Generation string
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// BeforeManifest, when set, is called after every file was uploaded
	// and checked, right before the manifest is written; an error stops
	// the upload there (tests use it as a crash point; recover re-checks
	// that the manifest it replaces is still the one it read).
	BeforeManifest func() error
	// Progress, when set, is told the bytes uploaded so far and the total.
	Progress func(done, total int64)
}

// Upload puts the store directory dir as a new generation of node/id and
// writes its manifest last. It returns the manifest written.
func Upload(ctx context.Context, b objstore.Bucket, prefix, node string, id uint32, dir string, opt UploadOptions) (*objstore.Manifest, error) {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	props, err := config.ReadPropsFile(filepath.Join(dir, "config.props"))
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	sp, err := config.StorePropsFrom(props)
	if err != nil {
		return nil, fmt.Errorf("store %s: config.props: %w", dir, err)
	}
	if err := writeTraceFilter(ctx, dir); err != nil {
		return nil, err
	}
	files, err := StoreFiles(dir)
	if err != nil {
		return nil, err
	}
	if opt.Generation == "" {
		opt.Generation = objstore.NewGeneration(opt.Now())
	}
	m := &objstore.Manifest{Version: objstore.ManifestVersion, Node: node, Store: id,
		Generation: opt.Generation, FirstNS: sp.FirstTraceNS, LastNS: sp.LastTraceNS, Spans: opt.Spans,
		Chunks: sp.Chunks, MasterChecksum: fmt.Sprintf("%08x", sp.MasterChecksum), Files: files}
	var total, done int64
	for _, f := range files {
		total += f.Size
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		key := objstore.FileKey(prefix, node, id, m.Generation, f.Path)
		if err := putFile(ctx, b, key, filepath.Join(dir, filepath.FromSlash(f.Path)), f); err != nil {
			return nil, err
		}
		done += f.Size
		if opt.Progress != nil {
			opt.Progress(done, total)
		}
	}
	if opt.BeforeManifest != nil {
		if err := opt.BeforeManifest(); err != nil {
			return nil, err
		}
	}
	m.Uploaded = opt.Now().UTC()
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	mkey := objstore.ManifestKey(prefix, node, id)
	if _, err := objstore.ParseManifest(mkey, data); err != nil {
		return nil, fmt.Errorf("the manifest made for %s does not parse back: %w", dir, err)
	}
	sum := sha256.Sum256(data)
	if err := b.Put(ctx, mkey, strings.NewReader(string(data)), int64(len(data)), sum[:]); err != nil {
		return nil, fmt.Errorf("writing manifest %s: %w", mkey, err)
	}
	return m, nil
}

// writeTraceFilter (re)writes the store's trace filter and trace
// directory objects from its metadata index and data file as they are
// now (a repaired store's chunks may have moved), so that remote readers
// skip the store for traces it lacks and read a chunk with one GET. A
// store without a metadata index gets none (remote readers then read its
// indexes).
func writeTraceFilter(ctx context.Context, dir string) error {
	for _, name := range []string{storedir.TraceFilterFile, storedir.TraceDirFile} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "meta")); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	filter, traceDir, err := storedir.BuildTraceFilter(ctx, dir)
	if err != nil {
		return fmt.Errorf("store %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, storedir.TraceFilterFile), filter, 0o640); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, storedir.TraceDirFile), traceDir, 0o640)
}

// putFile uploads one file with its SHA-256 and checks it with a Head.
func putFile(ctx context.Context, b objstore.Bucket, key, p string, f objstore.ManifestFile) error {
	file, err := os.Open(p)
	if err != nil {
		return err
	}
	defer file.Close()
	sum, err := hex.DecodeString(f.SHA256)
	if err != nil {
		return err
	}
	if err := b.Put(ctx, key, file, f.Size, sum); err != nil {
		return fmt.Errorf("uploading %s: %w", key, err)
	}
	o, err := b.Head(ctx, key)
	if err != nil {
		return fmt.Errorf("checking upload of %s: %w", key, err)
	}
	if o.Size != f.Size {
		return fmt.Errorf("checking upload of %s: %d bytes stored, %d sent", key, o.Size, f.Size)
	}
	return nil
}

// DeleteGeneration removes every object of one generation of node/id
// (never the manifest). It returns how many objects it deleted.
func DeleteGeneration(ctx context.Context, b objstore.Bucket, prefix, node string, id uint32, generation string) (int, error) {
	if generation == "" || strings.Contains(generation, "/") {
		return 0, fmt.Errorf("generation %q is not a generation name", generation)
	}
	genPrefix := objstore.StorePrefix(prefix, node, id) + generation + "/"
	var keys []string
	if err := b.List(ctx, genPrefix, func(o objstore.Object) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		return 0, fmt.Errorf("listing generation %s: %w", genPrefix, err)
	}
	for i, k := range keys {
		if err := b.Delete(ctx, k); err != nil {
			return i, fmt.Errorf("deleting %s: %w", k, err)
		}
	}
	return len(keys), nil
}
