package objstore

import (
	"encoding/json"
	"fmt"
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
	if m.Generation == "" || m.Node == "" {
		return nil, fmt.Errorf("manifest %s: no node or generation", key)
	}
	seen := make(map[string]bool, len(m.Files))
	for i, f := range m.Files {
		if f.Path == "" || f.Size < 0 || len(f.SHA256) != 64 || seen[f.Path] {
			return nil, fmt.Errorf("manifest %s: file %d (%q) is malformed or repeated", key, i, f.Path)
		}
		seen[f.Path] = true
	}
	return &m, nil
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
