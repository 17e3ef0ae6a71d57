package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/cockroachdb/pebble/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/sstable"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/ztsd/ztsd/index/kv"
)

// Merge operator names the two indexes are created with (index.mergerName,
// textindex's newMerger): Pebble refuses to open a store with another.
var indexMergers = map[string]string{metaDirName: "ztsd.index.v1", textDirName: "ztsd.textindex.v1"}

// KeySpace is what one kind of key (its first byte) of one index takes:
// the logical bytes of its keys and values, and the size of an sstable
// holding only these keys, written with the index's own block size and
// bloom filter under each compression (so the compressions' cost is seen
// per kind of key).
type KeySpace struct {
	Index       string `json:"index"` // "meta" or "text"
	Prefix      string `json:"prefix"`
	Keys        int64  `json:"keys"`
	KeyBytes    int64  `json:"key_bytes"`
	ValueBytes  int64  `json:"value_bytes"`
	ZstdBytes   int64  `json:"zstd_bytes"`
	SnappyBytes int64  `json:"snappy_bytes"`
	NoneBytes   int64  `json:"none_bytes"`
}

// keyKinds names each kind of key (docs/format/index-keys.md and the
// textindex package documentation).
var keyKinds = map[string]string{
	"meta a": "attribute postings", "meta b": "block summaries", "meta c": "time columns", "meta m": "format, state",
	"meta r": "open block rows", "meta q": "trace-id runs", "meta t": "trace → span records", "meta v": "attribute value keys",
	"meta w": "text postings", "text s": "string → id", "text i": "id → string", "text g": "trigram postings",
	"text l": "long-string postings", "text m": "format, state",
}

// MeasureDataDirKeySpace sums MeasureKeySpace over every store of the
// data directory dir (closed), per index and kind of key.
func MeasureDataDirKeySpace(dir string) ([]KeySpace, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	sum := map[string]*KeySpace{}
	for _, e := range entries {
		if !e.IsDir() || !isStoreName(e.Name()) {
			continue
		}
		for _, ix := range []string{metaDirName, textDirName} {
			kss, err := MeasureKeySpace(filepath.Join(dir, e.Name(), ix), dir)
			if err != nil {
				return nil, fmt.Errorf("store %s: %w", e.Name(), err)
			}
			for _, ks := range kss {
				k := ks.Index + " " + ks.Prefix
				t, ok := sum[k]
				if !ok {
					t = &KeySpace{Index: ks.Index, Prefix: ks.Prefix}
					sum[k] = t
				}
				t.Keys += ks.Keys
				t.KeyBytes += ks.KeyBytes
				t.ValueBytes += ks.ValueBytes
				t.ZstdBytes += ks.ZstdBytes
				t.SnappyBytes += ks.SnappyBytes
				t.NoneBytes += ks.NoneBytes
			}
		}
	}
	out := make([]KeySpace, 0, len(sum))
	for _, ks := range sum {
		out = append(out, *ks)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Index != out[j].Index {
			return out[i].Index < out[j].Index
		}
		return out[i].Prefix < out[j].Prefix
	})
	return out, nil
}

// MeasureKeySpace reads the index in indexDir (a store's meta/ or text/,
// closed: it is opened read-only) and returns one KeySpace per kind of
// key, in key order. The sstables are written under tmpDir and removed.
func MeasureKeySpace(indexDir, tmpDir string) ([]KeySpace, error) {
	kind := filepath.Base(indexDir)
	name, ok := indexMergers[kind]
	if !ok {
		return nil, fmt.Errorf("%s: not a meta/ or text/ index directory", indexDir)
	}
	cache := kv.NewCache(8 << 20)
	defer cache.Unref()
	opts := kv.Options(cache, kv.NewMerger(name, func(byte, []byte, int) ([]byte, bool) { return nil, false }), nil)
	opts.ReadOnly = true
	db, err := pebble.Open(indexDir, opts)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", indexDir, err)
	}
	defer db.Close()
	it, err := db.NewIter(nil)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	tmp, err := os.MkdirTemp(tmpDir, "keyspace-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	comps := []sstable.Compression{sstable.ZstdCompression, sstable.SnappyCompression, sstable.NoCompression}
	type kindState struct {
		ks    KeySpace
		ws    []*sstable.Writer
		paths []string
	}
	var cur *kindState
	var out []KeySpace
	finish := func() error {
		if cur == nil {
			return nil
		}
		sizes := make([]int64, len(cur.ws))
		for i, w := range cur.ws {
			if err := w.Close(); err != nil {
				return err
			}
			fi, err := os.Stat(cur.paths[i])
			if err != nil {
				return err
			}
			sizes[i] = fi.Size()
			os.Remove(cur.paths[i])
		}
		cur.ks.ZstdBytes, cur.ks.SnappyBytes, cur.ks.NoneBytes = sizes[0], sizes[1], sizes[2]
		out = append(out, cur.ks)
		cur = nil
		return nil
	}
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		if cur == nil || cur.ks.Prefix != string(k[:1]) {
			if err := finish(); err != nil {
				return nil, err
			}
			cur = &kindState{ks: KeySpace{Index: kind, Prefix: string(k[:1])}}
			for i, c := range comps {
				p := filepath.Join(tmp, fmt.Sprintf("%x-%d.sst", k[0], i))
				f, err := vfs.Default.Create(p)
				if err != nil {
					return nil, err
				}
				cur.paths = append(cur.paths, p)
				cur.ws = append(cur.ws, sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{
					BlockSize: 4 << 10, Compression: c, FilterPolicy: bloom.FilterPolicy(10), FilterType: sstable.TableFilter,
					MergerName: name, TableFormat: kv.FormatMajorVersion.MaxTableFormat(), Comparer: opts.Comparer,
				}))
			}
		}
		cur.ks.Keys++
		cur.ks.KeyBytes += int64(len(k))
		cur.ks.ValueBytes += int64(len(v))
		for _, w := range cur.ws {
			if err := w.Set(k, v); err != nil {
				return nil, err
			}
		}
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	if err := finish(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Prefix < out[j].Prefix })
	return out, nil
}
