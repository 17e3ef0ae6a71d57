package tempoapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/internal/querytest"
	"github.com/ztsd/ztsd/tempoapi"
)

// shape lists the paths of v with their JSON types; array elements share
// the path "[]".
func shape(path string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		out[path] = "object"
		for k, e := range x {
			shape(path+"."+k, e, out)
		}
	case []any:
		out[path] = "array"
		for _, e := range x {
			shape(path+"[]", e, out)
		}
	case string:
		out[path] = "string"
	case float64:
		out[path] = "number"
	case bool:
		out[path] = "bool"
	case nil:
		out[path] = "null"
	}
}

// TestTempoDocumentedShapes checks ztsd's answers against the response
// examples of Tempo's HTTP API documentation (testdata/tempo): every field
// an example has, ztsd's answer has, with the same JSON type.
func TestTempoDocumentedShapes(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "tempo", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no documented examples in testdata/tempo: %v", err)
	}
	db := querytest.OpenDB(t, querytest.LoadSpans(t))
	ts := newServer(t, db)
	v1 := http.NewServeMux()
	v1.Handle("GET /api/traces/{id}", tempoapi.New(db, nil).TraceV1Handler())
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var g struct {
			Doc     string
			Path    string
			Example any
		}
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var code int
		var body []byte
		if g.Path == "" { // Tempo's v1 JSON trace, behind jaeger-query's path
			rec := httptest.NewRecorder()
			v1.ServeHTTP(rec, httptest.NewRequest("GET", fmt.Sprintf("/api/traces/%x", querytest.TraceID(1)), nil))
			code, body = rec.Code, rec.Body.Bytes()
		} else {
			code, _, body = get(t, ts, g.Path, nil)
		}
		var got any
		if err := json.Unmarshal(body, &got); err != nil || code != 200 {
			t.Errorf("%s: %d %s", g.Doc, code, body)
			continue
		}
		want, have := map[string]string{}, map[string]string{}
		shape("", g.Example, want)
		shape("", got, have)
		var missing []string
		for p, typ := range want {
			if have[p] != typ {
				missing = append(missing, fmt.Sprintf("%s (%s, ztsd: %q)", p, typ, have[p]))
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s: fields of the documented example that ztsd's answer lacks or types differently: %s", g.Doc, strings.Join(missing, ", "))
		}
	}
}
