package storedir

import (
	"context"
	"testing"

	"github.com/ztsd/ztsd/chunk"
)

// TestChangedChunkOptionsStartANewStore: a data directory whose open store
// was written with LZ4 is opened with zstd configured. The open store keeps
// LZ4 (its chunks and config.props); the first write rotates to a new store
// written with zstd (before, every append failed: chunks were encoded for
// zstd, the file takes LZ4); every span reads back from both.
func TestChangedChunkOptionsStartANewStore(t *testing.T) {
	dir := t.TempDir()
	lz4 := testOptions()
	lz4.Chunk = chunk.Options{Compression: chunk.LZ4, Checksums: true}
	db := openTestDB(t, dir, lz4)
	first := genWorkload(31, 200)
	if err := db.Append(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	zstd := testOptions()
	zstd.Chunk = chunk.Options{Compression: chunk.Zstd, Checksums: true}
	db = openTestDB(t, dir, zstd)
	defer db.Close()
	second := genWorkload(32, 200)
	for i := 0; i < len(second); i += 10 { // small requests: the grouped and the alone path
		if err := db.Append(context.Background(), second[i:i+10]); err != nil {
			t.Fatalf("append after the codec changed: %v", err)
		}
	}
	stores := db.Stores()
	if len(stores) != 2 || stores[0].Compression != "lz4" || stores[1].Compression != "zstd" {
		t.Fatalf("stores %+v; want the LZ4 store sealed and a zstd one", stores)
	}
	for _, sp := range append(first, second...) {
		got, err := db.GetSpan(context.Background(), sp.TraceID, sp.SpanID)
		if err != nil || got.Root.Method != sp.Root.Method {
			t.Fatalf("span %s/%s: %v", sp.TraceID, sp.SpanID, err)
		}
	}
}
