// Package client is the Go client of ztsd's socket API (DESIGN.md "The
// socket API"). It speaks HTTP/1.1 over the daemon's unix socket, or over
// TCP when the daemon has the optional listener on.
//
// Every call takes a context: its deadline bounds the whole request.
// Errors from the daemon are *APIError values that match the sentinel
// errors below with errors.Is, so callers can branch on ErrNotFound,
// ErrTooLarge and the rest.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ztsd/ztsd/trace"
)

// Sentinel errors matched by *APIError.Is.
var (
	ErrBadRequest  = errors.New("bad request")
	ErrForbidden   = errors.New("forbidden")
	ErrNotFound    = errors.New("not found")
	ErrTooLarge    = errors.New("request too large")
	ErrUnavailable = errors.New("ztsd unavailable (disk full or shutting down)")
	ErrServer      = errors.New("ztsd server error")
)

// APIError is an error answer of the daemon.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("ztsd: %s (%d %s)", e.Message, e.Status, e.Code)
}

// Is matches the sentinel error of the status.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrBadRequest:
		return e.Status == http.StatusBadRequest || e.Status == http.StatusUnsupportedMediaType
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrTooLarge:
		return e.Status == http.StatusRequestEntityTooLarge
	case ErrUnavailable:
		return e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests
	case ErrServer:
		return e.Status >= 500
	}
	return false
}

// Client talks to one daemon. It is safe for concurrent use.
type Client struct {
	hc   *http.Client
	base string
	warn func(Warning)
	addr string // the socket path or TCP address, for errors
}

// Warning is a damaged chunk of the daemon's data that an answer left out:
// the answer is complete except for the spans stored in that chunk.
type Warning struct {
	Store  string `json:"store"`
	Offset int64  `json:"offset"`
	Error  string `json:"error"`
}

func (w Warning) String() string {
	return fmt.Sprintf("store %s: damaged chunk at offset %d left out: %s", w.Store, w.Offset, w.Error)
}

// OnWarning sets the function told about every warning of every answer
// (trace reads and search pages); ztsctl prints them to stderr. Set it
// before the client is used.
func (c *Client) OnWarning(f func(Warning)) { c.warn = f }

// warningsHeader carries the warnings of a trace read.
const warningsHeader = "X-Ztsd-Warnings"

func (c *Client) warned(ws []Warning) {
	if c.warn == nil {
		return
	}
	for _, w := range ws {
		c.warn(w)
	}
}

// headerWarnings decodes the warnings of a trace read.
func headerWarnings(h http.Header) ([]Warning, error) {
	v := h.Get(warningsHeader)
	if v == "" {
		return nil, nil
	}
	var ws []Warning
	if err := json.Unmarshal([]byte(v), &ws); err != nil {
		return nil, fmt.Errorf("ztsd: %s header: %w", warningsHeader, err)
	}
	return ws, nil
}

// DialError is returned when no daemon answers at the client's address
// (nothing listens on the socket, or it does not exist).
type DialError struct {
	Addr string // socket path or TCP address
	Err  error
}

func (e *DialError) Error() string {
	return fmt.Sprintf("no ztsd listening at %s (%v)", e.Addr, e.Err)
}

func (e *DialError) Unwrap() error { return e.Err }

// New returns a client for the daemon listening on the unix socket path.
func New(socketPath string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	return &Client{hc: &http.Client{Transport: tr}, base: "http://ztsd", addr: socketPath}
}

// NewTCP returns a client for the daemon's optional TCP listener
// ("127.0.0.1:7070").
func NewTCP(addr string) *Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
	return &Client{hc: &http.Client{Transport: tr}, base: "http://" + addr, addr: addr}
}

// Close releases idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

func (c *Client) do(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, &DialError{Addr: c.addr, Err: op.Err}
		}
		return nil, fmt.Errorf("ztsd %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	return resp, nil
}

func readAPIError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e.Error = strings.TrimSpace(string(b))
		if e.Error == "" {
			e.Error = resp.Status
		}
	}
	return &APIError{Status: resp.StatusCode, Code: e.Code, Message: e.Error}
}

