package e2e

import (
	"encoding/binary"
	"fmt"
)

// A small writer of the Zorka 1.90 agent wire format (notes §15.1–15.4),
// playing the part of zorka-tdb's TraceTestDataBuilder: string and method
// definitions go into agent data in first-use order, records are written
// with big-endian prologs and epilogs, string-ref attribute keys, text
// values, TraceBegin, trace flags and exceptions.

// CBOR major types and the Zorka 1.90 tags used here.
const (
	cborUint  = 0
	cborBytes = 2
	cborText  = 3
	cborArray = 4
	cborMap   = 5
	cborTag   = 6

	zTagStringDef  = 0x01
	zTagMethodDef  = 0x02
	zTagStringRef  = 0x06
	zTagTraceStart = 0x08
	zTagAttrs      = 0x09
	zTagPrologBE   = 0x0A
	zTagEpilogBE   = 0x0C
	zTagFlags      = 0x0F
	zTagTraceBegin = 0x21
	zTagException  = 0x22

	// String definition types (the third element of C1 [id, text, type]).
	zStrPlain     = 0
	zStrClass     = 5
	zStrMethod    = 6
	zStrSignature = 8

	zFlagErrorMark = 0x08
)

func cborHead(b []byte, major byte, v uint64) []byte {
	m := major << 5
	switch {
	case v < 24:
		return append(b, m|byte(v))
	case v < 1<<8:
		return append(b, m|24, byte(v))
	case v < 1<<16:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(v))
	case v < 1<<32:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), v)
}

func cborString(b []byte, s string) []byte {
	return append(cborHead(b, cborText, uint64(len(s))), s...)
}

// zorkaAgent is one agent session's symbol state.
type zorkaAgent struct {
	syms       map[string]uint64
	methods    map[string]uint64
	nextSym    uint64
	nextMethod uint64
	agd        []byte // definitions not sent yet
}

func newZorkaAgent() *zorkaAgent {
	a := &zorkaAgent{nextSym: 100}
	a.reset()
	return a
}

// reset forgets what was sent, as the agent does after an error or a
// restart: the next agent data resends every symbol it needs.
func (a *zorkaAgent) reset() {
	a.syms, a.methods, a.nextMethod = map[string]uint64{}, map[string]uint64{}, 1
}

func (a *zorkaAgent) sym(text string, typ uint64) uint64 {
	key := fmt.Sprintf("%d:%s", typ, text)
	if id, ok := a.syms[key]; ok {
		return id
	}
	a.nextSym++
	id := a.nextSym
	a.syms[key] = id
	a.agd = cborHead(a.agd, cborTag, zTagStringDef)
	a.agd = cborHead(a.agd, cborArray, 3)
	a.agd = cborHead(a.agd, cborUint, id)
	a.agd = cborString(a.agd, text)
	a.agd = cborHead(a.agd, cborUint, typ)
	return id
}

func (a *zorkaAgent) method(class, name, sig string) uint64 {
	key := class + "." + name + sig
	if id, ok := a.methods[key]; ok {
		return id
	}
	c, n, s := a.sym(class, zStrClass), a.sym(name, zStrMethod), a.sym(sig, zStrSignature)
	id := a.nextMethod
	a.nextMethod++
	a.methods[key] = id
	a.agd = cborHead(a.agd, cborTag, zTagMethodDef)
	a.agd = cborHead(a.agd, cborArray, 4)
	for _, v := range []uint64{id, c, n, s} {
		a.agd = cborHead(a.agd, cborUint, v)
	}
	return id
}

// takeAgentData returns the definitions queued since the last call.
func (a *zorkaAgent) takeAgentData() []byte {
	b := a.agd
	a.agd = nil
	return b
}

// zMethod names a Java method: class, method name and JVM signature.
type zMethod struct{ class, name, sig string }

var (
	zMyMethod = zMethod{"com.myapp.MyClass", "myMethod", "()V"}
	zInvoke   = zMethod{"org.catalina.request.Request", "invoke", "(II)I"}
	zExecute  = zMethod{"com.mysql.Statement", "execute", "(I)V"}
)

// zBegin is a TraceBegin [clock ms, span id, parent id].
type zBegin struct {
	clockMS          uint64
	spanID, parentID uint64
}

// zFrame is an exception stack element.
type zFrame struct {
	class, method, file string
	line                uint64
}

