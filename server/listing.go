package server

import (
	"net/http"
	"sort"
	"strconv"

	"github.com/ztsd/ztsd/queryapi"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// Attribute keys that name where a span comes from.
const (
	attrServiceName  = "service.name"
	attrSourceFile   = "source.file"
	attrSourceFormat = "source.format"
	attrComponent    = "component"
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

// Service is one entry of GET /v1/services: a service's name, as
// queryapi.ServiceOf names a span's service (and the Jaeger and Tempo APIs
// list it), and the attributes that, all matching, find its spans.
type Service struct {
	Name  string            `json:"name"`
	Attrs map[string]string `json:"attrs"`
}

// ServicesResponse is the body of GET /v1/services.
type ServicesResponse struct {
	Services []Service `json:"services"`
}

// handleServices lists services: every service.name value; then every
// Zorka component and every imported source file whose spans have no
// service.name, named "zorka <component>" or "<format> <file>"
// ("wtf blk-client.wtf-trace"). A component or file costs one
// one-result search (to learn its format and whether it has a
// service.name); ?limit= bounds each list.
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
		out.Services = append(out.Services, Service{Name: n, Attrs: map[string]string{attrServiceName: n}})
	}
	var sources []Service
	// sampled finds one span with attrs and, unless it names its own
	// service, lists its service with attrs as the filter.
	sampled := func(attrs map[string]string) error {
		q := storedir.Query{Spans: true, Limit: 1}
		for k, v := range attrs {
			q.Attrs = append(q.Attrs, trace.Attr{Key: k, Value: trace.String(v)})
		}
		sort.Slice(q.Attrs, func(i, j int) bool { return q.Attrs[i].Key < q.Attrs[j].Key })
		res, err := s.db.Search(r.Context(), q)
		if err != nil || len(res.Spans) == 0 {
			return err
		}
		if _, ok := res.Spans[0].Attrs.Get(attrServiceName); ok {
			return nil // listed under its service.name
		}
		sources = append(sources, Service{Name: queryapi.ServiceOf(res.Spans[0]), Attrs: attrs})
		return nil
	}
	comps, err := s.db.AttributeValues(r.Context(), attrComponent, limit)
	if err != nil {
		return err
	}
	for _, c := range comps {
		if err := sampled(map[string]string{attrSourceFormat: trace.SourceZorka, attrComponent: c}); err != nil {
			return err
		}
	}
	files, err := s.db.AttributeValues(r.Context(), attrSourceFile, limit)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := sampled(map[string]string{attrSourceFile: f}); err != nil {
			return err
		}
	}
	sort.Slice(sources, func(i, j int) bool { return sources[i].Name < sources[j].Name })
	// A Zorka file whose spans carry a component is named by the
	// component: list each name once, with its first filter.
	seen := map[string]bool{}
	for _, src := range sources {
		if !seen[src.Name] {
			seen[src.Name] = true
			out.Services = append(out.Services, src)
		}
	}
	return writeJSON(w, http.StatusOK, out)
}
