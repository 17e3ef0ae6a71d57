// Package daemontest starts real ztsd binaries for end-to-end tests: it
// builds ztsd and ztsctl once per test binary (with the race detector when
// the tests run with it), runs the daemon on a temp data directory and
// socket, and stops it with a signal or kill -9.
package daemontest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/client"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// Binaries builds ztsd and ztsctl (once) and returns the directory holding them.
func Binaries(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "ztsd-bin-")
		if buildErr != nil {
			return
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		args := []string{"build", "-o", binDir + "/"}
		if RaceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "./cmd/ztsd", "./cmd/ztsctl")
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// Main runs a package's tests (call it from TestMain) and then removes the
// binaries Binaries built for them: each test binary builds its own ~115 MB
// copy, which would otherwise stay in the temp directory after every run.
func Main(m *testing.M) int {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	return code
}

// Daemon is one running ztsd.
type Daemon struct {
	t       testing.TB
	Dir     string // temp dir holding data, socket and config
	DataDir string
	Socket  string
	Config  string
	Cmd     *exec.Cmd
	stderr  *lockedBuffer
	Client  *client.Client
	exited  chan struct{}
	waitErr error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// New prepares a daemon in a fresh temp dir with the given TOML config
// (data_dir and socket are filled in).
func New(t testing.TB, toml string) *Daemon {
	dir := t.TempDir()
	// Unix socket paths are limited to 108 bytes: keep it short.
	sockDir, err := os.MkdirTemp("/tmp", "ztsd-s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	d := &Daemon{t: t, Dir: dir, DataDir: filepath.Join(dir, "data"), Socket: filepath.Join(sockDir, "z.sock"),
		Config: filepath.Join(dir, "ztsd.toml")}
	d.WriteConfig(toml)
	return d
}

// WriteConfig replaces the config file.
func (d *Daemon) WriteConfig(toml string) {
	full := fmt.Sprintf("data_dir = %q\nsocket = %q\n%s\n", d.DataDir, d.Socket, toml)
	if err := os.WriteFile(d.Config, []byte(full), 0o644); err != nil {
		d.t.Fatal(err)
	}
}

// Start runs the daemon and waits until it answers /healthz.
func (d *Daemon) Start() {
	d.StartCmd(exec.Command(filepath.Join(Binaries(d.t), "ztsd"), "--config", d.Config))
}

// StartCmd runs cmd (a ztsd invocation) and waits for /healthz.
func (d *Daemon) StartCmd(cmd *exec.Cmd) {
	d.t.Helper()
	d.stderr = &lockedBuffer{}
	cmd.Stderr = d.stderr
	cmd.Stdout = d.stderr
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.Cmd = cmd
	d.exited = make(chan struct{})
	go func() { d.waitErr = cmd.Wait(); close(d.exited) }()
	d.t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			d.Cmd.Process.Kill()
			<-d.exited
		}
		if strings.Contains(d.stderr.String(), "WARNING: DATA RACE") {
			d.t.Errorf("the daemon reported a data race:\n%s", d.stderr.String())
		}
	})
	d.Client = client.New(d.Socket)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := d.Client.Health(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-d.exited:
			d.t.Fatalf("ztsd exited during start-up (%v):\n%s", d.waitErr, d.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("ztsd not healthy after 60 s: %v\n%s", err, d.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Signal sends sig and, for SIGTERM/SIGINT/SIGKILL, waits for the exit.
func (d *Daemon) Signal(sig syscall.Signal) error {
	d.Cmd.Process.Signal(sig)
	if sig == syscall.SIGHUP {
		return nil
	}
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		d.t.Fatalf("ztsd did not exit after %v:\n%s", sig, d.stderr.String())
	}
	d.Client.Close()
	return d.waitErr
}

// Stderr is what the daemon logged so far.
func (d *Daemon) Stderr() string { return d.stderr.String() }

// WaitLogged waits up to within for the daemon's log to match re and
// returns the match and its submatches (nil on timeout). A line the daemon
// wrote before /healthz answered may still reach Stderr after Start
// returns: os/exec copies the daemon's output into it from a goroutine of
// its own.
func (d *Daemon) WaitLogged(re *regexp.Regexp, within time.Duration) []string {
	deadline := time.Now().Add(within)
	for {
		if m := re.FindStringSubmatch(d.Stderr()); m != nil || time.Now().After(deadline) {
			return m
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Ctl runs ztsctl against the daemon and returns stdout, stderr and the
// exit code.
func (d *Daemon) Ctl(stdin []byte, args ...string) (string, string, int) {
	d.t.Helper()
	cmd := exec.Command(filepath.Join(Binaries(d.t), "ztsctl"), append([]string{"--socket", d.Socket}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatalf("ztsctl: %v", err)
	}
	return out.String(), errb.String(), code
}
