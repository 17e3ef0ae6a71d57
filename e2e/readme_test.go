package e2e

// The README runner: the README's command examples run as written, in
// order, against a fresh daemon, so that they cannot rot.
//
// What runs: every fenced block opened with ```sh, top to bottom, each as
// one bash script (set -e -o pipefail) in a directory laid out like a
// fresh clone after `make build`: bin/ (ztsd, ztsctl), examples/, and
// ../shared/testdata next to it. Before the first block, ztsd is started
// there with no flags, as `make run` does (data ./ztsd-data, socket
// ./ztsd.sock). A command that exits non-zero fails the test naming its
// README line.
//
// How to mark a block for it (for anyone adding commands to the README):
//   - A block every reader can run on a fresh clone: fence it ```sh. Its
//     commands must succeed (exit 0) in order after the blocks above it;
//     use real ids and values (examples/*.jsonl, the samples), never
//     placeholders.
//   - A block that needs what the test cannot have (root, systemd, another
//     host): put the line
//     <!-- readme-test: skip (why) -->
//     right before its fence. It renders as nothing on GitHub.
//   - Something to read, not run: fence it with another language (```text,
//     ```toml) or indent it.
//   - A ```json block must be one Trace JSON span (spread over lines as
//     you like) equal to a span of examples/*.jsonl.
// Blocks that call curl are skipped, and logged, when curl is not
// installed.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/trace"
)

// readmeSkip is the marker line that skips the next fenced block.
const readmeSkip = "<!-- readme-test: skip"

// readmeBlock is one fenced block of the README.
type readmeBlock struct {
	lang  string
	line  int // README line of the block's first content line
	lines []string
	skip  bool
}

// parseReadmeBlocks returns the fenced blocks of a Markdown document.
func parseReadmeBlocks(doc []byte) ([]readmeBlock, error) {
	var blocks []readmeBlock
	var cur *readmeBlock
	skipNext := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur != nil && trimmed == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		case strings.HasPrefix(trimmed, "```"):
			cur = &readmeBlock{lang: strings.TrimPrefix(trimmed, "```"), line: n + 1, skip: skipNext}
			skipNext = false
		case strings.HasPrefix(trimmed, readmeSkip):
			skipNext = true
		case trimmed != "":
			skipNext = false // the marker must come right before its fence
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("README.md:%d: block not closed", cur.line-1)
	}
	return blocks, sc.Err()
}

