package zorka

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// BodyKind says what a raw agent-protocol body holds.
type BodyKind int

const (
	NotABody      BodyKind = iota
	AgentDataBody          // what an agent POSTs to /agent/submit/agd
	TraceDataBody          // what an agent POSTs to /agent/submit/trc
)

// maxBodyFile bounds one raw body file: it is held in memory, base64
// encoded, as one line of a request dump.
const maxBodyFile = maxDumpLine / 2

// bodySession is the session id the replayed bodies share.
const bodySession = "ztsctl-import"

// SniffBody tells a raw agent-protocol body (the bytes an agent POSTs, as
// a capture saves them) from its first two bytes: agent data begins with a
// string definition (tag 1: C1) or a method definition (tag 2: C2) around
// a definite array; trace data with a record, an indefinite array tagged
// C8 (1.90) or C3–C7 (2.x).
func SniffBody(head []byte) BodyKind {
	if len(head) < 2 {
		return NotABody
	}
	switch {
	case (head[0] == 0xC1 || head[0] == 0xC2) && head[1]>>5 == 4 && head[1]&0x1F < 0x1F:
		return AgentDataBody
	case head[0] >= 0xC3 && head[0] <= 0xC8 && head[1] == 0x9F:
		return TraceDataBody
	}
	return NotABody
}

// ImportBodies replays raw agent-protocol body files, in the order given,
// through one agent session, as an agent would have sent them: each
// agent-data file defines the strings and methods that the trace-data
// files after it use (an agent-data file that follows trace data starts a
// new session, as an agent restart would). A trace-data file before any
// agent data is an error that says so. Each trace-data file's trace id is
// derived from its base name and size (importing twice yields the same
// ids), and its spans' source.file is its base name. The summary counts
// bodies as events, like a request dump's requests.
func ImportBodies(ctx context.Context, paths []string, opts ingest.Options, emit ingest.Emit) (*ingest.Summary, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("zorka bodies: no files")
	}
	var dump bytes.Buffer
	fileOf := map[trace.TraceID]string{}
	agentData, afterTrace := false, false
	for _, path := range paths {
		data, err := readBodyFile(path)
		if err != nil {
			return nil, err
		}
		base := filepath.Base(path)
		req := struct {
			URI     string              `json:"uri"`
			Headers map[string][]string `json:"headers"`
			Body    string              `json:"body"`
		}{Headers: map[string][]string{"X-Zorka-Session-ID": {bodySession}},
			Body: base64.StdEncoding.EncodeToString(data)}
		switch SniffBody(data) {
		case AgentDataBody:
			req.URI = "/agent/submit/agd"
			if !agentData || afterTrace {
				req.Headers["X-Zorka-Session-Reset"] = []string{"true"}
			}
			agentData, afterTrace = true, false
		case TraceDataBody:
			if !agentData {
				return nil, fmt.Errorf("zorka bodies: %s is Zorka trace data, which needs the agent data (string and method definitions) sent before it: pass the agent-data file first (e.g. ztsctl import X-agd.cbor X-trc.cbor)", path)
			}
			req.URI = "/agent/submit/trc"
			tid := dumpTraceID(base, int64(len(data)), 0)
			req.Headers["X-Zorka-Trace-ID"] = []string{tid}
			id, err := trace.ParseTraceID(tid)
			if err != nil {
				return nil, err
			}
			fileOf[id] = base
			afterTrace = true
		default:
			return nil, fmt.Errorf("zorka bodies: %s is not a raw Zorka agent-protocol body (first bytes % x)", path, data[:min(len(data), 8)])
		}
		line, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		dump.Write(line)
		dump.WriteByte('\n')
	}
	name := filepath.Base(paths[0])
	sum, err := DecodeReader(ctx, name, int64(dump.Len()), &dump, opts, func(sp *trace.Span) error {
		if f, ok := fileOf[sp.TraceID]; ok {
			sp.Attrs.Set("source.file", trace.String(f))
		}
		if emit != nil {
			return emit(sp)
		}
		return nil
	})
	if sum != nil {
		sum.Source = strings.Join(paths, " ")
		if sum.Details != nil {
			sum.Details["bodies"] = int64(len(paths))
		}
	}
	if err != nil {
		return sum, fmt.Errorf("zorka bodies %s (line N is the N-th file): %w", strings.Join(paths, " "), err)
	}
	return sum, nil
}

func readBodyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("zorka bodies: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBodyFile+1))
	if err != nil {
		return nil, fmt.Errorf("zorka bodies: %s: %w", path, err)
	}
	if len(data) > maxBodyFile {
		return nil, fmt.Errorf("zorka bodies: %s is larger than %d bytes, more than one agent request holds", path, maxBodyFile)
	}
	return data, nil
}
