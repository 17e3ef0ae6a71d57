package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/internal/daemontest"
)

// slowBody opens a connection and sends the head of a write request whose
// body never finishes.
func slowBody(t testing.TB, socket string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	fmt.Fprintf(c, "POST /v1/traces HTTP/1.1\r\nHost: ztsd\r\nContent-Type: application/x-ndjson\r\nContent-Length: 100000\r\n\r\n{")
	return c
}

// TestSlowBodiesAndConnectionCap: a client sending its body slower than
// read_timeout is disconnected (before, 300 slow bodies stayed open
// forever and 21,000 exhausted the fd limit), and past max_connections a
// new client is answered 503 "too many connections" at once instead of
// hanging; SIGHUP raising max_connections applies at once; once the slow
// clients are gone, their connections are free again.
func TestSlowBodiesAndConnectionCap(t *testing.T) {
	t.Parallel()
	maxConns := 40
	if os.Getenv("ZTSD_SOAK") != "" {
		maxConns = 2000 // make soak: many more slow clients
	}
	d := daemontest.New(t, fmt.Sprintf("[limits]\nread_timeout = \"1s\"\nidle_timeout = \"1s\"\nmax_connections = %d", maxConns))
	d.Start()

	// maxConns slow bodies take every connection.
	var slow []net.Conn
	for range maxConns {
		slow = append(slow, slowBody(t, d.Socket))
	}
	defer func() {
		for _, c := range slow {
			c.Close()
		}
	}()
	time.Sleep(100 * time.Millisecond) // let the daemon accept them all
	t0 := time.Now()

	// The next client is refused with a clear answer, not left hanging.
	c, err := net.Dial("unix", d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: ztsd\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("client past max_connections: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	c.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "too many connections") ||
		resp.Header.Get("Retry-After") == "" {
		t.Fatalf("client past max_connections: %d %q (Retry-After %q)", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}

	// SIGHUP raises max_connections: a new client is served while the slow
	// bodies still hold theirs (read_timeout is still running for them).
	d.WriteConfig(fmt.Sprintf("[limits]\nread_timeout = \"5s\"\nidle_timeout = \"1s\"\nmax_connections = %d", maxConns+5))
	d.Signal(syscall.SIGHUP)
	for !strings.Contains(d.Stderr(), "limits.max_connections") {
		if time.Since(t0) > 2*time.Second {
			t.Fatalf("no reload logged:\n%s", d.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := d.Client.Health(context.Background()); err != nil {
		t.Fatalf("after raising max_connections: %v", err)
	}
	if time.Since(t0) > 900*time.Millisecond {
		t.Logf("reload took %v: the slow bodies may have timed out already", time.Since(t0))
	}

	// Within read_timeout (1 s: the running server keeps it until a
	// restart) plus slack, the daemon hangs up on every slow body.
	t0 = time.Now()
	for i, c := range slow {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := io.Copy(io.Discard, c)
		if err != nil {
			t.Fatalf("slow body %d: not closed by the daemon: %v", i, err)
		}
	}
	took := time.Since(t0)
	t.Logf("%d slow bodies closed by the daemon within %v of read_timeout 1s", maxConns, took.Round(time.Millisecond))

	// Their connections are free again.
	if err := d.Client.Health(context.Background()); err != nil {
		t.Fatalf("after the slow bodies: %v", err)
	}
	if n := fdCount(t, d.Cmd.Process.Pid); n > 200 {
		t.Errorf("daemon holds %d file descriptors after the slow clients left", n)
	}
	if n := metric(t, d.Client, "ztsd_connections_refused_total"); n < 1 {
		t.Errorf("ztsd_connections_refused_total = %v after a refusal", n)
	}
}

func fdCount(t testing.TB, pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// rssBytes reads VmRSS of pid.
func rssBytes(t testing.TB, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// bigBody is about size bytes of valid Trace JSON lines.
func bigBody(size int) []byte {
	pad := strings.Repeat("x", 1800)
	var b bytes.Buffer
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `{"trace_id":"%032x","span_id":"%016x","start_ns":%d,"duration_ns":1000,"attrs":{"pad":"%s"}}`+"\n",
			i+1, i+1, 1_700_000_000_000_000_000+int64(i), pad)
	}
	return b.Bytes()
}

// TestMemoryBudgetBoundsRSS: 16 concurrent 60 MiB bodies (before: 3.6 GB
// RSS) against memory_budget = 512MiB: the daemon's RSS stays under the
// budget, the requests past it get 503 with Retry-After naming
// memory_budget, and the ones admitted are stored.
func TestMemoryBudgetBoundsRSS(t *testing.T) {
	const budget = 512 << 20
	d := daemontest.New(t, "[limits]\nmax_body_size = \"61MiB\"\nmemory_budget = \"512MiB\"\nmax_string_size = \"16KiB\"")
	d.Start()
	body := bigBody(60 << 20)

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if r := rssBytes(t, d.Cmd.Process.Pid); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.Socket)
	}}}
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	errs := make(chan string, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, "http://ztsd/v1/traces", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/x-ndjson")
			resp, err := hc.Do(req)
			if err != nil {
				// The daemon answers 503 without reading the body and
				// closes; a client still writing may see the reset.
				refused.Add(1)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK:
				ok.Add(1)
			case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" &&
				strings.Contains(string(b), "memory_budget"):
				refused.Add(1)
			default:
				errs <- fmt.Sprintf("status %d (Retry-After %q): %.300s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	t.Logf("16 concurrent 60 MiB bodies: %d stored, %d refused; peak RSS %d MiB (memory_budget 512 MiB)", ok.Load(), refused.Load(), peak.Load()>>20)
	if ok.Load() == 0 || refused.Load() == 0 {
		t.Errorf("%d stored, %d refused: want some of each", ok.Load(), refused.Load())
	}
	if peak.Load() > budget {
		t.Errorf("peak RSS %d MiB exceeds memory_budget 512 MiB", peak.Load()>>20)
	}
	// A refused client retries once the budget frees up.
	req, _ := http.NewRequest(http.MethodPost, "http://ztsd/v1/traces", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("retry after the burst: status %d", resp.StatusCode)
	}
	if peakReserved := metric(t, d.Client, "ztsd_memory_budget_peak_bytes"); peakReserved > budget || peakReserved < 4*60<<20 {
		t.Errorf("ztsd_memory_budget_peak_bytes = %v: want one 60 MiB body's 240 MiB to 512 MiB", peakReserved)
	}
}
