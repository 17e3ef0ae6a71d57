package objstore

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"
)

// ManifestVersion is the manifest format written by this ztsd.
const ManifestVersion = 1

// MaxManifestSize bounds a manifest read from a bucket.
const MaxManifestSize = 1 << 20

// Manifest describes one uploaded store; its presence makes the store
// visible. It is written after every file it names was uploaded and
// verified.
type Manifest struct {
	Version    int       `json:"version"`
	Node       string    `json:"node"`
	Store      uint32    `json:"store"`
	Generation string    `json:"generation"`
	Uploaded   time.Time `json:"uploaded"`
	// FirstNS and LastNS bound the start times of the store's spans;
	// Spans and Chunks count them (as the store's config.props says).
	FirstNS int64 `json:"first_ns"`
	LastNS  int64 `json:"last_ns"`
	Spans   int64 `json:"spans"`
	Chunks  int64 `json:"chunks"`
	// MasterChecksum is the data file's master checksum from config.props.
	MasterChecksum string `json:"master_checksum,omitempty"`
	// Files lists every object of the generation: path inside the store
	// directory, size and hex SHA-256.
	Files []ManifestFile `json:"files"`
}

// ManifestFile is one file of an uploaded store.
type ManifestFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ParseManifest decodes and checks a manifest read from key.
func ParseManifest(key string, data []byte) (*Manifest, error) {
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("manifest %s: %d bytes, more than %d", key, len(data), MaxManifestSize)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", key, err)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("manifest %s: version %d, this ztsd reads %d", key, m.Version, ManifestVersion)
	}
	if !isName(m.Generation) || !isName(m.Node) {
		return nil, fmt.Errorf("manifest %s: node %q or generation %q is not a plain name", key, m.Node, m.Generation)
	}
	seen := make(map[string]bool, len(m.Files))
	for i, f := range m.Files {
		switch {
		case !isStorePath(f.Path):
			// Paths become local file names in the index cache and in
			// downloads: nothing may climb out of the store directory.
			return nil, fmt.Errorf("manifest %s: file %d: path %q is not a relative path inside a store", key, i, f.Path)
		case f.Size < 0:
			return nil, fmt.Errorf("manifest %s: file %d (%q): negative size %d", key, i, f.Path, f.Size)
		case len(f.SHA256) != 64 || !isHex(f.SHA256):
			return nil, fmt.Errorf("manifest %s: file %d (%q): sha256 %q is not 64 hex digits", key, i, f.Path, f.SHA256)
		case seen[f.Path]:
			return nil, fmt.Errorf("manifest %s: file %d (%q) is listed twice", key, i, f.Path)
		}
		seen[f.Path] = true
	}
	return &m, nil
}

// isName reports whether s is a non-empty name usable as one key segment.
func isName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}

// isStorePath reports whether p is a clean relative path ("traces.zts",
// "meta/000005.sst") that stays inside the directory it is joined to.
func isStorePath(p string) bool {
	return p != "" && p != "." && !path.IsAbs(p) && path.Clean(p) == p &&
		p != ".." && !strings.HasPrefix(p, "../") && !strings.ContainsAny(p, "\\\x00")
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// File returns the manifest's entry for path.
func (m *Manifest) File(path string) (ManifestFile, bool) {
	for _, f := range m.Files {
		if f.Path == path {
			return f, true
		}
	}
	return ManifestFile{}, false
}