func TestParseReadmeBlocks(t *testing.T) {
	doc := "text\n```sh\na\n  b \\\n  c\n```\n<!-- readme-test: skip (root) -->\n```sh\nsudo x\n```\n" +
		"<!-- readme-test: skip -->\n\nprose\n```sh\nd\n```\n```json\n{}\n```\n"
	blocks, err := parseReadmeBlocks([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []readmeBlock{
		{lang: "sh", line: 3, lines: []string{"a", "  b \\", "  c"}},
		{lang: "sh", line: 9, lines: []string{"sudo x"}, skip: true},
		{lang: "sh", line: 15, lines: []string{"d"}},
		{lang: "json", line: 18, lines: []string{"{}"}},
	}
	if fmt.Sprint(blocks) != fmt.Sprint(want) {
		t.Fatalf("blocks\n%v\nwant\n%v", blocks, want)
	}
	if _, err := parseReadmeBlocks([]byte("```sh\nx\n")); err == nil {
		t.Fatal("an unclosed block was accepted")
	}
}

// failedLine finds the README line a failed block script reported.
var failedLine = regexp.MustCompile(`readme-test: README\.md:(\d+) exit (\d+)`)

// TestReadmeCommands runs the README's ```sh blocks (see the top of this
// file) against a fresh daemon.
func TestReadmeCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a daemon and imports samples")
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseReadmeBlocks(readme)
	if err != nil {
		t.Fatal(err)
	}
	readmeLines := strings.Split(string(readme), "\n")

	// A fresh clone after `make build`, with the samples next to it.
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Abs("../examples")
	if err != nil {
		t.Fatal(err)
	}
	shared, err := filepath.Abs(filepath.Join(testdataDir, ".."))
	if err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		filepath.Join(repo, "bin"):      daemontest.Binaries(t),
		filepath.Join(repo, "examples"): examples,
		filepath.Join(root, "shared"):   shared,
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	checkJSONBlocks(t, blocks, examples)

	// The environment of a new user's shell: no socket override, no width.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ZTSD_SOCKET=") && !strings.HasPrefix(kv, "COLUMNS=") {
			env = append(env, kv)
		}
	}

	// make run: bin/ztsd on the embedded config.
	daemon := exec.Command(filepath.Join(repo, "bin", "ztsd"))
	daemon.Dir, daemon.Env = repo, env
	logFile, err := os.Create(filepath.Join(root, "ztsd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	daemonLog := func() string { b, _ := os.ReadFile(logFile.Name()); return string(b) }
	daemon.Stdout, daemon.Stderr = logFile, logFile
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { daemon.Wait(); close(exited) }()
	t.Cleanup(func() {
		daemon.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			daemon.Process.Kill()
			<-exited
		}
	})
	c := client.New(filepath.Join(repo, "ztsd.sock"))
	defer c.Close()
	for deadline := time.Now().Add(30 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Health(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ztsd (as make run starts it) not healthy after 30 s: %v\n%s", err, daemonLog())
		}
		time.Sleep(20 * time.Millisecond)
	}

	_, curlErr := exec.LookPath("curl")
	ran := 0
	for _, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		if b.skip {
			t.Logf("README.md:%d: block skipped (%s)", b.line, readmeSkip)
			continue
		}
		text := strings.Join(b.lines, "\n")
		if curlErr != nil && strings.Contains(text, "curl ") {
			t.Logf("README.md:%d: block skipped: curl is not installed", b.line)
			continue
		}
		// Line numbers of the script are README line numbers: the trap
		// names the failing command's line.
		script := `set -eo pipefail; trap 'echo "readme-test: README.md:$LINENO exit $?" >&2' ERR` +
			strings.Repeat("\n", b.line-1) + text + "\n"
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", script)
		cmd.Dir, cmd.Env = repo, env
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			where := fmt.Sprintf("block at README.md:%d", b.line)
			if m := failedLine.FindSubmatch(out); m != nil {
				n, _ := strconv.Atoi(string(m[1]))
				where = fmt.Sprintf("README.md:%d: %s (exit %s)", n, strings.TrimSpace(readmeLines[n-1]), m[2])
			}
			t.Fatalf("%s failed: %v\noutput:\n%s\ndaemon log:\n%s", where, err, out, lastLines(daemonLog(), 20))
		}
		t.Logf("README.md:%d: %d lines ran in %v", b.line, len(b.lines), time.Since(t0).Round(time.Millisecond))
		ran++
	}
	if ran < 3 {
		t.Fatalf("only %d README blocks ran: the runner or the README lost its ```sh blocks", ran)
	}
}

// checkJSONBlocks: each ```json block is a Trace JSON span equal to a span
// of examples/*.jsonl.
func checkJSONBlocks(t *testing.T, blocks []readmeBlock, examples string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(examples, "*.jsonl"))
	known := map[string]*trace.Span{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		err = trace.DecodeJSONLines(bytes.NewReader(b), trace.DefaultLimits(), func(sp *trace.Span) error {
			known[sp.TraceID.String()+"/"+sp.SpanID.String()] = sp
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if len(known) == 0 {
		t.Fatal("examples/*.jsonl hold no spans")
	}
	for _, b := range blocks {
		if b.lang != "json" || b.skip {
			continue
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(strings.Join(b.lines, "\n"))); err != nil {
			t.Fatalf("README.md:%d: json block: %v", b.line, err)
		}
		sp := new(trace.Span)
		if err := sp.UnmarshalJSON(compact.Bytes()); err != nil {
			t.Fatalf("README.md:%d: json block is not a Trace JSON span: %v", b.line, err)
		}
		want, ok := known[sp.TraceID.String()+"/"+sp.SpanID.String()]
		if !ok {
			t.Fatalf("README.md:%d: span %s/%s is in no examples/*.jsonl", b.line, sp.TraceID, sp.SpanID)
		}
		if d := trace.Diff(want, sp); d != "" {
			t.Fatalf("README.md:%d: span differs from examples/: %s", b.line, d)
		}
	}
}

// lastLines is the end of a log.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
