package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ztsd/ztsd/chunk"
)

// HTTPCommitLimit is the ceiling of closed-loop writers that send one small
// request at a time over HTTP and are answered after a group fdatasync, on
// this machine: what the unbatched phase would reach if the daemon did
// nothing but answer HTTP and commit (ProbeHTTPCommit).
type HTTPCommitLimit struct {
	// SpansPerS is requests (one span each) answered per second.
	SpansPerS float64 `json:"http_commit_spans_per_s"`
	// P50Ms is the median request latency.
	P50Ms float64 `json:"http_commit_p50_ms"`
	// Writers is the number of closed-loop writers.
	Writers int `json:"http_commit_writers"`
	// SyncsPerS is group commits (fdatasyncs) per second.
	SyncsPerS float64 `json:"http_commit_syncs_per_s"`
}

// ProbeHTTPCommitBodyBytes is the request body of the HTTP commit probe:
// about one span of the bench workload as a CBOR chunk payload (the
// unbatched phase's bodies average ~1 KiB).
const ProbeHTTPCommitBodyBytes = 1024

// ProbeHTTPCommit measures the HTTP commit ceiling for d: writers clients
// (the bench's own net/http client, as the unbatched phase uses) each send
// POST requests of ProbeHTTPCommitBodyBytes random bytes in a closed loop
// to a net/http server on a unix socket, in this process. The server reads
// each body and hands it to one committer goroutine, which takes every
// request waiting, waits for the rest of the writers at most one recent
// fdatasync (2 ms at most; the daemon's adaptive group commit, knowing
// the writers), appends one chunk of ProbeChunkBytes/2 bytes per request
// to a data file under dir (chunk.File, as the daemon's committer appends,
// the chunks encoded beforehand) and fdatasyncs it; then every request of
// the group is answered as the daemon answers a write. Nothing is decoded,
// encoded, compressed or indexed: the gap between this and the unbatched
// phase is the daemon's own work per request, while what this probe spends
// (the HTTP round trip of both sides, their wake-ups, the fdatasync) no
// server over net/http and fdatasync avoids. Client and server share this
// process's scheduler, where the daemon's phase has them in two processes.
func ProbeHTTPCommit(ctx context.Context, dir string, writers int, d time.Duration) (HTTPCommitLimit, error) {
	lim := HTTPCommitLimit{Writers: writers}
	if writers <= 0 {
		return lim, fmt.Errorf("http commit probe: %d writers", writers)
	}
	tmp, err := os.MkdirTemp(dir, ".bench-probe-http-*")
	if err != nil {
		return lim, fmt.Errorf("http commit probe in %s: %w", dir, err)
	}
	defer os.RemoveAll(tmp)
	opt := chunk.Options{Compression: chunk.Zstd, Checksums: true}
	f, err := chunk.Create(filepath.Join(tmp, "traces.zts"), opt)
	if err != nil {
		return lim, fmt.Errorf("http commit probe: %w", err)
	}
	defer f.Close()
	// The chunk of a group of n requests, encoded once for each n.
	rnd := rand.New(rand.NewPCG(3, 4))
	randomBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		return b
	}
	chunks := make([]chunk.EncodedChunk, writers+1)
	for n := 1; n <= writers; n++ {
		if chunks[n], err = chunk.Encode(randomBytes(n*ProbeChunkBytes/2), opt, nil); err != nil {
			return lim, fmt.Errorf("http commit probe: encode a chunk: %w", err)
		}
	}
	sockDir, err := os.MkdirTemp("/tmp", "ztsb-probe-") // sun_path holds 107 bytes
	if err != nil {
		return lim, fmt.Errorf("http commit probe: %w", err)
	}
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "probe.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return lim, fmt.Errorf("http commit probe: %w", err)
	}
	c := &probeCommitter{reqs: make(chan chan error, 64), stop: make(chan struct{}), file: f, chunks: chunks, writers: writers}
	commitDone := make(chan struct{})
	go func() {
		defer close(commitDone)
		c.run()
	}()
	srv := &http.Server{Handler: http.HandlerFunc(c.serve), ReadHeaderTimeout: 10 * time.Second}
	serveDone := make(chan struct{})
	go func() {
		defer close(serveDone)
		srv.Serve(ln)
	}()
	hc := newHTTPClient(sock, "")
	defer func() {
		hc.close()
		srv.Close()
		<-serveDone
		close(c.stop)
		<-commitDone
	}()

	body := randomBytes(ProbeHTTPCommitBodyBytes)
	lats := make([]Latencies, writers)
	errs := make([]error, writers)
	syncs0 := c.syncs()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range lats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			for n := 0; n < 5 || time.Now().Before(deadline); n++ {
				t0 := time.Now()
				if err := hc.do(ctx, http.MethodPost, "/v1/traces", "application/cbor", body, &out); err != nil {
					errs[w] = fmt.Errorf("http commit probe: %w", err)
					return
				}
				lats[w].Add(time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return lim, err
	}
	var all Latencies
	for i := range lats {
		all.Merge(&lats[i])
	}
	lim.SpansPerS = float64(all.Len()) / elapsed.Seconds()
	lim.P50Ms = ms(all.Quantile(0.5))
	lim.SyncsPerS = float64(c.syncs()-syncs0) / elapsed.Seconds()
	return lim, nil
}

// probeCommitter is ProbeHTTPCommit's server: handlers queue their
// request's answer channel, the committer writes and syncs a group.
type probeCommitter struct {
	reqs    chan chan error
	stop    chan struct{}
	file    *chunk.File
	chunks  []chunk.EncodedChunk // by group size
	writers int

	mu     sync.Mutex
	nsyncs int64
}

func (c *probeCommitter) syncs() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nsyncs
}

// serve reads a request's body, waits for its group commit and answers
// as the daemon answers a write.
func (c *probeCommitter) serve(w http.ResponseWriter, r *http.Request) {
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	done := make(chan error, 1)
	select {
	case c.reqs <- done:
	case <-r.Context().Done():
		return
	}
	if err := <-done; err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte("{\"spans\":1}\n"))
}

// run is the committer loop: a group is every request waiting, and those
// that arrive within one recent fdatasync while the group holds fewer than
// the writers.
func (c *probeCommitter) run() {
	var group []chan error
	var lastSync time.Duration
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		group = group[:0]
		select {
		case r := <-c.reqs:
			group = append(group, r)
		case <-c.stop:
			return
		}
	drain:
		for len(group) < c.writers {
			select {
			case r := <-c.reqs:
				group = append(group, r)
			default:
				break drain
			}
		}
		if len(group) < c.writers && lastSync > 0 {
			timer.Reset(min(lastSync, 2*time.Millisecond))
		wait:
			for len(group) < c.writers {
				select {
				case r := <-c.reqs:
					group = append(group, r)
				case <-timer.C:
					break wait
				}
			}
			timer.Stop()
		}
		t0 := time.Now()
		_, err := c.file.AppendEncoded(c.chunks[len(group)])
		if err == nil {
			err = c.file.Sync()
		}
		lastSync = time.Since(t0)
		c.mu.Lock()
		c.nsyncs++
		c.mu.Unlock()
		for _, r := range group {
			r <- err
		}
	}
}
