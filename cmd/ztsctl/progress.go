package main

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// countBar shows, on stderr when it is a terminal, a running count of
// what a long command has done (spans imported, traces exported) and the
// time it has taken; piped or redirected, it draws nothing, so stdout and
// stderr carry only the command's own output. A nil *countBar is off.
type countBar struct {
	bar         *progressbar.ProgressBar
	desc, units string
	n           int64
}

// newCountBar starts a bar on stderr described by desc counting units, or
// returns nil when stderr is not a terminal.
func newCountBar(stderr io.Writer, desc, units string) *countBar {
	if !isTerminal(stderr) {
		return nil
	}
	return &countBar{desc: desc, units: units, bar: progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)}
}

// add counts n more units.
func (b *countBar) add(n int64) {
	if b == nil || b.bar == nil {
		return
	}
	b.n += n
	b.bar.Describe(fmt.Sprintf("%s: %d %s", b.desc, b.n, b.units))
	b.bar.Add64(n)
}

// finish clears the bar; later calls do nothing.
func (b *countBar) finish() {
	if b != nil && b.bar != nil {
		b.bar.Finish()
		b.bar = nil
	}
}
