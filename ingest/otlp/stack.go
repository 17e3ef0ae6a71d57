package otlp

import (
	"slices"
	"strconv"
	"strings"

	"github.com/ztsd/ztsd/trace"
)

// parsedStack is what parseStackTrace recovers from exception.stacktrace:
// the frames of the exception itself (innermost first) and its causes.
type parsedStack struct {
	Frames []trace.StackFrame
	Cause  *trace.Exception
}

// parseStackTrace reads the text of an exception.stacktrace attribute in
// one of the forms language runtimes print: Java (Throwable.printStackTrace),
// Go (runtime.Stack of one goroutine, as the OpenTelemetry Go SDK records
// it) or Python (traceback.format_exception). It reports ok only when it
// recognised the form and found at least one frame; the caller then keeps
// the frames instead of the text. maxCauses bounds the cause chain.
func parseStackTrace(text string, maxCauses int) (parsedStack, bool) {
	switch {
	case strings.Contains(text, "Traceback (most recent call last):"):
		return parsePythonStack(text, maxCauses)
	case strings.HasPrefix(text, "goroutine ") || strings.Contains(text, "\ngoroutine "):
		return parseGoStack(text)
	}
	return parseJavaStack(text, maxCauses)
}

// lines splits text into lines without their line terminators.
func lines(text string) []string {
	ls := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for len(ls) > 0 && strings.TrimSpace(ls[len(ls)-1]) == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

func indentOf(line string) int {
	return len(line) - len(strings.TrimLeft(line, " \t"))
}

// parseJavaStack reads
//
//	java.lang.IllegalStateException: outer
//		at com.example.Foo.bar(Foo.java:12)
//		at java.base/java.lang.Thread.run(Thread.java:833)
//		Suppressed: … (skipped, with its frames)
//	Caused by: java.io.IOException: inner
//		at com.example.Foo.io(Foo.java:30)
//		... 2 more
func parseJavaStack(text string, maxCauses int) (parsedStack, bool) {
	var (
		top        parsedStack
		frames     = &top.Frames
		cur        *trace.Exception
		causes     int
		suppressed = -1 // indentation of the Suppressed: block being skipped
		found      bool
	)
	for i, line := range lines(text) {
		t := strings.TrimSpace(line)
		ind := indentOf(line)
		if suppressed >= 0 {
			if ind > suppressed || t == "" {
				continue
			}
			suppressed = -1
		}
		switch {
		case strings.HasPrefix(t, "at "):
			f, ok := parseJavaFrame(t[len("at "):])
			if !ok {
				return parsedStack{}, false
			}
			*frames = append(*frames, f)
			found = true
		case strings.HasPrefix(t, "Caused by: "):
			if ind > 0 {
				return parsedStack{}, false // a cause inside something we do not model
			}
			causes++
			if causes > maxCauses {
				return parsedStack{}, false
			}
			class, msg := splitClassMessage(t[len("Caused by: "):])
			e := &trace.Exception{Class: class, Message: msg}
			if cur == nil {
				top.Cause = e
			} else {
				cur.Cause = e
			}
			cur, frames = e, &e.Stack
		case strings.HasPrefix(t, "Suppressed: "):
			suppressed = ind
		case strings.HasPrefix(t, "..."), t == "":
			// "... 5 more" / "... 5 common frames omitted": frames shared
			// with the enclosing trace.
		case i == 0:
			// The header line repeats exception.type and exception.message.
		case ind == 0 && !found:
			// A multi-line message continues the header.
		default:
			return parsedStack{}, false
		}
	}
	if !found {
		return parsedStack{}, false
	}
	return top, true
}

// parseJavaFrame reads "pkg.Class.method(File.java:12)", optionally with a
// module prefix ("java.base/") and a trailing jar note ("~[app.jar:?]").
func parseJavaFrame(s string) (trace.StackFrame, bool) {
	open := strings.IndexByte(s, '(')
	if open <= 0 {
		return trace.StackFrame{}, false
	}
	closing := strings.IndexByte(s[open:], ')')
	if closing < 0 {
		return trace.StackFrame{}, false
	}
	qual, loc := s[:open], s[open+1:open+closing]
	if i := strings.LastIndexByte(qual, '/'); i >= 0 {
		qual = qual[i+1:]
	}
	var f trace.StackFrame
	if i := strings.LastIndexByte(qual, '.'); i >= 0 {
		f.Class, f.Method = qual[:i], qual[i+1:]
	} else {
		f.Method = qual
	}
	switch loc {
	case "Unknown Source", "Native Method", "":
	default:
		f.File, f.Line = splitFileLine(loc)
	}
	return f, true
}

// splitFileLine splits "File.java:12" (or "/a/b.go:12") into file and line;
// without a numeric line it returns the whole text as the file.
func splitFileLine(s string) (string, int64) {
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if n, err := strconv.ParseInt(s[i+1:], 10, 64); err == nil {
			return s[:i], n
		}
	}
	return s, 0
}

// splitClassMessage splits "java.io.IOException: message" (or Python's
// "ValueError: message").
func splitClassMessage(s string) (string, string) {
	if i := strings.Index(s, ": "); i >= 0 {
		return s[:i], s[i+2:]
	}
	return strings.TrimSuffix(s, ":"), ""
}

