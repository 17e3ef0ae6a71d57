package bench

import (
	"os"
	"testing"

	"github.com/ztsd/ztsd/internal/daemontest"
)

// TestMain removes the ztsd binaries daemontest built for these tests. The
// test binary is also the HTTP commit probe's server when started as one.
func TestMain(m *testing.M) {
	RunHTTPCommitServerIfAsked()
	os.Exit(daemontest.Main(m))
}
