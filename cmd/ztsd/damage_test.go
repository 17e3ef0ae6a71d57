package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// chunkAt is one chunk of a data file: where it starts and ends and the
// spans it holds.
type chunkAt struct {
	off, next int64
	spans     []*trace.Span
}

func dataFileChunks(t *testing.T, path string) []chunkAt {
	t.Helper()
	f, err := chunk.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []chunkAt
	sc := f.Scanner()
	for sc.Next() {
		off, payload := sc.Chunk()
		spans, err := trace.DecodeChunk(payload, trace.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, chunkAt{off, sc.Offset(), spans})
	}
	if sc.Err() != nil || len(sc.BadRegions()) > 0 {
		t.Fatalf("%s: %v %v", path, sc.Err(), sc.BadRegions())
	}
	return out
}

func xorByte(t *testing.T, path string, off int64, mask byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= mask
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// TestFlippedBitServedWithWarning flips one bit in a chunk of a sealed
// store and reads through the real daemon: searches and gets answer 200
// without that chunk's spans and with a warning naming the store and
// offset (ztsctl prints it to stderr and exits 0), every other span is
// served, ztsd_damaged_chunks_total counts the chunk once and the daemon
// logs it once. Before, every search page that reached the chunk and
// every get of a trace in it answered 500 until `ztsctl recover` ran.
func TestFlippedBitServedWithWarning(t *testing.T) {
	d := daemontest.New(t, "")
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.ChunkTargetSize = 16 << 10
	db, err := storedir.Open(context.Background(), d.DataDir, o)
	if err != nil {
		t.Fatal(err)
	}
	spans := workload.Spans(97, 2000)
	for i := 0; i < len(spans); i += 100 {
		if err := db.Append(context.Background(), spans[i:i+100]); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Rotate(); err != nil { // 000000 sealed, 000001 open
		t.Fatal(err)
	}
	db.Close()
	path := filepath.Join(d.DataDir, storedir.StoreName(0), "traces.zts")
	chunks := dataFileChunks(t, path)
	bad := chunks[len(chunks)/2]
	xorByte(t, path, bad.off+(bad.next-bad.off)/2, 0x08) // a payload bit
	lost := map[spanRef]bool{}
	for _, sp := range bad.spans {
		lost[refOf(sp)] = true
	}

	d.Start()
	var mu sync.Mutex
	var warned []client.Warning
	d.Client.OnWarning(func(w client.Warning) { mu.Lock(); warned = append(warned, w); mu.Unlock() })
	got := map[spanRef]bool{}
	it := d.Client.Search(client.Query{Spans: true, Limit: 50})
	for it.Next(context.Background()) {
		got[refOf(it.Span())] = true
	}
	if err := it.Err(); err != nil {
		t.Fatalf("search through the damaged chunk: %v", err)
	}
	for _, sp := range spans {
		if k := refOf(sp); got[k] == lost[k] {
			t.Fatalf("span %s/%s: served %v, in the damaged chunk %v", sp.TraceID, sp.SpanID, got[k], lost[k])
		}
	}
	mu.Lock()
	if len(warned) == 0 || warned[0].Store != "000000" || warned[0].Offset != bad.off || warned[0].Error == "" {
		t.Fatalf("search warnings %+v, want store 000000 offset %d", warned, bad.off)
	}
	mu.Unlock()

	victim := bad.spans[0].TraceID
	out, errOut, code := d.Ctl(nil, "get", victim.String(), "--json")
	wantWarn := fmt.Sprintf("store 000000: damaged chunk at offset %d", bad.off)
	if code != 0 || !strings.Contains(errOut, wantWarn) {
		t.Fatalf("ztsctl get of a trace in the damaged chunk: exit %d, stderr %q, want the warning %q\n%s", code, errOut, wantWarn, out)
	}
	out, errOut, code = d.Ctl(nil, "search", "--spans", "--limit", "10000", "--json")
	if code != 0 || !strings.Contains(errOut, wantWarn) || strings.Count(out, "\n") != len(spans)-len(bad.spans) {
		t.Fatalf("ztsctl search: exit %d, %d lines, stderr %q", code, strings.Count(out, "\n"), errOut)
	}
	// A trace with no span in the damaged chunk has no warning.
	for _, sp := range spans {
		if !lost[refOf(sp)] && sp.TraceID != victim {
			if _, errOut, code := d.Ctl(nil, "get", sp.TraceID.String()); code != 0 || errOut != "" {
				t.Fatalf("get of an intact trace: exit %d, stderr %q", code, errOut)
			}
			break
		}
	}
	m, err := d.Client.Metrics(context.Background())
	if err != nil || !strings.Contains(m, "\nztsd_damaged_chunks_total 1\n") {
		t.Fatalf("metrics: %v; want ztsd_damaged_chunks_total 1 in:\n%s", err, grepLines(m, "damaged"))
	}
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(d.Stderr(), "damaged chunk skipped"); n != 1 {
		t.Fatalf("the damaged chunk was logged %d times, want once:\n%s", n, d.Stderr())
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestDamagedStoreQuarantinedDaemon damages one of three stores in each way
// and starts the real daemon: it starts (before, it exited), answers
// /healthz 200 "degraded" naming the store and the reason, lists it in
// /v1/stores (ztsctl stores prints the reason to stderr), serves the
// other stores, and — when the data file is intact — rebuilds the store
// and serves it again with /healthz back to "ok".
func TestDamagedStoreQuarantinedDaemon(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(t *testing.T, sd string)
		rebuilt bool
	}{
		{"ZTS0 header", func(t *testing.T, sd string) { xorByte(t, filepath.Join(sd, "traces.zts"), 0, 0x01) }, false},
		{"meta MANIFEST", func(t *testing.T, sd string) {
			m, _ := filepath.Glob(filepath.Join(sd, "meta", "MANIFEST-*"))
			xorByte(t, m[0], 20, 0xff)
		}, true},
		{"traces.zts missing", func(t *testing.T, sd string) { os.Remove(filepath.Join(sd, "traces.zts")) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := daemontest.New(t, "")
			o := storedir.DefaultOptions()
			o.Sync = storedir.SyncNone
			db, err := storedir.Open(context.Background(), d.DataDir, o)
			if err != nil {
				t.Fatal(err)
			}
			var per [3][]*trace.Span
			for i := range per {
				per[i] = workload.Spans(uint64(700+i), 200)
				if err := db.Append(context.Background(), per[i]); err != nil {
					t.Fatal(err)
				}
				if i < 2 {
					db.Rotate()
				}
			}
			db.Close()
			tc.damage(t, filepath.Join(d.DataDir, "000001"))
			d.Start()
			h, err := d.Client.HealthStatus(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !tc.rebuilt && (h.Status != "degraded" || len(h.Stores) != 1 || !strings.HasPrefix(h.Stores[0].ID, "000001") || h.Stores[0].Reason == "") {
				t.Fatalf("/healthz = %+v, want degraded naming 000001", h)
			}
			_, errOut, code := d.Ctl(nil, "stores")
			if code != 0 || !tc.rebuilt && !strings.Contains(errOut, "store 000001") {
				t.Fatalf("ztsctl stores: exit %d, stderr %q", code, errOut)
			}
			if tc.rebuilt {
				deadline := time.Now().Add(30 * time.Second)
				for h.Status != "ok" && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
					if h, err = d.Client.HealthStatus(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				if h.Status != "ok" {
					t.Fatalf("store not rebuilt: %+v", h)
				}
			}
			got := storedSpans(t, d.Client)
			for i, spans := range per {
				for _, sp := range spans {
					if want := i != 1 || tc.rebuilt; (got[refOf(sp)] != nil) != want {
						t.Fatalf("span of store %d: served %v, want %v", i, got[refOf(sp)] != nil, want)
					}
				}
			}
			if err := d.Client.Put(context.Background(), workload.Spans(999, 10)...); err != nil {
				t.Fatalf("write next to a quarantined store: %v", err)
			}
			if err := d.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		})
	}
}
