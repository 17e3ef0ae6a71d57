package webui

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/server"
	"github.com/ztsd/ztsd/storedir"
)

func testHandler(t *testing.T) http.Handler {
	t.Helper()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ui, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return server.New(db, server.Options{Access: server.DefaultAccess(), Routes: ui.Routes()}).Handler()
}

// get sends a request as a TCP peer (no unix credentials).
func get(h http.Handler, path string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req = req.WithContext(server.ConnContext(req.Context(), nil))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestPages: / redirects to /search; every page path answers the shell,
// whatever its id or query (the page reports bad ones itself); the API's
// own 404 for other paths is unchanged.
func TestPages(t *testing.T) {
	h := testHandler(t)
	if rec := get(h, "/"); rec.Code != http.StatusFound || rec.Header().Get("Location") != "/search" {
		t.Errorf("GET /: %d Location %q", rec.Code, rec.Header().Get("Location"))
	}
	for _, p := range []string{"/search", "/search?min=nonsense&attr=x", "/trace/0af7651916cd43dd8448eb211c80319c", "/trace/not-hex", "/stores"} {
		rec := get(h, p)
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
			t.Errorf("GET %s: %d %s", p, rec.Code, rec.Header().Get("Content-Type"))
			continue
		}
		body := rec.Body.String()
		if !strings.Contains(body, `<script type="module" src="/ui/app.js">`) || !strings.Contains(body, `<main id="app">`) {
			t.Errorf("GET %s is not the UI shell:\n%s", p, body)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", p, csp)
		}
	}
	rec := get(h, "/nowhere")
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"code":"not_found"`) {
		t.Errorf("GET /nowhere: %d %s", rec.Code, rec.Body)
	}
	if rec := get(h, "/ui/nope.js"); rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "nope.js") {
		t.Errorf("GET /ui/nope.js: %d %s", rec.Code, rec.Body)
	}
	if rec := get(h, "/ui/index.html"); rec.Code != http.StatusNotFound {
		t.Errorf("GET /ui/index.html: %d, want 404 (the shell is served at page paths)", rec.Code)
	}
}

var importRE = regexp.MustCompile(`(?:from|import\()\s*'(\./[a-z0-9]+\.js)'`)

// TestAssetGraph serves every asset the shell and the modules reference
// (static and dynamic imports), with its type and a validator that makes
// a reload cheap.
func TestAssetGraph(t *testing.T) {
	h := testHandler(t)
	seen := map[string]bool{}
	queue := []string{"/ui/app.js", "/ui/style.css"}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		rec := get(h, p)
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d", p, rec.Code)
			continue
		}
		want := "text/javascript; charset=utf-8"
		if strings.HasSuffix(p, ".css") {
			want = "text/css; charset=utf-8"
		}
		if ct := rec.Header().Get("Content-Type"); ct != want {
			t.Errorf("GET %s: Content-Type %q, want %q", p, ct, want)
		}
		etag := rec.Header().Get("ETag")
		if etag == "" || rec.Header().Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s: ETag %q Cache-Control %q", p, etag, rec.Header().Get("Cache-Control"))
		} else if again := get(h, p, "If-None-Match", etag); again.Code != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match: %d, want 304", p, again.Code)
		}
		body, _ := io.ReadAll(rec.Body)
		for _, m := range importRE.FindAllStringSubmatch(string(body), -1) {
			queue = append(queue, "/ui/"+strings.TrimPrefix(m[1], "./"))
		}
	}
	for _, want := range []string{"/ui/search.js", "/ui/trace.js", "/ui/flame.js", "/ui/stores.js", "/ui/api.js", "/ui/model.js", "/ui/util.js"} {
		if !seen[want] {
			t.Errorf("%s is not reachable from app.js", want)
		}
	}
}
