//go:build !race

package daemontest

// RaceEnabled reports whether the tests run with the race detector; the
// binaries are then built with it too.
const RaceEnabled = false
