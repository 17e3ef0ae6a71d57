package zorka

// agentDefs are the definitions of one agent-data body, staged so that a
// body is applied whole or not at all.
type agentDefs struct {
	strs    map[uint64]string
	methods map[uint64]string
	added   int64 // accounted bytes of the staged definitions
}

// agentStats counts the definitions of one body.
type agentStats struct {
	strings int
	methods int
}

// decodeAgentData decodes an agent-data body against base (the session's
// current symbols, ignored when reset). Both generations are accepted per
// tuple: string defs C1 [id, text, type] (1.90; type 0 or 4–8) or
// C1 [id, text] (2.x), and method defs C2 [id, class, method, signature]
// whose three symbols must be defined in this body or before.
func decodeAgentData(body []byte, base *symbolTable, reset bool, maxSymbols int, maxBytes int64) (*agentDefs, agentStats, error) {
	defs := &agentDefs{strs: make(map[uint64]string), methods: make(map[uint64]string)}
	var st agentStats
	// What the body adds to: nothing after a reset (nil maps read empty;
	// has skips the lookup call for them).
	var baseStrs, baseMethods map[uint64]string
	baseCount, baseBytes := 0, int64(0)
	if !reset {
		baseStrs, baseMethods = base.strs, base.methods
		baseCount, baseBytes = base.count(), base.bytes
	}
	newEntries := 0
	lookup := func(id uint64) (string, bool) {
		if s, ok := defs.strs[id]; ok {
			return s, true
		}
		if len(baseStrs) == 0 {
			return "", false
		}
		s, ok := baseStrs[id]
		return s, ok
	}
	account := func(off int, isNew bool, n int) error {
		if isNew {
			newEntries++
			if baseCount+newEntries > maxSymbols {
				return decodeErrorf(off, "session has more than %d symbols", maxSymbols)
			}
		}
		defs.added += int64(n) + symbolOverhead
		if baseBytes+defs.added > maxBytes {
			return decodeErrorf(off, "session symbols take more than %d bytes", maxBytes)
		}
		return nil
	}

	r := &cborReader{b: body}
	for !r.eof() {
		off := r.pos
		major, ai, tag, err := r.head()
		if err != nil {
			return nil, st, err
		}
		if major != majorTag || ai == aiIndefinite {
			return nil, st, decodeErrorf(off, "agent data: expected a tagged definition, found %s", describeByte(body[off]))
		}
		switch tag {
		case tagStringDef:
			n, err := r.arrayLen("string def", 1)
			if err != nil {
				return nil, st, err
			}
			if n != 2 && n != 3 {
				return nil, st, decodeErrorf(off, "string def must have 3 elements [id, text, type] (2 in Zorka 2.x), has %d", n)
			}
			id, err := r.uint("string def id")
			if err != nil {
				return nil, st, err
			}
			text, err := r.text("string def text", true)
			if err != nil {
				return nil, st, err
			}
			if n == 3 {
				toff := r.pos
				typ, err := r.uint("string def type")
				if err != nil {
					return nil, st, err
				}
				if typ != 0 && (typ < 4 || typ > 8) {
					return nil, st, decodeErrorf(toff, "string def %d: type %d is not one of 0, 4–8", id, typ)
				}
			}
			_, inDefs := defs.strs[id]
			inBase := has(baseStrs, id)
			if err := account(off, !inDefs && !inBase, len(text)); err != nil {
				return nil, st, err
			}
			defs.strs[id] = text
			st.strings++
		case tagMethodDef:
			n, err := r.arrayLen("method def", 1)
			if err != nil {
				return nil, st, err
			}
			if n != 4 {
				return nil, st, decodeErrorf(off, "method def must have 4 elements [id, class, method, signature], has %d", n)
			}
			var ids [4]uint64
			for i := range ids {
				if ids[i], err = r.uint("method def element"); err != nil {
					return nil, st, err
				}
			}
			var parts [3]string
			for i := range parts {
				s, ok := lookup(ids[i+1])
				if !ok {
					return nil, st, decodeErrorf(off, "method def %d: undefined string symbol %d (not sent yet?)", ids[0], ids[i+1])
				}
				parts[i] = s
			}
			m := renderMethod(parts[0], parts[1], parts[2])
			_, inDefs := defs.methods[ids[0]]
			inBase := has(baseMethods, ids[0])
			if err := account(off, !inDefs && !inBase, len(m)); err != nil {
				return nil, st, err
			}
			defs.methods[ids[0]] = m
			st.methods++
		default:
			return nil, st, decodeErrorf(off, "agent data: unknown tag %d (want 1: string def, 2: method def)", tag)
		}
	}
	return defs, st, nil
}

// has reports whether m defines id.
func has(m map[uint64]string, id uint64) bool {
	if len(m) == 0 {
		return false
	}
	_, ok := m[id]
	return ok
}

// apply commits staged definitions; re-definitions overwrite.
func (t *symbolTable) apply(defs *agentDefs, reset bool) {
	if reset {
		t.clear()
	}
	t.bytes += merge(t.strs, defs.strs)
	t.bytes += merge(t.methods, defs.methods)
}

// merge copies src into dst, overwriting, and returns by how much the
// accounted size of dst grew.
func merge(dst, src map[uint64]string) (grew int64) {
	for id, s := range src {
		if old, ok := dst[id]; ok {
			grew -= int64(len(old)) + symbolOverhead
		}
		dst[id] = s
		grew += int64(len(s)) + symbolOverhead
	}
	return grew
}
