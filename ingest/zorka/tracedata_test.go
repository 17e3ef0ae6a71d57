package zorka

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/trace"
)

// uint32Hex is v as a CBOR unsigned integer in its 4-byte form.
func uint32Hex(v uint32) string {
	var b [5]byte
	b[0] = 0x1a
	binary.BigEndian.PutUint32(b[1:], v)
	return hex.EncodeToString(b[:])
}

// exception2xHex is a 2.x EXCEPTION of class symbol 5 without message or
// stack; 15 bytes.
func exception2xHex(id, cause uint32) string {
	return "c7 85 " + uint32Hex(id) + " 05 60 " + uint32Hex(cause) + " f6"
}

func decodeError(t *testing.T, err error, offset int, msg string) {
	t.Helper()
	var de *DecodeError
	if !errors.As(err, &de) || de.Offset != offset || !strings.Contains(de.Msg, msg) {
		t.Fatalf("got %v, want a DecodeError at offset %d containing %q", err, offset, msg)
	}
}

// An exception's cause chain is bounded by maxCauseDepth, itself included.
func TestExceptionCauseChainLimit(t *testing.T) {
	const head = "c39f 00 01 c5 82 01 00" // 8 bytes
	var b strings.Builder
	b.WriteString(head)
	for id := 1; id <= maxCauseDepth; id++ {
		b.WriteString(exception2xHex(uint32(id), uint32(id-1)))
	}
	s := newTestSessions(t, "s")
	spans, err := s.SubmitTraceData("s", false, testTraceID, hx(t, b.String()+"c4 82 01 01 ff"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for e := spans[0].Root.Exception; e != nil; e = e.Cause {
		n++
	}
	if n != maxCauseDepth {
		t.Fatalf("cause chain of %d, want %d", n, maxCauseDepth)
	}
	b.WriteString(exception2xHex(uint32(maxCauseDepth+1), uint32(maxCauseDepth)))
	_, err = s.SubmitTraceData("s", false, testTraceID, hx(t, b.String()))
	decodeError(t, err, 8+15*maxCauseDepth, fmt.Sprintf("exception cause chain longer than %d", maxCauseDepth))
}

// A trace remembers at most maxExceptions exceptions; sending one again
// under a known id stays allowed at the limit.
func TestExceptionsPerTraceLimit(t *testing.T) {
	const head = "c39f 00 01 c5 82 01 00"
	var b strings.Builder
	b.WriteString(head)
	for id := 1; id <= maxExceptions; id++ {
		b.WriteString(exception2xHex(uint32(id), 0))
	}
	b.WriteString(exception2xHex(1, 0))
	s := newTestSessions(t, "s")
	if _, err := s.SubmitTraceData("s", false, testTraceID, hx(t, b.String()+"c4 82 01 01 ff")); err != nil {
		t.Fatal(err)
	}
	b.WriteString(exception2xHex(maxExceptions+1, 0))
	_, err := s.SubmitTraceData("s", false, testTraceID, hx(t, b.String()))
	decodeError(t, err, 8+15*(maxExceptions+1), fmt.Sprintf("more than %d exceptions in one trace", maxExceptions))
}

// ERROR_MARK before the record's TraceBegin fails the span it begins;
// trace flags outside any record and span are an error.
func TestErrorMarkPlacement(t *testing.T) {
	s := newTestSessions(t, "s")
	spans, err := s.SubmitTraceData("s", false, testTraceID, hx(t, recStart+prolog1+"cf 08"+begin1+epilog1))
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 1 || !spans[0].Error || spans[0].Errors != 0 {
		t.Fatalf("spans %+v", spans)
	}
	_, err = s.SubmitTraceData("s", false, testTraceID, hx(t, "cf 08"))
	decodeError(t, err, 0, "trace flags outside a record")
}

// A TRACE_INFO clock in the record that began a span replaces the
// TraceBegin clock, within range.
func TestTraceInfoClock(t *testing.T) {
	s := newTestSessions(t, "s")
	spans, err := s.SubmitTraceData("s", false, testTraceID, hx(t, recStart+prolog1+begin1+"ce a1 05 1b 0000016a79b81200"+epilog1))
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 1 || spans[0].StartNS != 0x16a79b81200*1e6 {
		t.Fatalf("spans %+v", spans)
	}
	_, err = s.SubmitTraceData("s", false, testTraceID, hx(t, recStart+prolog1+begin1+"ce a1 05 1b 7fffffffffffffff"+epilog1))
	decodeError(t, err, 26, "trace info clock 9223372036854775807 ms is out of range")
}

// Symbol 0 in a stack element stands for an unknown class, method or file.
func TestStackFrameSymbolZero(t *testing.T) {
	s := newTestSessions(t, "s")
	spans, err := s.SubmitTraceData("s", false, testTraceID, hx(t, recStart+prolog1+begin1+"d822 85 01 c605 60 00 81 84 00 00 00 05"+epilog1))
	if err != nil {
		t.Fatal(err)
	}
	exc := spans[0].Root.Exception
	if exc == nil || len(exc.Stack) != 1 || exc.Stack[0] != (trace.StackFrame{Line: 5}) {
		t.Fatalf("exception %+v", exc)
	}
}
