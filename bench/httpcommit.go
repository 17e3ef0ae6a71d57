package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// to a net/http server on a unix socket. The server is a process of its
// own, as the daemon is: this program started again with the environment
// variable HTTPCommitServerEnv (RunHTTPCommitServerIfAsked). It reads
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
// server over net/http and fdatasync avoids.
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
	sockDir, err := os.MkdirTemp("/tmp", "ztsb-probe-") // sun_path holds 107 bytes
	if err != nil {
		return lim, fmt.Errorf("http commit probe: %w", err)
	}
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "probe.sock")
	srv, err := startHTTPCommitServer(ctx, httpCommitServerSpec{Socket: sock, Dir: tmp, Writers: writers})
	if err != nil {
		return lim, err
	}
	defer srv.stop()
	hc := newHTTPClient(sock, "")
	defer hc.close()

	body := make([]byte, ProbeHTTPCommitBodyBytes)
	rnd := rand.New(rand.NewPCG(5, 6))
	for i := range body {
		body[i] = byte(rnd.Uint32())
	}
	lats := make([]Latencies, writers)
	errs := make([]error, writers)
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
	syncs, err := srv.stop()
	if err != nil {
		return lim, err
	}
	var all Latencies
	for i := range lats {
		all.Merge(&lats[i])
	}
	lim.SpansPerS = float64(all.Len()) / elapsed.Seconds()
	lim.P50Ms = ms(all.Quantile(0.5))
	lim.SyncsPerS = float64(syncs) / elapsed.Seconds()
	return lim, nil
}

// HTTPCommitServerEnv is the environment variable that makes a process
// started by ProbeHTTPCommit its server: it holds the server's
// httpCommitServerSpec as JSON.
const HTTPCommitServerEnv = "ZTSD_BENCH_HTTP_COMMIT_SERVER"

// httpCommitServerSpec is what the probe's server process serves.
type httpCommitServerSpec struct {
	Socket  string `json:"socket"`
	Dir     string `json:"dir"`
	Writers int    `json:"writers"`
}

// RunHTTPCommitServerIfAsked makes this process the HTTP commit probe's
// server when HTTPCommitServerEnv is set, and exits when it is done;
// otherwise it returns at once. A program that runs ProbeHTTPCommit (which
// starts the program itself again as its server) calls it first thing in
// main (ztsctl; the test binaries of packages whose tests probe).
func RunHTTPCommitServerIfAsked() {
	v := os.Getenv(HTTPCommitServerEnv)
	if v == "" {
		return
	}
	var spec httpCommitServerSpec
	if err := json.Unmarshal([]byte(v), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "http commit probe server: %s: %v\n", HTTPCommitServerEnv, err)
		os.Exit(2)
	}
	if err := serveHTTPCommit(spec, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "http commit probe server: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveHTTPCommit serves spec until stop reaches its end (the prober
// closed it, or exited), telling out "ready" once it listens and the
// group commits it made when it stops.
func serveHTTPCommit(spec httpCommitServerSpec, stop io.Reader, out io.Writer) error {
	if spec.Writers <= 0 {
		return fmt.Errorf("%d writers", spec.Writers)
	}
	opt := chunk.Options{Compression: chunk.Zstd, Checksums: true}
	f, err := chunk.Create(filepath.Join(spec.Dir, "traces.zts"), opt)
	if err != nil {
		return err
	}
	defer f.Close()
	// The chunk of a group of n requests, encoded once for each n.
	rnd := rand.New(rand.NewPCG(3, 4))
	chunks := make([]chunk.EncodedChunk, spec.Writers+1)
	for n := 1; n <= spec.Writers; n++ {
		payload := make([]byte, n*ProbeChunkBytes/2)
		for i := range payload {
			payload[i] = byte(rnd.Uint32())
		}
		if chunks[n], err = chunk.Encode(payload, opt, nil); err != nil {
			return fmt.Errorf("encode a chunk: %w", err)
		}
	}
	ln, err := net.Listen("unix", spec.Socket)
	if err != nil {
		return err
	}
	c := &probeCommitter{reqs: make(chan chan error, 64), stop: make(chan struct{}), file: f, chunks: chunks, writers: spec.Writers}
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
	fmt.Fprintln(out, "ready")
	io.Copy(io.Discard, stop)
	srv.Close()
	<-serveDone
	close(c.stop)
	<-commitDone
	_, err = fmt.Fprintf(out, "syncs %d\n", c.syncs())
	return err
}

// httpCommitServer is the probe's server process, started.
type httpCommitServer struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   *bufio.Scanner
	stopped bool
	syncs   int64
	err     error
}

// startHTTPCommitServer starts this program again as the probe's server
// and returns once it listens.
func startHTTPCommitServer(ctx context.Context, spec httpCommitServerSpec) (*httpCommitServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("http commit probe: %w", err)
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), HTTPCommitServerEnv+"="+string(js))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("http commit probe: start %s as its server: %w", exe, err)
	}
	s := &httpCommitServer{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
	if !s.lines.Scan() || s.lines.Text() != "ready" {
		stdin.Close()
		cmd.Wait()
		return nil, fmt.Errorf("http commit probe: %s did not start as its server (does its main call bench.RunHTTPCommitServerIfAsked?): %s",
			exe, strings.TrimSpace(stderr.String()))
	}
	return s, nil
}

// stop ends the server process and returns the group commits it made;
// later calls return the same.
func (s *httpCommitServer) stop() (int64, error) {
	if s.stopped {
		return s.syncs, s.err
	}
	s.stopped = true
	s.stdin.Close()
	if s.lines.Scan() {
		if _, err := fmt.Sscanf(s.lines.Text(), "syncs %d", &s.syncs); err != nil {
			s.err = fmt.Errorf("http commit probe: server said %q: %w", s.lines.Text(), err)
		}
	}
	if err := s.cmd.Wait(); err != nil && s.err == nil {
		s.err = fmt.Errorf("http commit probe: server: %w", err)
	}
	return s.syncs, s.err
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
