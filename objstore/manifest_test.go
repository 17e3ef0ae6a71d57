package objstore

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

const validSum = "8eaa4cf6d1533f09f0d5d65298eed59bf6e773012aea21ded32f022b4a97f8a6"

func manifestJSON(t testing.TB, edit func(m map[string]any)) []byte {
	t.Helper()
	m := map[string]any{
		"version": 1, "node": "web-1", "store": 5, "generation": "g18eb677b07af3470-ccef8eaa",
		"files": []any{
			map[string]any{"path": "traces.zts", "size": 65873, "sha256": validSum},
			map[string]any{"path": "meta/000006.sst", "size": 15935, "sha256": validSum},
		},
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func withFile(path string, size int, sum string) func(map[string]any) {
	return func(m map[string]any) {
		m["files"] = []any{map[string]any{"path": path, "size": size, "sha256": sum}}
	}
}

func TestParseManifest(t *testing.T) {
	m, err := ParseManifest("k", manifestJSON(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := m.File("meta/000006.sst"); !ok || f.Size != 15935 || m.Node != "web-1" || m.Store != 5 {
		t.Fatalf("parsed %+v", m)
	}
	bad := []struct {
		name string
		data []byte
		want string
	}{
		{"not JSON", []byte(`{"version":1,`), "unexpected end"},
		{"too large", []byte(strings.Repeat(" ", MaxManifestSize+1)), "more than"},
		{"other version", manifestJSON(t, func(m map[string]any) { m["version"] = 2 }), "version 2"},
		{"no node", manifestJSON(t, func(m map[string]any) { delete(m, "node") }), "not a plain name"},
		{"node with a slash", manifestJSON(t, func(m map[string]any) { m["node"] = "a/b" }), "not a plain name"},
		{"generation ..", manifestJSON(t, func(m map[string]any) { m["generation"] = ".." }), "not a plain name"},
		{"path climbs out", manifestJSON(t, withFile("../../etc/cron.d/x", 1, validSum)), "not a relative path"},
		{"path climbs out inside", manifestJSON(t, withFile("meta/../../x", 1, validSum)), "not a relative path"},
		{"absolute path", manifestJSON(t, withFile("/etc/passwd", 1, validSum)), "not a relative path"},
		{"unclean path", manifestJSON(t, withFile("meta//x", 1, validSum)), "not a relative path"},
		{"empty path", manifestJSON(t, withFile("", 1, validSum)), "not a relative path"},
		{"backslash", manifestJSON(t, withFile(`meta\..\..\x`, 1, validSum)), "not a relative path"},
		{"negative size", manifestJSON(t, withFile("traces.zts", -1, validSum)), "negative size"},
		{"short sum", manifestJSON(t, withFile("traces.zts", 1, "abc")), "not 64 hex digits"},
		{"sum not hex", manifestJSON(t, withFile("traces.zts", 1, strings.Repeat("z", 64))), "not 64 hex digits"},
		{"file twice", manifestJSON(t, func(m map[string]any) {
			f := map[string]any{"path": "traces.zts", "size": 1, "sha256": validSum}
			m["files"] = []any{f, f}
		}), "listed twice"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseManifest("p/web-1/000005/manifest.json", c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "p/web-1/000005/manifest.json") {
				t.Fatalf("err = %v, want one naming the key and %q", err, c.want)
			}
		})
	}
}

// FuzzParseManifest: any bytes either fail with an error or give a
// manifest whose every file path stays inside the directory it is joined to.
func FuzzParseManifest(f *testing.F) {
	f.Add(manifestJSON(f, nil))
	f.Add(manifestJSON(f, withFile("../x", 1, validSum)))
	f.Add([]byte(`{"version":1,"node":"n","generation":"g","files":[{"path":"a/./b","size":0,"sha256":"` + validSum + `"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest("k", data)
		if err != nil {
			return
		}
		base := "/cache/store"
		for _, fl := range m.Files {
			joined := filepath.Join(base, filepath.FromSlash(fl.Path))
			if !strings.HasPrefix(joined, base+"/") {
				t.Fatalf("path %q escapes to %q", fl.Path, joined)
			}
		}
		if strings.ContainsAny(m.Node+m.Generation, "/\\") {
			t.Fatalf("node %q / generation %q hold a separator", m.Node, m.Generation)
		}
	})
}
