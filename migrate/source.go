package migrate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// Names in and next to data directories.
const (
	dataFileName      = "traces.zts"
	propsFileName     = "config.props"
	lockFileName      = "LOCK"
	stateDirName      = ".migrate"
	stateDeletingName = ".migrate.deleting"
	stateNewName      = ".migrate.new"
	stateDBName       = "state"
	reportFileName    = ".migrate-report.json"
	newSuffix         = ".migrate-new"
	oldSuffix         = ".migrate-old"
	// maxPropsBytes bounds a config.props read for its format version.
	maxPropsBytes = 1 << 20
)

// sourceStore is one store of the manifest: the source stores in the order
// they are copied, as they were when the migration started.
type sourceStore struct {
	Source      int    `json:"source"` // index into params.Sources
	Dir         string `json:"dir"`
	ID          uint32 `json:"id"`
	Version     int    `json:"format_version"`
	Size        int64  `json:"size"` // of the data file
	Compression string `json:"compression"`
	Checksums   bool   `json:"checksums"`
}

func (s sourceStore) dataPath() string { return filepath.Join(s.Dir, dataFileName) }

func (s sourceStore) options() chunk.Options {
	c, _ := chunk.ParseCompression(s.Compression)
	return chunk.Options{Compression: c, Checksums: s.Checksums}
}

// params are what a migration was started with; a resume must match them.
type params struct {
	Sources     []string      `json:"sources"`
	InPlace     bool          `json:"in_place"`
	Compression string        `json:"compression"`
	Checksums   bool          `json:"checksums"`
	SinceNS     int64         `json:"since_ns"`
	UntilNS     int64         `json:"until_ns"`
	DropAttrs   []string      `json:"drop_attrs"`
	Stores      []sourceStore `json:"stores"`
}

// diff names the first difference between p (recorded) and q (now).
func (p *params) diff(q *params) string {
	switch {
	case strings.Join(p.Sources, "\x00") != strings.Join(q.Sources, "\x00"):
		return fmt.Sprintf("sources %q, now %q", p.Sources, q.Sources)
	case p.InPlace != q.InPlace:
		return fmt.Sprintf("in-place %v, now %v", p.InPlace, q.InPlace)
	case p.Compression != q.Compression || p.Checksums != q.Checksums:
		return fmt.Sprintf("compression %s checksums %v, now %s checksums %v", p.Compression, p.Checksums, q.Compression, q.Checksums)
	case p.SinceNS != q.SinceNS || p.UntilNS != q.UntilNS:
		return fmt.Sprintf("time range [%d, %d), now [%d, %d)", p.SinceNS, p.UntilNS, q.SinceNS, q.UntilNS)
	case strings.Join(p.DropAttrs, "\x00") != strings.Join(q.DropAttrs, "\x00"):
		return fmt.Sprintf("dropped attributes %q, now %q", p.DropAttrs, q.DropAttrs)
	}
	return ""
}

// manifestDiff names the first difference between two manifests.
func manifestDiff(was, now []sourceStore) string {
	if len(was) != len(now) {
		return fmt.Sprintf("%d source stores, now %d", len(was), len(now))
	}
	for i := range was {
		if was[i] != now[i] {
			return fmt.Sprintf("store %s was %d bytes (format %d, %s), now %d bytes (format %d, %s)",
				was[i].Dir, was[i].Size, was[i].Version, was[i].Compression, now[i].Size, now[i].Version, now[i].Compression)
		}
	}
	return ""
}

