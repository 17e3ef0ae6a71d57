// Package webui serves ztsd's browser UI: the search page (/search), a
// trace's page (/trace/{id}: waterfall, flame graph and icicle, details,
// downloads) and the stores page (/stores), the paths Jaeger UI uses so
// that links from logs and other tools work. It is mounted on the daemon's
// API mux through server.Options.Routes and is only wired in when the
// loopback TCP listener is on and the config's ui switch is true.
//
// The UI is hand-written, dependency-free JavaScript modules and one
// stylesheet under assets/, embedded with go:embed: nothing is built, so
// `make run` and `make test` need neither Node nor a network, and what the
// browser runs is exactly what is in the repository. Every page is the
// same HTML shell (assets/index.html); the modules read the page's path and
// query and fetch their data from the daemon's own /v1 API, /metrics and
// the Jaeger query API's operation listing, so the UI sees exactly what
// API clients see and needs no endpoints of its own.
//
// Invariants:
//   - The pages and assets carry no data and need no access rights
//     (server.AccessNone); every byte of trace data comes through the /v1
//     routes and their read-access check.
//   - A page path always answers the shell (200), whatever the id or query:
//     the page itself says what is wrong with it (unknown trace id,
//     malformed query, a store error), never a blank page.
//   - Assets are served with Cache-Control: no-cache and an ETag of their
//     content, so a new daemon never runs a stale UI.
package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/ztsd/ztsd/server"
)

//go:embed assets
var embedded embed.FS

// AssetPrefix is the path under which the UI's scripts and stylesheet are
// served.
const AssetPrefix = "/ui/"

// asset is one embedded file, read once.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// UI serves the pages and assets.
type UI struct {
	assets map[string]asset // by name under assets/, e.g. "search.js"
}

// New reads the embedded assets.
func New() (*UI, error) {
	u := &UI{assets: map[string]asset{}}
	sub, err := fs.Sub(embedded, "assets")
	if err != nil {
		return nil, fmt.Errorf("webui assets: %w", err)
	}
	err = fs.WalkDir(sub, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, name)
		if err != nil {
			return fmt.Errorf("webui asset %s: %w", name, err)
		}
		ct := mime.TypeByExtension(path.Ext(name))
		switch path.Ext(name) {
		case ".js":
			ct = "text/javascript; charset=utf-8"
		case ".css":
			ct = "text/css; charset=utf-8"
		case ".html":
			ct = "text/html; charset=utf-8"
		}
		if ct == "" {
			ct = "application/octet-stream"
		}
		sum := sha256.Sum256(b)
		u.assets[name] = asset{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, ok := u.assets["index.html"]; !ok {
		return nil, fmt.Errorf("webui assets: index.html is missing")
	}
	return u, nil
}

// Routes are the UI's handlers for server.Options.Routes.
func (u *UI) Routes() []server.Route {
	page := http.HandlerFunc(u.servePage)
	return []server.Route{
		{Pattern: "GET /{$}", Access: server.AccessNone, Handler: http.RedirectHandler("/search", http.StatusFound)},
		{Pattern: "GET /search", Access: server.AccessNone, Handler: page},
		{Pattern: "GET /trace/{id}", Access: server.AccessNone, Handler: page},
		{Pattern: "GET /stores", Access: server.AccessNone, Handler: page},
		{Pattern: "GET " + AssetPrefix + "{name...}", Access: server.AccessNone, Handler: http.HandlerFunc(u.serveAsset)},
	}
}

func (u *UI) servePage(w http.ResponseWriter, r *http.Request) {
	u.write(w, r, u.assets["index.html"])
}

func (u *UI) serveAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	a, ok := u.assets[name]
	if !ok || name == "index.html" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "no UI asset %q\n", strings.TrimPrefix(r.URL.Path, AssetPrefix))
		return
	}
	u.write(w, r, a)
}

func (u *UI) write(w http.ResponseWriter, r *http.Request, a asset) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Type", a.contentType)
	// The pages load only their own scripts and styles and talk only to
	// this daemon.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; object-src 'none'; frame-ancestors 'none'")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
