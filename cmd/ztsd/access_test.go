package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/internal/workload"
)

// The access tests run their client as a second, real uid: a copy of this
// test binary, re-executed as nobody (65534) with chosen supplementary
// groups, runs TestPeerRequestHelper, which makes one request over the
// socket and prints the status. The daemon checks the socket peer's
// credentials (SO_PEERCRED, /proc/<pid>/status Groups) exactly as for any
// other client.

const nobody = 65534

var (
	peerBinOnce sync.Once
	peerBin     string
	peerBinErr  error
)

// peerBinary copies the running test binary into a directory every uid may
// enter (go test builds it under a 0700 directory).
func peerBinary(t *testing.T) string {
	t.Helper()
	peerBinOnce.Do(func() {
		self, err := os.Executable()
		if err != nil {
			peerBinErr = err
			return
		}
		dir, err := os.MkdirTemp("", "ztsd-peer-")
		if err != nil {
			peerBinErr = err
			return
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			peerBinErr = err
			return
		}
		b, err := os.ReadFile(self)
		if err != nil {
			peerBinErr = err
			return
		}
		peerBin = filepath.Join(dir, "peer.test")
		peerBinErr = os.WriteFile(peerBin, b, 0o755)
	})
	if peerBinErr != nil {
		t.Fatalf("copying the test binary for a second uid: %v", peerBinErr)
	}
	return peerBin
}

// TestMain removes the copy peerBinary made and the binaries daemontest built.
func TestMain(m *testing.M) {
	code := daemontest.Main(m)
	if peerBin != "" {
		os.RemoveAll(filepath.Dir(peerBin))
	}
	os.Exit(code)
}

// requireRoot skips tests that must start a client under another uid.
func requireRoot(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skipf("running a client as uid %d needs root (this test runs as uid %d)", nobody, os.Getuid())
	}
}

// openSocketToAll lets every uid reach the daemon's socket, so that only
// the daemon's own access check decides.
func openSocketToAll(t *testing.T, d *daemontest.Daemon) {
	t.Helper()
	if err := os.Chmod(filepath.Dir(d.Socket), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d.Socket, 0o666); err != nil {
		t.Fatal(err)
	}
}

// requestsAs makes requests ("METHOD /path", a POST sends body) to the
// daemon's socket from one process running as uid/gid with the
// supplementary groups given, and returns each HTTP status and body.
func requestsAs(t *testing.T, socket string, uid, gid uint32, groups []uint32, body []byte, reqs ...string) ([]int, []string) {
	t.Helper()
	cmd := exec.Command(peerBinary(t), "-test.run=^TestPeerRequestHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ZTSD_PEER_SOCKET="+socket, "ZTSD_PEER_REQUESTS="+strings.Join(reqs, ","))
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(body)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client as uid %d: %v\n%s", uid, err, out)
	}
	var statuses []int
	var bodies []string
	for _, line := range strings.Split(string(out), "\n") {
		rest, ok := strings.CutPrefix(line, "PEER-STATUS ")
		if !ok {
			continue
		}
		st, b, _ := strings.Cut(rest, " ")
		n, err := strconv.Atoi(st)
		if err != nil {
			t.Fatalf("client as uid %d: %q: %v", uid, line, err)
		}
		statuses, bodies = append(statuses, n), append(bodies, b)
	}
	if len(statuses) != len(reqs) {
		t.Fatalf("client as uid %d answered %d of %d requests:\n%s", uid, len(statuses), len(reqs), out)
	}
	return statuses, bodies
}

// TestPeerRequestHelper is the client side of requestsAs; it does nothing
// in a normal run.
func TestPeerRequestHelper(t *testing.T) {
	socket := os.Getenv("ZTSD_PEER_SOCKET")
	if socket == "" {
		t.Skip("only runs as the re-executed client of requestsAs")
	}
	body, _ := io.ReadAll(os.Stdin)
	for _, req := range strings.Split(os.Getenv("ZTSD_PEER_REQUESTS"), ",") {
		method, path, _ := strings.Cut(req, " ")
		var rd io.Reader
		if method == "POST" {
			rd = bytes.NewReader(body)
		}
		r := rawRequest(t, socket, method, path, "application/x-ndjson", rd)
		fmt.Printf("PEER-STATUS %d %.300s\n", r.status, strings.ReplaceAll(r.body, "\n", " "))
	}
}

// TestAccessSecondUID: with [access] lists configured, root and the
// daemon's own uid keep full access; another uid gets exactly what its uid
// or its supplementary groups are granted; /debug/pprof/ is behind the same
// check (write access).
func TestAccessSecondUID(t *testing.T) {
	requireRoot(t)
	const writeGroup, readGroup = 4242, 4343
	d := daemontest.New(t, fmt.Sprintf("pprof = true\n[access]\nwrite_uids = [1001]\nwrite_gids = [%d]\nread_gids = [%d]", writeGroup, readGroup))
	d.Start()
	openSocketToAll(t, d)
	body := marshalLines(t, workload.Spans(31, 3))

	// root: the lists do not name uid 0, and it still reads, writes and profiles.
	if r := rawRequest(t, d.Socket, "POST", "/v1/traces", "application/x-ndjson", bytes.NewReader(body)); r.status != 200 {
		t.Fatalf("write as root with write_uids = [1001]: %d %s", r.status, r.body)
	}
	if r := rawRequest(t, d.Socket, "GET", "/debug/pprof/", "", nil); r.status != 200 || !strings.Contains(r.body, "goroutine") {
		t.Fatalf("pprof as root: %d %.200s", r.status, r.body)
	}

	cases := []struct {
		name               string
		groups             []uint32
		read, write, pprof int
	}{
		{"no groups", nil, 403, 403, 403},
		{"supplementary write group", []uint32{100, writeGroup}, 200, 200, 200},
		{"supplementary read group", []uint32{readGroup}, 200, 403, 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reqs := []string{"GET /healthz", "GET /v1/stores", "POST /v1/traces", "GET /debug/pprof/", "GET /debug/pprof/heap", "GET /debug/pprof/cmdline"}
			want := []int{200, c.read, c.write, c.pprof, c.pprof, c.pprof}
			got, bodies := requestsAs(t, d.Socket, nobody, nobody, c.groups, body, reqs...)
			for i := range reqs {
				if got[i] != want[i] {
					t.Errorf("%s as uid %d groups %v: %d, want %d: %s", reqs[i], nobody, c.groups, got[i], want[i], bodies[i])
				}
			}
			if got[1] == 403 && !strings.Contains(bodies[1], "may not read") || got[2] == 403 && !strings.Contains(bodies[2], "may not write") {
				t.Errorf("a 403 should say why: %q / %q", bodies[1], bodies[2])
			}
		})
	}
}

// TestPprofOffByDefault: without pprof = true there is no /debug/pprof/.
func TestPprofOffByDefault(t *testing.T) {
	d := daemontest.New(t, "")
	d.Start()
	if r := rawRequest(t, d.Socket, "GET", "/debug/pprof/", "", nil); r.status != 404 {
		t.Fatalf("/debug/pprof/ with pprof off: %d", r.status)
	}
}