// zExc is an exception thrown in a record.
type zExc struct {
	class, message string
	stack          []zFrame
}

// zRec is one trace record. Times are agent ticks (2^16 ns).
type zRec struct {
	m             zMethod
	tstart, tstop uint64
	calls         uint64
	begin         *zBegin
	flags         uint64
	attrs         []string // key, value, key, value...; keys are sent as string refs
	plainAttrs    []string // keys sent as plain text
	children      []*zRec
	exc           *zExc
}

// open writes the record's start: record start, prolog, TraceBegin, flags,
// attributes and children.
func (a *zorkaAgent) open(b []byte, r *zRec) []byte {
	mid := a.method(r.m.class, r.m.name, r.m.sig)
	b = cborHead(b, cborTag, zTagTraceStart)
	b = append(b, 0x9f)
	b = cborHead(b, cborTag, zTagPrologBE)
	b = cborHead(b, cborBytes, 8)
	b = binary.BigEndian.AppendUint64(b, mid<<40|r.tstart&(1<<40-1))
	if r.begin != nil {
		b = a.traceBegin(b, *r.begin)
	}
	if r.flags != 0 {
		b = cborHead(b, cborTag, zTagFlags)
		b = cborHead(b, cborUint, r.flags)
	}
	b = a.attrMap(b, r.attrs, r.plainAttrs)
	for _, c := range r.children {
		b = a.record(b, c)
	}
	return b
}

// close writes the record's exception, epilog and break.
func (a *zorkaAgent) close(b []byte, r *zRec) []byte {
	if r.exc != nil {
		b = cborHead(b, cborTag, zTagException)
		b = cborHead(b, cborArray, 5)
		b = cborHead(b, cborUint, 1)
		b = cborHead(b, cborTag, zTagStringRef)
		b = cborHead(b, cborUint, a.sym(r.exc.class, zStrClass))
		b = cborString(b, r.exc.message)
		b = cborHead(b, cborUint, 0)
		b = cborHead(b, cborArray, uint64(len(r.exc.stack)))
		for _, f := range r.exc.stack {
			b = cborHead(b, cborArray, 4)
			b = cborHead(b, cborUint, a.sym(f.class, zStrClass))
			b = cborHead(b, cborUint, a.sym(f.method, zStrMethod))
			b = cborHead(b, cborUint, a.sym(f.file, zStrPlain))
			b = cborHead(b, cborUint, f.line)
		}
	}
	calls := r.calls
	if calls == 0 {
		calls = 1
	}
	b = cborHead(b, cborTag, zTagEpilogBE)
	b = cborHead(b, cborBytes, 8)
	b = binary.BigEndian.AppendUint64(b, calls<<40|r.tstop&(1<<40-1))
	return append(b, 0xff)
}

// record writes a whole record.
func (a *zorkaAgent) record(b []byte, r *zRec) []byte { return a.close(a.open(b, r), r) }

func (a *zorkaAgent) traceBegin(b []byte, tb zBegin) []byte {
	b = cborHead(b, cborTag, zTagTraceBegin)
	b = cborHead(b, cborArray, 3)
	b = cborHead(b, cborUint, tb.clockMS)
	b = cborHead(b, cborUint, tb.spanID)
	return cborHead(b, cborUint, tb.parentID)
}

func (a *zorkaAgent) attrMap(b []byte, refKeyed, plain []string) []byte {
	n := len(refKeyed)/2 + len(plain)/2
	if n == 0 {
		return b
	}
	b = cborHead(b, cborTag, zTagAttrs)
	b = cborHead(b, cborMap, uint64(n))
	for i := 0; i+1 < len(refKeyed); i += 2 {
		b = cborHead(b, cborTag, zTagStringRef)
		b = cborHead(b, cborUint, a.sym(refKeyed[i], zStrPlain))
		b = cborString(b, refKeyed[i+1])
	}
	for i := 0; i+1 < len(plain); i += 2 {
		b = cborString(b, plain[i])
		b = cborString(b, plain[i+1])
	}
	return b
}

// bareBegin writes a TraceBegin outside any record followed by its
// attributes (zorka-tdb accepts it; it yields a span without records).
func (a *zorkaAgent) bareBegin(b []byte, tb zBegin, attrs ...string) []byte {
	return a.attrMap(a.traceBegin(b, tb), attrs, nil)
}
