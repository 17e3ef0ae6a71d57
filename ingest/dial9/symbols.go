package dial9

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/ztsd/ztsd/trace"
)

// symbolRow is one symbol table row for an address. An address may have
// several rows, one per inline depth (0 = outermost function).
type symbolRow struct {
	depth uint64
	name  string
	file  string
	line  uint64
}

func (r symbolRow) String() string {
	switch {
	case r.file == "":
		return r.name
	case r.line == 0:
		return r.name + " (" + r.file + ")"
	}
	return r.name + " (" + r.file + ":" + strconv.FormatUint(r.line, 10) + ")"
}

// symbolTable maps code addresses to symbols. It is file-global: the
// symbolizer appends SymbolTableEntry events to the last stream of a file,
// describing addresses of every stream; older files carry CallframeDefEvent
// rows instead.
type symbolTable struct {
	rows map[uint64][]symbolRow
	// rendered caches the frame strings of an address, innermost first.
	rendered map[uint64][]trace.Value
}

func newSymbolTable() *symbolTable {
	return &symbolTable{rows: map[uint64][]symbolRow{}, rendered: map[uint64][]trace.Value{}}
}

// maxInlineRows bounds the rows kept for one address (real inline chains
// are a few frames deep).
const maxInlineRows = 64

func (t *symbolTable) add(addr uint64, row symbolRow) {
	rows := t.rows[addr]
	for i := range rows {
		if rows[i].depth == row.depth {
			rows[i] = row // a later row for the same address and depth wins
			return
		}
	}
	if len(rows) < maxInlineRows {
		t.rows[addr] = append(rows, row)
	}
}

// frames renders the symbols of one address, innermost inline frame first
// (call chains are leaf first); an unknown address renders as hex.
func (t *symbolTable) frames(addr uint64) []trace.Value {
	if v, ok := t.rendered[addr]; ok {
		return v
	}
	rows := slices.Clone(t.rows[addr])
	var out []trace.Value
	if len(rows) == 0 {
		out = []trace.Value{trace.String(fmt.Sprintf("0x%x", addr))}
	} else {
		slices.SortFunc(rows, func(a, b symbolRow) int { return cmp.Compare(b.depth, a.depth) })
		out = make([]trace.Value, len(rows))
		for i, r := range rows {
			if r.name == "" {
				r.name = fmt.Sprintf("0x%x", addr)
			}
			out[i] = trace.String(r.String())
		}
	}
	t.rendered[addr] = out
	return out
}

// callchain renders a leaf-first address list as a list of frame strings.
func (t *symbolTable) callchain(addrs []uint64) trace.Value {
	out := make([]trace.Value, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, t.frames(a)...)
	}
	return trace.List(out...)
}
