package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Daemon is a ztsd process started by the benchmark.
type Daemon struct {
	Config  string // the generated TOML file
	DataDir string
	Socket  string
	LogPath string // the daemon's stderr
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	sockDir string
}

// Files StartDaemon writes in its work directory.
const (
	daemonConfigFile = "ztsd.toml"
	daemonLogFile    = "ztsd.log"
)

// DaemonConfig renders the TOML config a benchmark daemon runs with.
func DaemonConfig(dataDir, socket, sync string, pprof bool, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "data_dir = %s\n", strconv.Quote(dataDir))
	fmt.Fprintf(&b, "socket = %s\n", strconv.Quote(socket))
	fmt.Fprintf(&b, "sync = %s\n", strconv.Quote(sync))
	fmt.Fprintf(&b, "pprof = %t\n", pprof)
	b.WriteString("log_level = \"warn\"\n")
	if extra != "" {
		b.WriteString(extra)
		b.WriteString("\n")
	}
	return b.String()
}

// StartDaemon runs `ztsdPath --config <generated toml>` on dataDir (created
// if missing), with the config and the daemon's log in workDir and the
// socket in a short-named directory under /tmp (sun_path holds 107
// bytes). It returns once the daemon answers /healthz.
func StartDaemon(ctx context.Context, ztsdPath, workDir, dataDir, sync string, pprof bool, extra string) (*Daemon, error) {
	sockDir, err := os.MkdirTemp("/tmp", "ztsb-")
	if err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	d := &Daemon{Config: filepath.Join(workDir, daemonConfigFile), DataDir: dataDir,
		Socket: filepath.Join(sockDir, "ztsd.sock"), LogPath: filepath.Join(workDir, daemonLogFile), sockDir: sockDir}
	if err := os.WriteFile(d.Config, []byte(DaemonConfig(dataDir, d.Socket, sync, pprof, extra)), 0o644); err != nil {
		os.RemoveAll(sockDir)
		return nil, fmt.Errorf("daemon config: %w", err)
	}
	logf, err := os.Create(d.LogPath)
	if err != nil {
		os.RemoveAll(sockDir)
		return nil, fmt.Errorf("daemon log: %w", err)
	}
	d.cmd = exec.Command(ztsdPath, "--config", d.Config)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(sockDir)
		return nil, fmt.Errorf("start %s: %w", ztsdPath, err)
	}
	d.exited = make(chan struct{})
	go func() { d.waitErr = d.cmd.Wait(); logf.Close(); close(d.exited) }()
	hc := newHTTPClient(d.Socket, "")
	defer hc.close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := hc.get(cctx, "/healthz")
		cancel()
		if err == nil {
			return d, nil
		}
		select {
		case <-d.exited:
			os.RemoveAll(sockDir)
			return nil, fmt.Errorf("ztsd exited during start-up (%v): %s", d.waitErr, d.logTail())
		case <-ctx.Done():
			d.Kill()
			return nil, ctx.Err()
		default:
		}
		if time.Now().After(deadline) {
			d.Kill()
			return nil, fmt.Errorf("ztsd not healthy after 60 s: %v: %s", err, d.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *Daemon) logTail() string {
	b, _ := os.ReadFile(d.LogPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// Stop sends SIGTERM and waits up to timeout for a clean exit (the daemon
// flushes its indexes and records its counters).
func (d *Daemon) Stop(timeout time.Duration) error {
	defer os.RemoveAll(d.sockDir)
	select {
	case <-d.exited:
		return fmt.Errorf("ztsd had already exited (%v): %s", d.waitErr, d.logTail())
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(timeout):
		d.cmd.Process.Kill()
		<-d.exited
		return fmt.Errorf("ztsd did not stop within %v of SIGTERM; killed", timeout)
	}
	if d.waitErr != nil {
		return fmt.Errorf("ztsd exited with %v: %s", d.waitErr, d.logTail())
	}
	return nil
}

// Kill stops the daemon with SIGKILL (error paths).
func (d *Daemon) Kill() {
	select {
	case <-d.exited:
	default:
		d.cmd.Process.Kill()
		<-d.exited
	}
	os.RemoveAll(d.sockDir)
}

// httpClient speaks HTTP/1.1 to the daemon over its unix socket (or TCP)
// and times nothing itself; the runner times its calls. It keeps up to
// 256 idle connections so that concurrent clients reuse theirs.
type httpClient struct {
	hc   *http.Client
	base string
}

func newHTTPClient(socket, tcp string) *httpClient {
	tr := &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	base := "http://ztsd"
	if tcp != "" {
		base = "http://" + tcp
	} else {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}
	}
	return &httpClient{hc: &http.Client{Transport: tr}, base: base}
}

func (c *httpClient) close() { c.hc.CloseIdleConnections() }

// bufPool holds response buffers.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// do sends one request and reads the whole answer; a status ≥ 300 is an
// error quoting the daemon's message.
func (c *httpClient) do(ctx context.Context, method, path, contentType string, body []byte, out *bytes.Buffer) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out.Reset()
	if _, err := out.ReadFrom(resp.Body); err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 500 {
			msg = msg[:500]
		}
		return &StatusError{Status: resp.StatusCode, Method: method, Path: path, Body: msg}
	}
	return nil
}

func (c *httpClient) get(ctx context.Context, path string) ([]byte, error) {
	var b bytes.Buffer
	err := c.do(ctx, http.MethodGet, path, "", nil, &b)
	return b.Bytes(), err
}

// StatusError is a daemon answer with an error status.
type StatusError struct {
	Status       int
	Method, Path string
	Body         string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: status %d: %s", e.Method, e.Path, e.Status, e.Body)
}

// ErrNoDaemon is returned when neither a ztsd binary nor a socket is given.
var ErrNoDaemon = errors.New("no daemon: give a ztsd binary to start or the socket of a running one")

// CPUTime returns the user+system CPU time the daemon has used so far.
func (d *Daemon) CPUTime() (time.Duration, error) {
	return processCPU(d.cmd.Process.Pid)
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; it is 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// processCPU reads utime+stime of a process from /proc/<pid>/stat.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu time of pid %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces; fields after it are
	// plain. utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("cpu time of pid %d: malformed /proc stat %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("cpu time of pid %d: %d fields after the command name, want ≥ 13", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("cpu time of pid %d: %w", pid, err)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}
