package server

import (
	"net/http"
	"sort"
	"strconv"

	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// Attribute keys that name where a span comes from.
const (
	attrServiceName  = "service.name"
	attrSourceFile   = "source.file"
	attrSourceFormat = "source.format"
)

// AttributeKeysResponse is the body of GET /v1/attributes.
type AttributeKeysResponse struct {
	Keys []string `json:"keys"`
}

// listLimit reads ?limit= of a listing: 1..100000, default 1000.
func listLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 1000, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 100000 {
		return 0, badRequest("limit=%q: want 1..100000", v)
	}
	return n, nil
}

func (s *Server) handleAttributeKeys(w http.ResponseWriter, r *http.Request) error {
	limit, err := listLimit(r)
	if err != nil {
		return err
	}
	keys, err := s.db.AttributeKeys(r.Context(), limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, AttributeKeysResponse{Keys: keys})
}

// Service is one entry of GET /v1/services: what a span's service is, and
// the attribute filter that finds its spans.
type Service struct {
	Name string `json:"name"`
	// Attr and Value are the filter: service.name=Name, or
	// source.file=<file> for a source.
	Attr  string `json:"attr"`
	Value string `json:"value"`
	// Format is the source format (zorka, otlp, wtf, dial9, atf, json)
	// of a source-named service.
	Format string `json:"format,omitempty"`
}

// ServicesResponse is the body of GET /v1/services.
type ServicesResponse struct {
	Services []Service `json:"services"`
}

// handleServices lists services: every service.name value, then every
// imported source file whose spans have no service.name, named by its
// format and file ("wtf blk-client.wtf-trace"). A file costs one
// one-result search (to learn its format and whether it has a
// service.name); ?limit= bounds both lists.
func (s *Server) handleServices(w http.ResponseWriter, r *http.Request) error {
	limit, err := listLimit(r)
	if err != nil {
		return err
	}
	out := ServicesResponse{Services: []Service{}}
	names, err := s.db.AttributeValues(r.Context(), attrServiceName, limit)
	if err != nil {
		return err
	}
	for _, n := range names {
		out.Services = append(out.Services, Service{Name: n, Attr: attrServiceName, Value: n})
	}
	files, err := s.db.AttributeValues(r.Context(), attrSourceFile, limit)
	if err != nil {
		return err
	}
	var sources []Service
	for _, f := range files {
		res, err := s.db.Search(r.Context(), storedir.Query{Attrs: []trace.Attr{{Key: attrSourceFile, Value: trace.String(f)}}, Spans: true, Limit: 1})
		if err != nil {
			return err
		}
		if len(res.Spans) == 0 {
			continue
		}
		sp := res.Spans[0]
		if _, ok := sp.Attrs.Get(attrServiceName); ok {
			continue // listed under its service.name
		}
		format := sp.Source
		if v, ok := sp.Attrs.Get(attrSourceFormat); ok {
			format = v.Text()
		}
		sources = append(sources, Service{Name: format + " " + f, Attr: attrSourceFile, Value: f, Format: format})
	}
	sort.Slice(sources, func(i, j int) bool { return sources[i].Name < sources[j].Name })
	out.Services = append(out.Services, sources...)
	return writeJSON(w, http.StatusOK, out)
}
