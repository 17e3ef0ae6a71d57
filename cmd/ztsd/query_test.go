package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQueryFlag: --query makes the daemon a query node, which needs a
// bucket (exit 2 naming the key without one).
func TestQueryFlag(t *testing.T) {
	f, err := parseFlags([]string{"--query"}, &bytes.Buffer{})
	if err != nil || !f.query {
		t.Fatalf("--query: %+v %v", f, err)
	}
	if _, err := loadConfig(f); err == nil || !strings.Contains(err.Error(), "query_only: needs object_store.bucket") {
		t.Fatalf("--query without a bucket: %v", err)
	}
	var stderr bytes.Buffer
	if code := run([]string{"--query", "--data-dir", t.TempDir()}, &stderr); code != 2 || !strings.Contains(stderr.String(), "query_only") {
		t.Fatalf("ztsd --query without a bucket: exit %d, %s", code, stderr.String())
	}
	cfg := filepath.Join(t.TempDir(), "ztsd.toml")
	os.WriteFile(cfg, []byte("[object_store]\nbucket = \"traces\"\nendpoint = \"http://127.0.0.1:1\"\n"), 0o600)
	f.configPath = cfg
	c, err := loadConfig(f)
	if err != nil || !c.QueryOnly {
		t.Fatalf("--query with a bucket: %+v %v", c.QueryOnly, err)
	}
	f.query = false
	if c, err := loadConfig(f); err != nil || c.QueryOnly {
		t.Fatalf("no --query: query_only %v, %v", c.QueryOnly, err)
	}
}
