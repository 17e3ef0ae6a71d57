package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/storedir"
)

// TestVerifyAfterKill9 kills the daemon with SIGKILL after acknowledged
// writes (the indexes have no WAL: they lag the data files) and runs
// verify before any restart: index lag is what a crash leaves and the next
// open heals, so verify exits 0 and says so; it still fails on real
// corruption. Before, verify failed on every store until a restart.
func TestVerifyAfterKill9(t *testing.T) {
	d := daemontest.New(t, "sync = \"always\"\n[store]\nmax_store_size = \"256KiB\"\nchunk_target_size = \"16KiB\"")
	d.Start()
	spans := workload.Spans(321, 3000)
	for i := 0; i < len(spans); i += 100 {
		if err := d.Client.Put(context.Background(), spans[i:i+100]...); err != nil {
			t.Fatal(err)
		}
	}
	d.Signal(syscall.SIGKILL)
	out, errOut, code := d.Ctl(nil, "verify", "--data-dir", d.DataDir)
	if code != 0 {
		t.Fatalf("verify after kill -9: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "index lag") {
		t.Fatalf("verify after kill -9 does not mention the index lag:\n%s", out)
	}
	// Real corruption still fails verify.
	stores, _ := filepath.Glob(filepath.Join(d.DataDir, "0*"))
	data := filepath.Join(stores[0], "traces.zts")
	xorByte(t, data, 100, 0x10)
	if out, _, code := d.Ctl(nil, "verify", "--data-dir", d.DataDir); code == 0 {
		t.Fatalf("verify passed a flipped bit:\n%s", out)
	}
}

// TestRecoverThenVerify cuts a data file to 0, 10 (a torn header) and 20
// bytes (a torn chunk header), runs `ztsctl recover`, and then verify must
// exit 0 whenever recover did. Before, verify failed after a recover that
// exited 0 for files cut to 0 or 10 bytes.
func TestRecoverThenVerify(t *testing.T) {
	for _, size := range []int64{0, 10, 20} {
		t.Run(strings.ReplaceAll(t.Name(), "/", "_")+"-"+itoa(size), func(t *testing.T) {
			d := daemontest.New(t, "")
			o := storedir.DefaultOptions()
			o.Sync = storedir.SyncNone
			db, err := storedir.Open(context.Background(), d.DataDir, o)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Append(context.Background(), workload.Spans(5, 200)); err != nil {
				t.Fatal(err)
			}
			db.Rotate()
			if err := db.Append(context.Background(), workload.Spans(6, 200)); err != nil {
				t.Fatal(err)
			}
			db.Close()
			for _, store := range []string{"000000", "000001"} {
				if err := os.Truncate(filepath.Join(d.DataDir, store, "traces.zts"), size); err != nil {
					t.Fatal(err)
				}
			}
			out, errOut, code := d.Ctl(nil, "recover", "--data-dir", d.DataDir)
			if code != 0 {
				t.Fatalf("recover: exit %d\n%s%s", code, out, errOut)
			}
			out, errOut, code = d.Ctl(nil, "verify", "--data-dir", d.DataDir)
			if code != 0 {
				t.Fatalf("recover exited 0 but verify fails: exit %d\n%s%s", code, out, errOut)
			}
			d.Start()
			if err := d.Client.Put(context.Background(), workload.Spans(7, 10)...); err != nil {
				t.Fatal(err)
			}
			d.Signal(syscall.SIGTERM)
			if out, errOut, code := d.Ctl(nil, "verify", "--data-dir", d.DataDir); code != 0 {
				t.Fatalf("verify after the daemon ran: exit %d\n%s%s", code, out, errOut)
			}
		})
	}
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