// listStores returns the store directories of a data directory, ascending.
func listStores(dir string) ([]uint32, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	var ids []uint32
	for _, e := range entries {
		if id, ok := storedir.ParseStoreName(e.Name()); ok && e.IsDir() {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

// buildManifest describes every store of every source, in copy order.
// Store directories without a data file (an interrupted creation, which
// the daemon removes) hold nothing and are left out.
func buildManifest(sources []string) ([]sourceStore, error) {
	var out []sourceStore
	for si, src := range sources {
		ids, err := listStores(src)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			dir := filepath.Join(src, storedir.StoreName(id))
			fi, err := os.Stat(filepath.Join(dir, dataFileName))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("source store %s: %w", dir, err)
			}
			st := sourceStore{Source: si, Dir: dir, ID: id, Size: fi.Size()}
			if st.Version, err = readFormatVersion(dir); err != nil {
				return nil, err
			}
			if st.Size >= chunk.HeaderSize {
				opt, err := readDataHeader(st.dataPath(), st.Size)
				if err != nil {
					return nil, err
				}
				st.Compression, st.Checksums = opt.Compression.String(), opt.Checksums
			} else {
				st.Compression = chunk.None.String()
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// readFormatVersion reads format.version from a store's config.props; a
// missing config.props means the current version (storedir rebuilds it
// from the data file the same way).
func readFormatVersion(storeDir string) (int, error) {
	path := filepath.Join(storeDir, propsFileName)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return storedir.FormatVersion, nil
	}
	if err != nil {
		return 0, fmt.Errorf("source store %s: %w", storeDir, err)
	}
	if fi.Size() > maxPropsBytes {
		return 0, fmt.Errorf("source store %s: %s is %d bytes, more than %d", storeDir, propsFileName, fi.Size(), maxPropsBytes)
	}
	p, err := config.ReadPropsFile(path)
	if err != nil {
		return 0, fmt.Errorf("source store %s: %w", storeDir, err)
	}
	s, ok := p.Get("format.version")
	if !ok {
		return 0, fmt.Errorf("source store %s: %s has no format.version", storeDir, propsFileName)
	}
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 1 {
		return 0, fmt.Errorf("source store %s: %s: format.version %q is not a positive integer", storeDir, propsFileName, s)
	}
	return v, nil
}

func readDataHeader(path string, size int64) (chunk.Options, error) {
	f, err := os.Open(path)
	if err != nil {
		return chunk.Options{}, fmt.Errorf("source %s: %w", path, err)
	}
	defer f.Close()
	h, err := chunk.ReadHeader(f, size)
	if err != nil {
		return chunk.Options{}, fmt.Errorf("source %s: %w (run `ztsctl recover` on it first)", path, err)
	}
	return h.Options, nil
}

// sourceChunk is one valid chunk of a source data file, decoded.
type sourceChunk struct {
	Off, End int64
	Spans    []*trace.Span
	// Err is set when the chunk's framing is valid but its payload does
	// not decode; Spans is nil then.
	Err error
}

// readStore calls fn for every valid chunk of st at or after offset from,
// in file order, and bad for every bad region the scanner reports. The
// data file is opened read-only; a size different from the manifest's is
// ErrSourceChanged.
func readStore(ctx context.Context, st sourceStore, from int64, up Upgrader, lim trace.Limits,
	fn func(c sourceChunk) error, bad func(chunk.BadRegion) error) error {
	if st.Size < chunk.HeaderSize {
		return nil
	}
	f, err := os.Open(st.dataPath())
	if err != nil {
		return fmt.Errorf("source store %s: %w", st.Dir, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("source store %s: %w", st.Dir, err)
	}
	if fi.Size() != st.Size {
		return fmt.Errorf("%w: %s is %d bytes, was %d", ErrSourceChanged, st.dataPath(), fi.Size(), st.Size)
	}
	h, err := chunk.ReadHeader(f, st.Size)
	if err != nil {
		return fmt.Errorf("source store %s: %w (run `ztsctl recover` on it first)", st.Dir, err)
	}
	sc := chunk.NewScanner(f, st.Size, h.Options)
	sc.SetOffset(from)
	reported := 0
	report := func() error {
		regions := sc.BadRegions()
		for ; reported < len(regions); reported++ {
			if err := bad(regions[reported]); err != nil {
				return err
			}
		}
		return nil
	}
	for sc.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := report(); err != nil {
			return err
		}
		off, payload := sc.Chunk()
		c := sourceChunk{Off: off, End: sc.Offset()}
		spans, err := up(payload, lim)
		if err != nil {
			c.Err = fmt.Errorf("chunk at offset %d: %w", off, err)
		} else {
			c.Spans = spans
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("source store %s: read from offset %d: %w", st.Dir, sc.Offset(), err)
	}
	return report()
}

// sourceReader reads single pieces back from source stores by location
// (for verifying streamed spans), keeping the last decoded chunk.
type sourceReader struct {
	stores []sourceStore
	ups    map[int]Upgrader
	lim    trace.Limits
	files  map[uint32]*os.File
	last   struct {
		loc   pieceLoc
		spans []*trace.Span
		ok    bool
	}
}

func newSourceReader(stores []sourceStore, ups map[int]Upgrader, lim trace.Limits) *sourceReader {
	return &sourceReader{stores: stores, ups: ups, lim: lim, files: map[uint32]*os.File{}}
}

func (r *sourceReader) piece(loc pieceLoc) (*trace.Span, error) {
	if int(loc.Store) >= len(r.stores) {
		return nil, fmt.Errorf("%w: source store index %d of %d", errCorruptState, loc.Store, len(r.stores))
	}
	st := r.stores[loc.Store]
	if !(r.last.ok && r.last.loc.Store == loc.Store && r.last.loc.Offset == loc.Offset) {
		f := r.files[loc.Store]
		if f == nil {
			var err error
			if f, err = os.Open(st.dataPath()); err != nil {
				return nil, fmt.Errorf("source store %s: %w", st.Dir, err)
			}
			r.files[loc.Store] = f
		}
		payload, _, err := chunk.ReadChunkAt(f, st.Size, st.options(), loc.Offset)
		if err != nil {
			return nil, fmt.Errorf("source store %s: %w", st.Dir, err)
		}
		spans, err := r.ups[st.Version](payload, r.lim)
		if err != nil {
			return nil, fmt.Errorf("source store %s chunk at offset %d: %w", st.Dir, loc.Offset, err)
		}
		r.last.loc, r.last.spans, r.last.ok = loc, spans, true
	}
	if int(loc.Index) >= len(r.last.spans) {
		return nil, fmt.Errorf("source store %s chunk at offset %d: span %d of %d: %w", st.Dir, loc.Offset, loc.Index, len(r.last.spans), trace.ErrNoSuchSpan)
	}
	return r.last.spans[loc.Index], nil
}

func (r *sourceReader) close() {
	for _, f := range r.files {
		f.Close()
	}
}
