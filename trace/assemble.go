package trace

import (
	"errors"
	"fmt"
	"sort"
)

// Assembly of what is stored piecewise into what is read as a whole.
//
// A streamed span (Zorka chunked traces) is stored as pieces, one per
// submission, numbered by Span.ChunkNum 0, 1, 2, …. A record that had not
// ended when its piece was cut has Record.Open set; the next piece repeats
// the open path root → … → innermost open record, each continued record
// being the FIRST child of its continued parent (the root continues the
// root), and each carrying only what arrived after the cut: new attributes,
// new children, an exception, and — in the piece where it closed — its final
// duration, calls and errors.
//
// Spans of one trace are linked by ParentID; AssembleTree hangs each span
// under its parent in Span.Children.

// ErrMissingChunks is wrapped by AssembleChunks when the chunk numbers of the
// pieces do not run 0, 1, 2, … without gaps. The span it returns alongside is
// a best-effort merge of the pieces that exist.
var ErrMissingChunks = errors.New("span chunks missing")

// AssembleChunks merges the pieces of one streamed span into one span.
//
// The pieces may come in any order; they are merged in ChunkNum order and
// must share TraceID and SpanID, with distinct chunk numbers. The result is a
// new span (the pieces are not modified, though exceptions and attribute
// values are shared with them) with ChunkNum 0, Children nil, StartNS, Type,
// ParentID and Source from the first piece that has them, attributes merged
// (later pieces win), Error set when any piece has it, DurationNS, Calls and
// Errors from the last piece (the one where the root record closed), and
// Recs counted over the merged tree. Records merge the same way: a continued
// record takes the attributes, children and exception of its continuation,
// its duration, calls, errors and Open flag from the latest piece, and its
// method and start from the continuation when it had no method yet.
//
// A single piece is returned as a copy. When chunk numbers have gaps the
// merge still happens, treating the pieces as consecutive, and the error
// wraps ErrMissingChunks.
func AssembleChunks(pieces []*Span) (*Span, error) {
	if len(pieces) == 0 {
		return nil, errors.New("assemble chunks: no pieces")
	}
	sorted := make([]*Span, len(pieces))
	copy(sorted, pieces)
	for i, p := range sorted {
		if p == nil {
			return nil, fmt.Errorf("assemble chunks: piece %d is nil", i)
		}
	}
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].ChunkNum < sorted[j].ChunkNum })

	first := sorted[0]
	out := *first
	out.ChunkNum = 0
	out.Children = nil
	out.Attrs = append(Attrs(nil), first.Attrs...)
	root, err := cloneRecordTree(first.Root)
	if err != nil {
		return nil, fmt.Errorf("assemble chunks: span %s/%s chunk %d: %w", first.TraceID, first.SpanID, first.ChunkNum, err)
	}
	out.Root = root

	gap := first.ChunkNum != 0
	for i := 1; i < len(sorted); i++ {
		p, prev := sorted[i], sorted[i-1]
		if p.TraceID != first.TraceID || p.SpanID != first.SpanID {
			return nil, fmt.Errorf("assemble chunks: chunk %d belongs to span %s/%s, not %s/%s",
				p.ChunkNum, p.TraceID, p.SpanID, first.TraceID, first.SpanID)
		}
		if p.ChunkNum == prev.ChunkNum {
			return nil, fmt.Errorf("assemble chunks: span %s/%s: chunk %d appears twice", first.TraceID, first.SpanID, p.ChunkNum)
		}
		if p.ChunkNum != prev.ChunkNum+1 {
			gap = true
		}
		switch {
		case out.Root == nil:
			if out.Root, err = cloneRecordTree(p.Root); err != nil {
				return nil, fmt.Errorf("assemble chunks: span %s/%s chunk %d: %w", first.TraceID, first.SpanID, p.ChunkNum, err)
			}
		case p.Root != nil:
			if !out.Root.Open {
				return nil, fmt.Errorf("assemble chunks: span %s/%s: chunk %d continues a root record that closed in an earlier chunk",
					first.TraceID, first.SpanID, p.ChunkNum)
			}
			if err := mergeContinuedRecord(out.Root, p.Root, 1); err != nil {
				return nil, fmt.Errorf("assemble chunks: span %s/%s chunk %d: %w", first.TraceID, first.SpanID, p.ChunkNum, err)
			}
		}
		for _, a := range p.Attrs {
			out.Attrs.Set(a.Key, a.Value)
		}
		if out.StartNS == 0 {
			out.StartNS = p.StartNS
		}
		if out.Type == "" {
			out.Type = p.Type
		}
		if out.ParentID == 0 {
			out.ParentID = p.ParentID
		}
		if out.Source == "" {
			out.Source = p.Source
		}
		out.Error = out.Error || p.Error
		out.DurationNS, out.Calls, out.Errors = p.DurationNS, p.Calls, p.Errors
	}

	var recs, errs int64
	out.Root.Walk(func(r *Record, _ int) bool {
		recs++
		if r.Exception != nil {
			errs++
		}
		return true
	})
	out.Recs = recs
	if errs > out.Errors {
		out.Errors = errs
	}
	if gap {
		return &out, fmt.Errorf("assemble chunks: span %s/%s: chunk numbers %d..%d of %d pieces: %w",
			first.TraceID, first.SpanID, first.ChunkNum, sorted[len(sorted)-1].ChunkNum, len(sorted), ErrMissingChunks)
	}
	return &out, nil
}

