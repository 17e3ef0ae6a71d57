//go:build race

package dial9

// raceEnabled scales expensive sample sweeps down under the race detector.
const raceEnabled = true
