package main

import (
	"os"
	"testing"

	"github.com/ztsd/ztsd/bench"
	"github.com/ztsd/ztsd/internal/daemontest"
)

// TestMain removes the ztsd binaries daemontest built for these tests. The
// test binary is also the HTTP commit probe's server when started as one.
func TestMain(m *testing.M) {
	bench.RunHTTPCommitServerIfAsked() // ztsctl bench's HTTP commit probe starts the test binary as its server
	os.Exit(daemontest.Main(m))
}
