package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/config"
)

// TestIndexCacheSizeReachesTheStores: limits.index_cache_size (or a
// quarter of memory_budget when it is 0) is the index block cache the
// daemon opens its stores with.
func TestIndexCacheSizeReachesTheStores(t *testing.T) {
	for in, want := range map[string]int64{
		"[limits]\nindex_cache_size = \"48MiB\"": 48 << 20,
		"[limits]\nmemory_budget = \"2GiB\"":     512 << 20,
	} {
		cfg, err := config.Parse(strings.NewReader(in), "t.toml")
		if err != nil {
			t.Fatal(err)
		}
		o, err := storeOptions(cfg, slog.Default(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if o.IndexCacheBytes != want {
			t.Errorf("%q: IndexCacheBytes %d, want %d", in, o.IndexCacheBytes, want)
		}
	}
}
