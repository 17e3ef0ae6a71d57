package bench

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/trace"
)

// Store directory layout (DESIGN.md "On-disk layout").
const (
	dataFileName = "traces.zts"
	metaDirName  = "meta"
	textDirName  = "text"
)

// Space is what a data directory holds on disk, by kind.
type Space struct {
	Stores int `json:"stores"`
	// DataBytes are the data files (traces.zts).
	DataBytes int64 `json:"disk_data_bytes"`
	// MetaBytes and TextBytes are the metadata and text indexes.
	MetaBytes int64 `json:"disk_meta_bytes"`
	TextBytes int64 `json:"disk_text_bytes"`
	// OtherBytes are config.props, LOCK, .broken files and the like.
	OtherBytes int64 `json:"disk_other_bytes"`
	TotalBytes int64 `json:"disk_total_bytes"`
	// Chunks, PayloadBytes and StoredBytes sum the data files' chunks:
	// payload (uncompressed CBOR) bytes and stored (compressed) bytes.
	Chunks int64 `json:"chunks"`
	// Spans counts the span entries of every chunk (a version of a span
	// stored twice counts twice).
	Spans        int64 `json:"chunk_spans"`
	PayloadBytes int64 `json:"chunk_payload_bytes"`
	StoredBytes  int64 `json:"chunk_stored_bytes"`
}

// MeasureSpace walks the data directory dir: file sizes by kind, and every
// chunk of every data file. It returns up to sampleBytes of chunk payloads
// (copies, taken from the first chunks of the newest store) for the LZ4
// probe. It reads a live directory too, but the numbers are then only a
// snapshot.
func MeasureSpace(dir string, sampleBytes int64) (Space, [][]byte, error) {
	var sp Space
	entries, err := os.ReadDir(dir)
	if err != nil {
		return sp, nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	var stores []string
	for _, e := range entries {
		if e.IsDir() && isStoreName(e.Name()) {
			stores = append(stores, filepath.Join(dir, e.Name()))
		}
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		parts := strings.Split(rel, string(filepath.Separator))
		n := fi.Size()
		switch {
		case len(parts) == 2 && isStoreName(parts[0]) && parts[1] == dataFileName:
			sp.DataBytes += n
		case len(parts) > 2 && isStoreName(parts[0]) && parts[1] == metaDirName:
			sp.MetaBytes += n
		case len(parts) > 2 && isStoreName(parts[0]) && parts[1] == textDirName:
			sp.TextBytes += n
		default:
			sp.OtherBytes += n
		}
		sp.TotalBytes += n
		return nil
	})
	if err != nil {
		return sp, nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	sp.Stores = len(stores)
	var samples [][]byte
	var sampled int64
	for i := len(stores) - 1; i >= 0; i-- {
		if err := scanStore(stores[i], &sp, func(payload []byte) {
			if sampled < sampleBytes {
				samples = append(samples, append([]byte(nil), payload...))
				sampled += int64(len(payload))
			}
		}); err != nil {
			return sp, samples, err
		}
	}
	return sp, samples, nil
}

func scanStore(store string, sp *Space, sample func([]byte)) error {
	path := filepath.Join(store, dataFileName)
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	h, err := chunk.ReadHeader(f, fi.Size())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	sc := chunk.NewScanner(f, fi.Size(), h.Options)
	for sc.Next() {
		info := sc.Info()
		_, payload := sc.Chunk()
		sp.Chunks++
		sp.PayloadBytes += info.LogicalSize
		sp.StoredBytes += info.StoredSize
		v, err := trace.NewChunkView(payload, trace.Limits{})
		if err != nil {
			return fmt.Errorf("%s: chunk at %d: %w", path, info.Offset, err)
		}
		sp.Spans += int64(v.Len())
		sample(payload)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: scan: %w", path, err)
	}
	if bad := sc.BadRegions(); len(bad) > 0 {
		return fmt.Errorf("%s: %d bad regions, the first at offset %d: %s", path, len(bad), bad[0].Offset, bad[0].Reason)
	}
	return nil
}

func isStoreName(s string) bool {
	if len(s) != 6 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// dataFiles lists the data files of every store in dir.
func dataFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && isStoreName(e.Name()) {
			p := filepath.Join(dir, e.Name(), dataFileName)
			if _, err := os.Stat(p); err == nil {
				out = append(out, p)
			}
		}
	}
	return out, nil
}