// parseGoStack reads the output of runtime.Stack for one goroutine:
//
//	goroutine 7 [running]:
//	main.(*T).work(0xc000010000)
//		/src/main.go:12 +0x1d
//	created by main.main in goroutine 1
//		/src/main.go:30 +0x5e
//
// A dump of several goroutines is not parsed (the text is kept); a text
// cut short keeps the frames before the cut.
func parseGoStack(text string) (parsedStack, bool) {
	var (
		st         parsedStack
		goroutines int
		fn         string // function line awaiting its file line
		haveFn     bool
	)
	ls := lines(text)
	for i, line := range ls {
		t := strings.TrimSpace(line)
		switch {
		case t == "", t == "...additional frames elided...":
		case strings.HasPrefix(line, "goroutine "):
			goroutines++
			if goroutines > 1 || haveFn {
				return parsedStack{}, false
			}
		case goroutines == 0:
			// Text before the goroutine header ("panic: …").
		case indentOf(line) > 0:
			if !haveFn {
				return parsedStack{}, false
			}
			loc := t
			if i := strings.IndexByte(loc, ' '); i >= 0 {
				loc = loc[:i] // drop " +0x1d"
			}
			f := goFrame(fn)
			f.File, f.Line = splitFileLine(loc)
			haveFn = false
			if f.Line == 0 && i == len(ls)-1 {
				break // the text was cut inside this file line
			}
			st.Frames = append(st.Frames, f)
		default:
			if haveFn {
				return parsedStack{}, false
			}
			fn, haveFn = t, true
		}
	}
	// A function line left without its file line is where the producer's
	// buffer cut the text (the OpenTelemetry Go SDK keeps 2048 bytes):
	// the frames before it stand.
	if len(st.Frames) == 0 {
		return parsedStack{}, false
	}
	return st, true
}

// goFrame splits a Go function line into class (package path plus
// receiver or enclosing function) and method.
func goFrame(fn string) trace.StackFrame {
	if rest, ok := strings.CutPrefix(fn, "created by "); ok {
		fn = rest
		if i := strings.Index(fn, " in goroutine "); i >= 0 {
			fn = fn[:i]
		}
	} else if strings.HasSuffix(fn, ")") {
		// Drop the argument list: the last top-level "(…)".
		depth := 0
		for i := len(fn) - 1; i >= 0; i-- {
			switch fn[i] {
			case ')':
				depth++
			case '(':
				depth--
			}
			if depth == 0 {
				fn = fn[:i]
				break
			}
		}
	}
	// Split at the last '.' outside brackets ("pkg.F[...]", "(*T)") and
	// after the last '/' of the package path.
	slash := strings.LastIndexByte(fn, '/')
	depth := 0
	for i := len(fn) - 1; i > slash; i-- {
		switch fn[i] {
		case ']', ')':
			depth++
		case '[', '(':
			depth--
		case '.':
			if depth == 0 {
				return trace.StackFrame{Class: fn[:i], Method: fn[i+1:]}
			}
		}
	}
	return trace.StackFrame{Method: fn}
}

// parsePythonStack reads one or more tracebacks, chained by "During
// handling of the above exception…" or "The above exception was the direct
// cause…"; the last one is the exception itself, earlier ones its causes.
// Python prints the innermost frame last; frames are reversed to store it
// first.
func parsePythonStack(text string, maxCauses int) (parsedStack, bool) {
	type block struct {
		class, msg string
		frames     []trace.StackFrame
	}
	var (
		blocks []block
		cur    *block
		inTB   bool // inside a traceback's frame lines
	)
	for _, line := range lines(text) {
		t := strings.TrimSpace(line)
		switch {
		case t == "":
		case t == "Traceback (most recent call last):":
			if len(blocks) > maxCauses {
				return parsedStack{}, false
			}
			blocks = append(blocks, block{})
			cur, inTB = &blocks[len(blocks)-1], true
		case cur != nil && inTB && strings.HasPrefix(t, "File \""):
			f, ok := parsePythonFrame(t)
			if !ok {
				return parsedStack{}, false
			}
			cur.frames = append(cur.frames, f)
		case cur != nil && inTB && indentOf(line) > 0:
			// Source line or "^^^^" markers under a frame.
		case cur != nil && inTB:
			cur.class, cur.msg = splitClassMessage(t)
			inTB = false
		case strings.HasPrefix(t, "During handling of the above exception"),
			strings.HasPrefix(t, "The above exception was the direct cause"):
		case cur != nil && !inTB && indentOf(line) == 0:
			// A multi-line exception message continues.
			cur.msg += "\n" + line
		default:
			return parsedStack{}, false
		}
	}
	if len(blocks) == 0 {
		return parsedStack{}, false
	}
	var st parsedStack
	var prev *trace.Exception
	frames := 0
	for i, b := range blocks {
		slices.Reverse(b.frames)
		frames += len(b.frames)
		if i == len(blocks)-1 {
			st.Frames, st.Cause = b.frames, prev
			break
		}
		prev = &trace.Exception{Class: b.class, Message: b.msg, Stack: b.frames, Cause: prev}
	}
	if frames == 0 {
		return parsedStack{}, false
	}
	return st, true
}

// parsePythonFrame reads `File "/app/x.py", line 12, in handler`.
func parsePythonFrame(t string) (trace.StackFrame, bool) {
	rest := t[len("File \""):]
	q := strings.IndexByte(rest, '"')
	if q < 0 {
		return trace.StackFrame{}, false
	}
	f := trace.StackFrame{File: rest[:q]}
	for _, part := range strings.Split(rest[q+1:], ",") {
		part = strings.TrimSpace(part)
		switch {
		case strings.HasPrefix(part, "line "):
			n, err := strconv.ParseInt(part[len("line "):], 10, 64)
			if err != nil {
				return trace.StackFrame{}, false
			}
			f.Line = n
		case strings.HasPrefix(part, "in "):
			f.Method = part[len("in "):]
		}
	}
	return f, true
}
