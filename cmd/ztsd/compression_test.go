package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/trace"
)

// TestStoreCompressionActs: [store] compression decides the codec of the
// data file of a new store (its header flags and config.props), the
// default is zstd, zstd stores the same spans in fewer bytes than lz4, and a
// store keeps its codec when the daemon restarts with another setting while
// new writes go to a new store with the new one.
func TestStoreCompressionActs(t *testing.T) {
	spans := workload.Spans(23, 1500)
	dataBytes := map[string]int64{}
	for _, tc := range []struct{ setting, want string }{
		{"", "zstd"}, {"lz4", "lz4"}, {"zstd", "zstd"}, {"none", "none"},
	} {
		t.Run("setting="+tc.setting, func(t *testing.T) {
			toml := ""
			if tc.setting != "" {
				toml = fmt.Sprintf("[store]\ncompression = %q", tc.setting)
			}
			d := daemontest.New(t, toml)
			d.Start()
			for i := 0; i < len(spans); i += 250 {
				if err := d.Client.Put(context.Background(), spans[i:i+250]...); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Signal(syscall.SIGTERM); err != nil {
				t.Fatalf("SIGTERM: %v\n%s", err, d.Stderr())
			}
			store := filepath.Join(d.DataDir, "000000")
			f, err := os.Open(filepath.Join(store, "traces.zts"))
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := f.Stat()
			h, err := chunk.ReadHeader(f, fi.Size())
			f.Close()
			if err != nil || h.Options.Compression.String() != tc.want || !h.Options.Checksums {
				t.Fatalf("data file header %+v (%v), want %s with checksums", h, err, tc.want)
			}
			props, _ := os.ReadFile(filepath.Join(store, "config.props"))
			if !strings.Contains(string(props), "compression="+tc.want+"\n") {
				t.Fatalf("config.props says:\n%s\nwant compression=%s", props, tc.want)
			}
			dataBytes[tc.want] = fi.Size()

			// Restarted with another codec, the store keeps its own, its
			// spans read back, and new spans go to a new store written
			// with the new codec.
			other := "lz4"
			if tc.want == "lz4" {
				other = "zstd"
			}
			d.WriteConfig(fmt.Sprintf("[store]\ncompression = %q", other))
			d.Start()
			more := workload.Spans(24, 100)
			if err := d.Client.Put(context.Background(), more...); err != nil {
				t.Fatalf("put after a restart with compression %s: %v", other, err)
			}
			for _, sp := range []*trace.Span{spans[0], spans[777], spans[len(spans)-1], more[0], more[99]} {
				got, err := d.Client.GetSpan(context.Background(), sp.TraceID, sp.SpanID)
				if err != nil || got.SpanID != sp.SpanID || got.Root.Method != sp.Root.Method {
					t.Fatalf("span %s/%s after a restart with compression %s: %v", sp.TraceID, sp.SpanID, other, err)
				}
			}
			if err := d.Signal(syscall.SIGTERM); err != nil {
				t.Fatalf("SIGTERM: %v\n%s", err, d.Stderr())
			}
			for st, want := range map[string]string{"000000": tc.want, "000001": other} {
				props, _ := os.ReadFile(filepath.Join(d.DataDir, st, "config.props"))
				if !strings.Contains(string(props), "compression="+want+"\n") {
					t.Fatalf("after a restart with compression %s, store %s's config.props says:\n%s\nwant compression=%s", other, st, props, want)
				}
			}
		})
	}
	if dataBytes["zstd"] >= dataBytes["lz4"] || dataBytes["lz4"] >= dataBytes["none"] {
		t.Fatalf("data file bytes by codec: %v; want zstd < lz4 < none", dataBytes)
	}
	t.Logf("data file bytes of %d spans: %v", len(spans), dataBytes)
}