// Put stores spans (sent as Trace JSON lines). It returns once the daemon
// acknowledged them: they are durable under its sync policy.
func (c *Client) Put(ctx context.Context, spans ...*trace.Span) error {
	var buf bytes.Buffer
	for _, sp := range spans {
		b, err := sp.MarshalJSON()
		if err != nil {
			return err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	_, err := c.PutJSONLines(ctx, &buf)
	return err
}

// PutCBOR stores spans sent in the chunk-payload CBOR encoding
// (docs/format/chunk-payload.md), the compact form for bulk writers.
func (c *Client) PutCBOR(ctx context.Context, spans ...*trace.Span) error {
	b, err := trace.EncodeChunk(nil, spans)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/traces", bytes.NewReader(b), "application/cbor")
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// PutJSONLines sends Trace JSON lines as they are and returns the number
// of spans the daemon stored.
func (c *Client) PutJSONLines(ctx context.Context, r io.Reader) (int, error) {
	resp, err := c.do(ctx, http.MethodPost, "/v1/traces", r, "application/x-ndjson")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct {
		Spans int `json:"spans"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("ztsd put: reading the answer: %w", err)
	}
	return out.Spans, nil
}

// Post sends a raw body to path (the agent endpoints); extra headers are
// set as given.
func (c *Client) Post(ctx context.Context, path, contentType string, body []byte, header http.Header) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ztsd POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return nil, readAPIError(resp)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 16<<20))
}

// Get returns a whole trace: its root spans, each with its child spans in
// Children and its full record tree.
func (c *Client) Get(ctx context.Context, id trace.TraceID) ([]*trace.Span, error) {
	return c.get(ctx, "/v1/traces/"+id.String())
}

// GetSpan returns one span of a trace with its child spans.
func (c *Client) GetSpan(ctx context.Context, id trace.TraceID, span trace.SpanID) (*trace.Span, error) {
	spans, err := c.get(ctx, "/v1/traces/"+id.String()+"?span="+span.String())
	if err != nil {
		return nil, err
	}
	if len(spans) == 0 {
		return nil, &APIError{Status: http.StatusNotFound, Code: "damaged",
			Message: fmt.Sprintf("span %s of trace %s is only in damaged chunks", span, id)}
	}
	if len(spans) != 1 {
		return nil, fmt.Errorf("ztsd get span: %d spans in the answer, want 1", len(spans))
	}
	return spans[0], nil
}

// GetRaw returns the daemon's Trace JSON lines for a trace as sent.
func (c *Client) GetRaw(ctx context.Context, id trace.TraceID, span trace.SpanID) ([]byte, error) {
	path := "/v1/traces/" + id.String()
	if span != 0 {
		path += "?span=" + span.String()
	}
	resp, err := c.do(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	ws, err := headerWarnings(resp.Header)
	if err != nil {
		return nil, err
	}
	c.warned(ws)
	var out []byte
	err = readJSONLines(resp.Body, func(line []byte) error {
		out = append(append(out, line...), '\n')
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *Client) get(ctx context.Context, path string) ([]*trace.Span, error) {
	resp, err := c.do(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	ws, err := headerWarnings(resp.Header)
	if err != nil {
		return nil, err
	}
	c.warned(ws)
	var out []*trace.Span
	err = readJSONLines(resp.Body, func(line []byte) error {
		sp := new(trace.Span)
		if err := sp.UnmarshalJSON(line); err != nil {
			return fmt.Errorf("ztsd get: answer line %d: %w", len(out)+1, err)
		}
		out = append(out, sp)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readJSONLines hands fn each non-empty line of a JSON-lines answer. An
// error trailer (server.ErrorTrailer: a line starting with `{"error"`,
// sent when the daemon failed after the answer began) and a last line
// cut short fail the whole answer, so no caller takes a partial answer
// for data.
func readJSONLines(body io.Reader, fn func(line []byte) error) error {
	br := bufio.NewReaderSize(body, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			var long []byte
			long = append(long, line...)
			for err == bufio.ErrBufferFull {
				if len(long) > 1<<30 {
					return fmt.Errorf("ztsd: answer line %d longer than 1 GiB", n)
				}
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err == io.EOF {
			if len(bytes.TrimSpace(line)) != 0 {
				return fmt.Errorf("ztsd: answer cut short in line %d (no line end)", n)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("ztsd: reading answer line %d: %w", n, err)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if bytes.HasPrefix(line, []byte(`{"error"`)) {
			return trailerError(line)
		}
		if err := fn(line); err != nil {
			return err
		}
	}
}

// trailerError turns an error trailer into the *APIError it stands for.
func trailerError(line []byte) error {
	var t struct {
		Error  string `json:"error"`
		Code   string `json:"code"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(line, &t); err != nil || t.Error == "" {
		t.Error = "error trailer: " + string(line)
	}
	if t.Status < 400 {
		t.Status = http.StatusInternalServerError
	}
	return &APIError{Status: t.Status, Code: t.Code, Message: t.Error + " (after part of the answer was sent)"}
}

// Query is a search (DESIGN.md GET /v1/search). Zero fields do not filter.
type Query struct {
	Attrs       []trace.Attr // key:value, all must match
	Text        string
	Operation   string // a span's root record method, exactly
	MinDuration time.Duration
	MaxDuration time.Duration // 0 = unbounded
	Errors      bool
	Since       time.Time
	Until       time.Time
	Limit       int // page size (server default 100)
	Spans       bool
}

// Values encodes q as URL query parameters.
func (q Query) Values() url.Values {
	v := url.Values{}
	for _, a := range q.Attrs {
		v.Add("attr", a.Key+":"+a.Value.Text())
	}
	if q.Text != "" {
		v.Set("text", q.Text)
	}
	if q.MinDuration > 0 {
		v.Set("min_duration", strconv.FormatInt(int64(q.MinDuration), 10))
	}
	if q.MaxDuration > 0 {
		v.Set("max_duration", strconv.FormatInt(int64(q.MaxDuration), 10))
	}
	if q.Operation != "" {
		v.Set("operation", q.Operation)
	}
	if q.Errors {
		v.Set("errors", "true")
	}
	if !q.Since.IsZero() {
		v.Set("since", strconv.FormatInt(q.Since.UnixNano(), 10))
	}
	if !q.Until.IsZero() {
		v.Set("until", strconv.FormatInt(q.Until.UnixNano(), 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Spans {
		v.Set("spans", "true")
	}
	return v
}

// Page is one page of search results.
type Page struct {
	Spans  []*trace.Span // summaries: no Root, no Children
	Cursor string        // "" on the last page
	// Warnings name the damaged chunks whose spans the page leaves out.
	Warnings []Warning
	// Traces (trace mode only) describe each listed trace as a whole, in
	// the order of Spans: its span count, time range and root span.
	Traces []TraceHead
}

// TraceHead is what a trace-mode search answer says of one listed trace.
type TraceHead struct {
	TraceID    string
	Spans      int64
	StartNS    int64
	DurationNS int64
	Root       *trace.Span // its root span's summary; nil when no root span is stored
}

// SearchPage fetches one page; cursor "" starts at the newest.
func (c *Client) SearchPage(ctx context.Context, q Query, cursor string) (*Page, error) {
	v := q.Values()
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	resp, err := c.do(ctx, http.MethodGet, "/v1/search?"+v.Encode(), nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Results  []json.RawMessage `json:"results"`
		Cursor   string            `json:"cursor"`
		Warnings []Warning         `json:"warnings"`
		Traces   []struct {
			TraceID    string          `json:"trace_id"`
			Spans      int64           `json:"spans"`
			StartNS    int64           `json:"start_ns"`
			DurationNS int64           `json:"duration_ns"`
			Root       json.RawMessage `json:"root"`
		} `json:"traces"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("ztsd search: reading the answer: %w", err)
	}
	c.warned(body.Warnings)
	p := &Page{Cursor: body.Cursor, Warnings: body.Warnings}
	for i, raw := range body.Results {
		sp := new(trace.Span)
		if err := sp.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("ztsd search: result %d: %w", i, err)
		}
		p.Spans = append(p.Spans, sp)
	}
	for i, t := range body.Traces {
		h := TraceHead{TraceID: t.TraceID, Spans: t.Spans, StartNS: t.StartNS, DurationNS: t.DurationNS}
		if len(t.Root) > 0 && string(t.Root) != "null" {
			h.Root = new(trace.Span)
			if err := h.Root.UnmarshalJSON(t.Root); err != nil {
				return nil, fmt.Errorf("ztsd search: trace %d's root: %w", i, err)
			}
		}
		p.Traces = append(p.Traces, h)
	}
	return p, nil
}

// Search returns an iterator over every result, fetching pages through
// the cursor as it goes.
func (c *Client) Search(q Query) *SearchIterator {
	return &SearchIterator{c: c, q: q}
}

// SearchIterator walks search results page by page.
type SearchIterator struct {
	c      *Client
	q      Query
	page   []*trace.Span
	cursor string
	cur    *trace.Span
	err    error
	done   bool
}

// Next advances to the next result; false at the end or on error (Err).
func (it *SearchIterator) Next(ctx context.Context) bool {
	for len(it.page) == 0 {
		if it.done || it.err != nil {
			return false
		}
		p, err := it.c.SearchPage(ctx, it.q, it.cursor)
		if err != nil {
			it.err = err
			return false
		}
		it.page, it.cursor = p.Spans, p.Cursor
		if p.Cursor == "" {
			it.done = true
		}
	}
	it.cur, it.page = it.page[0], it.page[1:]
	return true
}

// Span is the current result.
func (it *SearchIterator) Span() *trace.Span { return it.cur }

// Err is the error that stopped the iteration, if any.
func (it *SearchIterator) Err() error { return it.err }

// StoreInfo describes one store (GET /v1/stores).
type StoreInfo struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	FirstNS  int64  `json:"first_ns"`
	LastNS   int64  `json:"last_ns"`
	Spans    int64  `json:"spans"`
	Traces   int64  `json:"traces"`
	Chunks   int64  `json:"chunks"`
	Bytes    int64  `json:"bytes"`
	IndexLag int64  `json:"index_lag_bytes"`
	// IndexCompactionDebt and IndexCompactions: the bytes the store's
	// index compactions still have to rewrite and those running now.
	IndexCompactionDebt int64 `json:"index_compaction_debt_bytes"`
	IndexCompactions    int64 `json:"index_compactions_running"`
	// Reason says why a store is not served (state quarantined,
	// rebuilding or orphaned).
	Reason string `json:"reason,omitempty"`
	// Location is "local" (the data directory) or "remote" (read from a
	// bucket: Node and Generation name the upload; Cached says whether
	// its indexes are in the local cache).
	Location   string `json:"location,omitempty"`
	Node       string `json:"node,omitempty"`
	Generation string `json:"generation,omitempty"`
	Cached     bool   `json:"cached,omitempty"`
}

// Name is how answers name the store: its id, with its node for a store
// read from a bucket ("web-1/00002a": ids repeat across nodes).
func (s StoreInfo) Name() string {
	if s.Node != "" {
		return s.Node + "/" + s.ID
	}
	return s.ID
}

// Stores lists the daemon's stores, oldest first.
func (c *Client) Stores(ctx context.Context) ([]StoreInfo, error) {
	var out struct {
		Stores []StoreInfo `json:"stores"`
	}
	if err := c.getJSON(ctx, "/v1/stores", &out); err != nil {
		return nil, err
	}
	return out.Stores, nil
}

// AttributeValues lists distinct values of an attribute key.
func (c *Client) AttributeValues(ctx context.Context, key string) ([]string, error) {
	var out struct {
		Values []string `json:"values"`
	}
	if err := c.getJSON(ctx, "/v1/attributes/"+url.PathEscape(key), &out); err != nil {
		return nil, err
	}
	return out.Values, nil
}

// AttributeKeys lists the distinct attribute keys of the stored spans.
func (c *Client) AttributeKeys(ctx context.Context) ([]string, error) {
	var out struct {
		Keys []string `json:"keys"`
	}
	if err := c.getJSON(ctx, "/v1/attributes", &out); err != nil {
		return nil, err
	}
	return out.Keys, nil
}

// Service is one entry of GET /v1/services: a service's name (its
// service.name, else "<format> <file>" or "zorka <component>") and the
// attributes that, all matching, find its spans.
type Service struct {
	Name  string            `json:"name"`
	Attrs map[string]string `json:"attrs"`
}

// Services lists the services (and source files) of the stored spans.
func (c *Client) Services(ctx context.Context) ([]Service, error) {
	var out struct {
		Services []Service `json:"services"`
	}
	if err := c.getJSON(ctx, "/v1/services", &out); err != nil {
		return nil, err
	}
	return out.Services, nil
}

// Health checks the daemon is up (it may be degraded: HealthStatus).
func (c *Client) Health(ctx context.Context) error {
	_, err := c.HealthStatus(ctx)
	return err
}

// HealthStatus is the daemon's /healthz answer.
type HealthStatus struct {
	// Status is "ok", "degraded" when some stores are not served, or
	// "catching_up" while stores re-index, in the background, what a
	// restart found not indexed (reads of that part are missing).
	Status string `json:"status"`
	// Stores lists the stores not served, with the reason.
	Stores []StoreInfo `json:"stores"`
	// CatchingUp lists the stores re-indexing in the background, with
	// the bytes left (IndexLag).
	CatchingUp []StoreInfo `json:"catching_up"`
	// ReadOnly says why the daemon takes no writes (it started on a
	// full disk).
	ReadOnly string `json:"read_only"`
	// QueryOnly: a query node (ztsd --query), serving the stores in a
	// bucket and refusing writes.
	QueryOnly bool `json:"query_only"`
	// RemoteStores is how many stores the daemon serves from a bucket
	// (nil when it has none configured).
	RemoteStores *int `json:"remote_stores"`
}

// HealthStatus returns the daemon's health: an error when it does not
// answer or answers 503 (shutting down).
func (c *Client) HealthStatus(ctx context.Context) (*HealthStatus, error) {
	var out HealthStatus
	if err := c.getJSON(ctx, "/healthz", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Metrics returns the Prometheus text exposition.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	resp, err := c.do(ctx, http.MethodGet, "/metrics", nil, "")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	resp, err := c.do(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("ztsd GET %s: reading the answer: %w", path, err)
	}
	return nil
}
