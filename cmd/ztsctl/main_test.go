package main

import (
	"os"
	"testing"

	"github.com/ztsd/ztsd/internal/daemontest"
)

// TestMain removes the ztsd binaries daemontest built for these tests.
func TestMain(m *testing.M) {
	os.Exit(daemontest.Main(m))
}
