package storedir

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/trace"
)

// threeStores makes a data directory with stores 000000 and 000001 sealed
// and 000002 open, and returns the spans of each.
func threeStores(t *testing.T, dir string, o Options) [3][]*trace.Span {
	t.Helper()
	db := openTestDB(t, dir, o)
	var per [3][]*trace.Span
	for i := range per {
		per[i] = genWorkload(uint64(500+i), 300)
		appendAll(t, db, per[i], 100)
		if i < 2 {
			if err := db.Rotate(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return per
}

func globOne(t *testing.T, pattern string) string {
	t.Helper()
	m, _ := filepath.Glob(pattern)
	if len(m) == 0 {
		t.Fatalf("no file matches %s", pattern)
	}
	return m[0]
}

// servedSpans is every span a span-mode search returns.
func servedSpans(t *testing.T, db *DB) map[spanRef]bool {
	t.Helper()
	got := map[spanRef]bool{}
	for _, sp := range searchAll(t, db, Query{Spans: true, Limit: 1000}) {
		got[spanRef{sp.TraceID, sp.SpanID}] = true
	}
	return got
}

func waitServed(t *testing.T, db *DB, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		bad := db.Degraded()
		if len(bad) == 0 {
			return
		}
		if bad[0].State != StateRebuilding {
			t.Fatalf("store %s: %s: %s", name, bad[0].State, bad[0].Reason)
		}
		if time.Now().After(deadline) {
			t.Fatalf("store %s still %s after 30 s", name, bad[0].State)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStoreDamageQuarantined damages one part of one store at a time.
// Before, any of these stopped the whole DB from opening. Now the DB opens,
// every other store serves and takes writes, the damaged store is listed
// as not served with the reason, and when its data file is intact its
// indexes (and config.props) are rebuilt in the background and it serves
// every span again.
func TestStoreDamageQuarantined(t *testing.T) {
	cases := []struct {
		name    string
		store   uint32 // which store is damaged
		damage  func(t *testing.T, sd string)
		rebuilt bool   // false: stays quarantined
		reason  string // in the reason
	}{
		{"ZTS0 magic", 1, func(t *testing.T, sd string) { flipBit(t, filepath.Join(sd, dataFile), 1, 0x01) }, false, "invalid file header"},
		{"ZTS0 flags", 1, func(t *testing.T, sd string) { flipBit(t, filepath.Join(sd, dataFile), 7, 0x02) }, false, "ztsctl recover"},
		{"config.props garbage", 1, func(t *testing.T, sd string) {
			os.WriteFile(filepath.Join(sd, propsFile), []byte("format_version=\x00\x01zz\nstate=what\n"), 0o640)
		}, true, "config.props"},
		{"config.props newer format", 1, func(t *testing.T, sd string) {
			b, _ := os.ReadFile(filepath.Join(sd, propsFile))
			os.WriteFile(filepath.Join(sd, propsFile), []byte(strings.Replace(string(b), "format.version=1", "format.version=9", 1)), 0o640)
		}, false, "format version 9"},
		{"meta MANIFEST", 1, func(t *testing.T, sd string) {
			flipBit(t, globOne(t, filepath.Join(sd, metaDir, "MANIFEST-*")), 20, 0xff)
		}, true, "manifest"},
		{"text MANIFEST", 1, func(t *testing.T, sd string) {
			flipBit(t, globOne(t, filepath.Join(sd, textDir, "MANIFEST-*")), 20, 0xff)
		}, true, "manifest"},
		{"meta OPTIONS", 1, func(t *testing.T, sd string) {
			os.WriteFile(globOne(t, filepath.Join(sd, metaDir, "OPTIONS-*")), []byte("[Options]\n  comparer=nope\n"), 0o640)
		}, true, "comparer"},
		{"meta .sst footer", 1, func(t *testing.T, sd string) {
			f := globOne(t, filepath.Join(sd, metaDir, "*.sst"))
			fi, _ := os.Stat(f)
			flipBit(t, f, fi.Size()-10, 0xff)
		}, true, "metadata index"},
		{"open store meta MANIFEST", 2, func(t *testing.T, sd string) {
			flipBit(t, globOne(t, filepath.Join(sd, metaDir, "MANIFEST-*")), 20, 0xff)
		}, true, "manifest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := testOptions()
			o.MaxStoreSize = 64 << 20
			per := threeStores(t, dir, o)
			name := StoreName(tc.store)
			tc.damage(t, filepath.Join(dir, name))
			db, err := Open(context.Background(), dir, o)
			if err != nil {
				t.Fatalf("one damaged store kept the DB from opening: %v", err)
			}
			defer db.Close()
			bad := db.Degraded()
			if !tc.rebuilt {
				if len(bad) != 1 || bad[0].ID != name || bad[0].State != StateQuarantined || !strings.Contains(bad[0].Reason, tc.reason) {
					t.Fatalf("Degraded() = %+v, want %s quarantined saying %q", bad, name, tc.reason)
				}
			} else if len(bad) == 1 && (bad[0].ID != name || !strings.Contains(strings.ToLower(bad[0].Reason), strings.ToLower(tc.reason))) {
				t.Fatalf("Degraded() = %+v, want %s saying %q", bad, name, tc.reason)
			}
			listed := false
			for _, in := range db.Stores() {
				listed = listed || in.ID == name && (in.Reason != "" || tc.rebuilt)
			}
			if !listed {
				t.Fatalf("store %s not in Stores(): %+v", name, db.Stores())
			}
			// While the rebuild moves the store from the out-of-service set
			// to the served one, every listing names it exactly once.
			listings := make(chan error, 1)
			stopListing := make(chan struct{})
			go func() {
				defer close(listings)
				for {
					select {
					case <-stopListing:
						return
					default:
					}
					n := 0
					for _, in := range db.Stores() {
						if in.ID == name {
							n++
						}
					}
					if n != 1 {
						listings <- fmt.Errorf("store %s listed %d times by Stores() during its rebuild", name, n)
						return
					}
				}
			}()
			// Writes go on (to the open store, or a new one).
			more := genWorkload(900, 50)
			appendAll(t, db, more, 50)
			if tc.rebuilt {
				waitServed(t, db, name)
			}
			close(stopListing)
			if err := <-listings; err != nil {
				t.Fatal(err)
			}
			got := servedSpans(t, db)
			for i, spans := range per {
				for _, sp := range spans {
					want := uint32(i) != tc.store || tc.rebuilt
					if k := (spanRef{sp.TraceID, sp.SpanID}); got[k] != want {
						t.Fatalf("span of store %d: served %v, want %v", i, got[k], want)
					}
				}
			}
			for _, sp := range more {
				if !got[spanRef{sp.TraceID, sp.SpanID}] {
					t.Fatal("a span written after the open is not served")
				}
			}
			if tc.rebuilt {
				checkGets(t, db, per[tc.store], 13)
				// Only the newest store is open.
				for _, in := range db.Stores() {
					if in.State == stateOpen && in.ID != db.Stores()[len(db.Stores())-1].ID {
						t.Fatalf("store %s is open but not the newest: %+v", in.ID, db.Stores())
					}
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			// The next open serves the same (rebuilt for good, or still
			// quarantined).
			db = openTestDB(t, dir, o)
			if n := len(db.Degraded()); n != map[bool]int{true: 0, false: 1}[tc.rebuilt] {
				t.Fatalf("after reopening: Degraded() = %+v", db.Degraded())
			}
		})
	}
}

// TestMissingDataFileSetAside: a store directory without traces.zts is
// deleted only when it is provably an interrupted creation (config.props
// alone, state open, no chunks); anything else is renamed aside and
// reported, never deleted. Before, every such directory was deleted whole.
func TestMissingDataFileSetAside(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(t *testing.T, sd string) // traces.zts is removed after
		removed bool
	}{
		{"empty directory", func(t *testing.T, sd string) {
			for _, e := range []string{propsFile, metaDir, textDir} {
				os.RemoveAll(filepath.Join(sd, e))
			}
		}, true},
		{"config.props of a new store", func(t *testing.T, sd string) {
			os.RemoveAll(filepath.Join(sd, metaDir))
			os.RemoveAll(filepath.Join(sd, textDir))
			sp := config.StoreProps{FormatVersion: FormatVersion, Compression: "lz4", Checksums: true, Created: time.Now(), State: stateOpen}
			if err := config.WritePropsFileAtomic(filepath.Join(sd, propsFile), sp.ToProps()); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"sealed store", func(t *testing.T, sd string) {}, false},
		{"config.props says sealed", func(t *testing.T, sd string) {
			os.RemoveAll(filepath.Join(sd, metaDir))
			os.RemoveAll(filepath.Join(sd, textDir))
		}, false},
		{"indexes left", func(t *testing.T, sd string) {
			os.WriteFile(filepath.Join(sd, propsFile), []byte("format_version=1\nstate=open\n"), 0o640)
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := testOptions()
			o.MaxStoreSize = 64 << 20
			o.Now = func() time.Time { return time.Unix(1_700_000_000, 0) }
			per := threeStores(t, dir, o)
			sd := filepath.Join(dir, StoreName(1))
			tc.prepare(t, sd)
			if err := os.Remove(filepath.Join(sd, dataFile)); err != nil {
				t.Fatal(err)
			}
			db := openTestDB(t, dir, o)
			aside := filepath.Join(dir, "000001.orphaned-1700000000")
			_, statErr := os.Stat(aside)
			if _, err := os.Stat(sd); !os.IsNotExist(err) {
				t.Fatalf("%s still there: %v", sd, err)
			}
			bad := db.Degraded()
			if tc.removed {
				if statErr == nil || len(bad) != 0 {
					t.Fatalf("interrupted creation not removed: aside %v, Degraded %+v", statErr, bad)
				}
			} else {
				if statErr != nil {
					t.Fatalf("not set aside: %v", statErr)
				}
				if len(bad) != 1 || bad[0].State != StateOrphaned || bad[0].ID != "000001.orphaned-1700000000" || !strings.Contains(bad[0].Reason, "traces.zts is missing") {
					t.Fatalf("Degraded() = %+v", bad)
				}
			}
			got := servedSpans(t, db)
			for _, sp := range append(per[0], per[2]...) {
				if !got[spanRef{sp.TraceID, sp.SpanID}] {
					t.Fatal("a span of another store is not served")
				}
			}
			db.Close()
			// Still reported after a restart, until the operator acts.
			db = openTestDB(t, dir, o)
			defer db.Close()
			if n := len(db.Degraded()); n != map[bool]int{true: 0, false: 1}[tc.removed] {
				t.Fatalf("after reopening: Degraded() = %+v", db.Degraded())
			}
		})
	}
}

// TestIndexDamageFoundByReads: a text index table damaged in a data block
// opens fine and fails only when a search reads that block. Before, every
// such search answered an error (500) until `ztsctl recover`. Now the
// search answers without that store and names it in a warning, and the
// store is taken out of service, rebuilt from its data file and served
// again, answering exactly what it did before the damage.
func TestIndexDamageFoundByReads(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	o.MaxStoreSize = 64 << 20
	per := threeStores(t, dir, o)
	q := Query{Text: "a", Spans: true, Limit: MaxSearchLimit}
	db := openTestDB(t, dir, o)
	want := map[spanRef]bool{}
	for _, sp := range searchAll(t, db, q) {
		want[spanRef{sp.TraceID, sp.SpanID}] = true
	}
	db.Close()
	in1 := map[spanRef]bool{}
	for _, sp := range per[1] {
		if k := (spanRef{sp.TraceID, sp.SpanID}); want[k] {
			in1[k] = true
		}
	}
	if len(in1) == 0 {
		t.Fatal("the query matches nothing in store 000001")
	}
	for _, f := range globAll(t, filepath.Join(dir, StoreName(1), textDir, "*.sst")) {
		fi, _ := os.Stat(f)
		flipBit(t, f, fi.Size()/3, 0xff)
	}
	db = openTestDB(t, dir, o)
	defer db.Close()
	res, err := db.Search(context.Background(), q)
	if err != nil {
		t.Fatalf("search over a damaged text index: %v", err)
	}
	if len(res.Warnings) != 1 || res.Warnings[0].Store != StoreName(1) || res.Warnings[0].Offset != 0 {
		t.Fatalf("warnings %+v, want one for store 000001's index", res.Warnings)
	}
	for _, sp := range res.Spans {
		k := spanRef{sp.TraceID, sp.SpanID}
		if in1[k] || !want[k] {
			t.Fatalf("span %s/%s in the answer: in the damaged store %v, expected %v", sp.TraceID, sp.SpanID, in1[k], want[k])
		}
	}
	if len(res.Spans) != len(want)-len(in1) {
		t.Fatalf("%d results, want %d (all but the damaged store's %d)", len(res.Spans), len(want)-len(in1), len(in1))
	}
	waitServed(t, db, StoreName(1))
	res, err = db.Search(context.Background(), q)
	if err != nil || len(res.Warnings) != 0 || len(res.Spans) != len(want) {
		t.Fatalf("after the rebuild: %v, %d warnings, %d results, want %d", err, len(res.Warnings), len(res.Spans), len(want))
	}
	// Writes go on meanwhile and after.
	appendAll(t, db, genWorkload(901, 20), 20)
}

func globAll(t *testing.T, pattern string) []string {
	t.Helper()
	m, _ := filepath.Glob(pattern)
	if len(m) == 0 {
		t.Fatalf("no file matches %s", pattern)
	}
	return m
}
