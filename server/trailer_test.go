package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/trace"
)

// TestErrorAfterFirstLine: a JSON-lines answer that fails after its first
// line ends with an error trailer, and the client fails the whole call
// (nothing of it comes back as data); an answer cut short fails too.
func TestErrorAfterFirstLine(t *testing.T) {
	line, err := (&trace.Span{TraceID: trace.TraceID{1}, SpanID: 2}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	s := &Server{log: slog.New(slog.DiscardHandler), metrics: NewMetrics(nil), mux: http.NewServeMux()}
	s.access.Store(&Access{})
	s.route("GET /v1/traces/{id}", "get", none, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Write(append(line, '\n'))
		switch mode {
		case "error":
			return errors.New("chunk 7 unreadable")
		case "cut":
			w.Write(line[:10])
		}
		return nil
	})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	c := client.NewTCP(strings.TrimPrefix(srv.URL, "http://"))
	defer c.Close()
	ctx := context.Background()
	id := trace.TraceID{1}

	mode = "error"
	resp, err := http.Get(srv.URL + "/v1/traces/" + id.String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := string(line) + "\n" + `{"error":"chunk 7 unreadable","code":"internal","status":500}` + "\n"; resp.StatusCode != 200 || string(body) != want {
		t.Errorf("answer %d %q, want 200 %q", resp.StatusCode, body, want)
	}
	if spans, err := c.Get(ctx, id); !errors.Is(err, client.ErrServer) || !strings.Contains(err.Error(), "chunk 7 unreadable") || spans != nil {
		t.Errorf("Get: %d spans, err %v; want ErrServer naming the error", len(spans), err)
	}
	if raw, err := c.GetRaw(ctx, id, 0); !errors.Is(err, client.ErrServer) || raw != nil {
		t.Errorf("GetRaw: %q, err %v; want ErrServer", raw, err)
	}

	mode = "cut"
	if _, err := c.GetRaw(ctx, id, 0); err == nil || !strings.Contains(err.Error(), "cut short in line 2") {
		t.Errorf("GetRaw of a cut answer: err %v", err)
	}

	mode = "ok"
	raw, err := c.GetRaw(ctx, id, 0)
	if err != nil || string(raw) != string(line)+"\n" {
		t.Errorf("GetRaw: %q, %v", raw, err)
	}
}