// mergeContinuedRecord merges cont, the continuation of the open record a,
// into a (which the caller owns). depth is a's depth in the tree.
func mergeContinuedRecord(a, cont *Record, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("open record path deeper than %d", MaxDepth)
	}
	if a.Method == "" {
		// Cut before its method was known: method and start come with the
		// continuation.
		a.Method, a.StartNS = cont.Method, cont.StartNS
	}
	for _, at := range cont.Attrs {
		a.Attrs.Set(at.Key, at.Value)
	}
	if cont.Exception != nil {
		a.Exception = cont.Exception
	}
	a.DurationNS, a.Calls, a.Errors, a.Open = cont.DurationNS, cont.Calls, cont.Errors, cont.Open
	kids := cont.Children
	if n := len(a.Children); n > 0 && a.Children[n-1].Open && len(kids) > 0 {
		if err := mergeContinuedRecord(a.Children[n-1], kids[0], depth+1); err != nil {
			return err
		}
		kids = kids[1:]
	}
	for _, k := range kids {
		c, err := cloneRecordTree(k)
		if err != nil {
			return err
		}
		a.Children = append(a.Children, c)
	}
	return nil
}

// cloneRecordTree copies the record tree rooted at r (attribute slices and
// child slices are new; values and exceptions are shared). It refuses trees
// deeper than MaxDepth.
func cloneRecordTree(r *Record) (*Record, error) {
	if r == nil {
		return nil, nil
	}
	var clone func(r *Record, depth int) (*Record, error)
	clone = func(r *Record, depth int) (*Record, error) {
		if depth > MaxDepth {
			return nil, fmt.Errorf("record tree deeper than %d", MaxDepth)
		}
		c := *r
		c.Attrs = append(Attrs(nil), r.Attrs...)
		c.Children = nil
		if len(r.Children) > 0 {
			c.Children = make([]*Record, 0, len(r.Children))
			for _, k := range r.Children {
				if k == nil {
					continue
				}
				kc, err := clone(k, depth+1)
				if err != nil {
					return nil, err
				}
				c.Children = append(c.Children, kc)
			}
		}
		return &c, nil
	}
	return clone(r, 1)
}

// AssembleTree links spans into trees by ParentID and returns the roots.
//
// A span is a root when its ParentID is 0, names itself, or names no span in
// the input. Each other span is appended to its parent's Children; roots and
// every Children list are ordered by StartNS, then SpanID, then input order.
// Children of every input span is overwritten. When several spans share a
// SpanID, the earliest in that order is the one children attach to. Parent
// links that form a cycle are cut at the cycle's earliest span, which becomes
// a root, so every input span appears exactly once in the result. Nil spans
// and repeated pointers are ignored.
func AssembleTree(spans []*Span) []*Span {
	sorted := make([]*Span, 0, len(spans))
	seen := make(map[*Span]bool, len(spans))
	for _, s := range spans {
		if s == nil || seen[s] {
			continue
		}
		seen[s] = true
		s.Children = nil
		sorted = append(sorted, s)
	}
	sort.SliceStable(sorted, func(i, j int) bool { return spanBefore(sorted[i], sorted[j]) })

	byID := make(map[SpanID]*Span, len(sorted))
	for _, s := range sorted {
		if s.SpanID == 0 {
			continue
		}
		if _, dup := byID[s.SpanID]; !dup {
			byID[s.SpanID] = s
		}
	}
	cut := make(map[*Span]bool)
	parentOf := func(s *Span) *Span {
		if s.ParentID == 0 || s.ParentID == s.SpanID || cut[s] {
			return nil
		}
		p := byID[s.ParentID]
		if p == s {
			return nil
		}
		return p
	}

	// Walk each parent chain once; a chain that comes back onto itself is a
	// cycle, broken at its earliest span.
	const (
		unvisited = iota
		onPath
		done
	)
	state := make(map[*Span]uint8, len(sorted))
	var path []*Span
	for _, s := range sorted {
		if state[s] != unvisited {
			continue
		}
		path = path[:0]
		for cur := s; ; {
			state[cur] = onPath
			path = append(path, cur)
			p := parentOf(cur)
			if p == nil || state[p] == done {
				break
			}
			if state[p] == onPath {
				start := 0
				for path[start] != p {
					start++
				}
				earliest := path[start]
				for _, c := range path[start+1:] {
					if spanBefore(c, earliest) {
						earliest = c
					}
				}
				cut[earliest] = true
				break
			}
			cur = p
		}
		for _, c := range path {
			state[c] = done
		}
	}

	var roots []*Span
	for _, s := range sorted {
		if p := parentOf(s); p != nil {
			p.Children = append(p.Children, s)
		} else {
			roots = append(roots, s)
		}
	}
	return roots
}

func spanBefore(a, b *Span) bool {
	if a.StartNS != b.StartNS {
		return a.StartNS < b.StartNS
	}
	return a.SpanID < b.SpanID
}
