package otlp

import (
	"strings"
	"testing"

	"github.com/ztsd/ztsd/trace"
)

func TestParseStackTrace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		text   string
		ok     bool
		frames []trace.StackFrame
		cause  *trace.Exception
	}{
		{
			name: "go with created by and generics",
			text: "goroutine 42 [running]:\n" +
				"main.process[...](0xc000012345, {0x1, 0x2})\n\t/src/app/main.go:31 +0x1d\n" +
				"github.com/acme/svc/pkg.(*Handler).ServeHTTP(0xc0001)\n\t/src/pkg/handler.go:120 +0x8f\n" +
				"main.main.func1()\n\t/src/app/main.go:12 +0x25\n" +
				"created by main.main in goroutine 1\n\t/src/app/main.go:10 +0x5e\n",
			ok: true,
			frames: []trace.StackFrame{
				{Class: "main", Method: "process[...]", File: "/src/app/main.go", Line: 31},
				{Class: "github.com/acme/svc/pkg.(*Handler)", Method: "ServeHTTP", File: "/src/pkg/handler.go", Line: 120},
				{Class: "main.main", Method: "func1", File: "/src/app/main.go", Line: 12},
				{Class: "main", Method: "main", File: "/src/app/main.go", Line: 10},
			},
		},
		{
			name: "go panic preamble and a cut at the end",
			text: "panic: boom [recovered]\n\ngoroutine 1 [running]:\n" +
				"gopkg.in/yaml%2ev3.unmarshal(...)\n\t/mod/yaml.v3/yaml.go:161 +0x3c\n" +
				"main.run()\n\t/src/ma",
			ok:     true,
			frames: []trace.StackFrame{{Class: "gopkg.in/yaml%2ev3", Method: "unmarshal", File: "/mod/yaml.v3/yaml.go", Line: 161}},
		},
		{
			name: "go dump of several goroutines is kept as text",
			text: "goroutine 1 [running]:\nmain.a()\n\t/a.go:1 +0x1\n\ngoroutine 2 [chan receive]:\nmain.b()\n\t/b.go:2 +0x2\n",
		},
		{
			name: "java with module prefixes, jar notes and crlf",
			text: "java.lang.NullPointerException\r\n\tat app//com.acme.Foo.lambda$run$0(Foo.java:7) ~[app.jar:?]\r\n\tat java.base/java.util.ArrayList.forEach(Unknown Source)\r\n",
			ok:   true,
			frames: []trace.StackFrame{
				{Class: "com.acme.Foo", Method: "lambda$run$0", File: "Foo.java", Line: 7},
				{Class: "java.util.ArrayList", Method: "forEach"},
			},
		},
		{
			name: "java multi-line message and common frames omitted",
			text: "com.acme.BadInput: line one\nline two\n\tat com.acme.Parser.parse(Parser.java:3)\nCaused by: java.lang.NumberFormatException: For input string: \"x\"\n\tat java.lang.Integer.parseInt(Integer.java:652)\n\t... 1 common frames omitted\n",
			ok:   true,
			frames: []trace.StackFrame{
				{Class: "com.acme.Parser", Method: "parse", File: "Parser.java", Line: 3},
			},
			cause: &trace.Exception{Class: "java.lang.NumberFormatException", Message: "For input string: \"x\"",
				Stack: []trace.StackFrame{{Class: "java.lang.Integer", Method: "parseInt", File: "Integer.java", Line: 652}}},
		},
		{
			name: "java frame without parentheses is not a stack",
			text: "java.lang.Error: x\n\tat somewhere\n",
		},
		{
			name: "python single traceback with caret lines",
			text: "Traceback (most recent call last):\n  File \"/app/a.py\", line 3, in <module>\n    main()\n    ^^^^^^\n  File \"/app/a.py\", line 2, in main\n    1/0\nZeroDivisionError: division by zero\n",
			ok:   true,
			frames: []trace.StackFrame{
				{Method: "main", File: "/app/a.py", Line: 2},
				{Method: "<module>", File: "/app/a.py", Line: 3},
			},
		},
		{
			name: "python frame with bad line number",
			text: "Traceback (most recent call last):\n  File \"/app/a.py\", line x, in f\nValueError\n",
		},
		{name: "prose", text: "something went wrong"},
		{name: "empty", text: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ok := parseStackTrace(tc.text, 10)
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v (%+v)", ok, tc.ok, st)
			}
			if !ok {
				return
			}
			got := &trace.Exception{Stack: st.Frames, Cause: st.Cause}
			want := &trace.Exception{Stack: tc.frames, Cause: tc.cause}
			if !got.Equal(want) {
				t.Errorf("got  %+v cause %+v\nwant %+v cause %+v", st.Frames, st.Cause, tc.frames, tc.cause)
			}
		})
	}
}

// TestParseStackTraceCauseBound keeps the text of a cause chain longer
// than the bound.
func TestParseStackTraceCauseBound(t *testing.T) {
	var b strings.Builder
	b.WriteString("E: top\n\tat a.B.c(B.java:1)\n")
	for range 5 {
		b.WriteString("Caused by: E: inner\n\tat a.B.c(B.java:1)\n")
	}
	if _, ok := parseStackTrace(b.String(), 5); !ok {
		t.Error("5 causes within a bound of 5 rejected")
	}
	if _, ok := parseStackTrace(b.String(), 4); ok {
		t.Error("5 causes beyond a bound of 4 accepted")
	}
	py := strings.Repeat("Traceback (most recent call last):\n  File \"a.py\", line 1, in f\nE: x\n\nDuring handling of the above exception, another exception occurred:\n\n", 6)
	if _, ok := parseStackTrace(py, 4); ok {
		t.Error("python chain of 6 beyond a bound of 4 accepted")
	}
}
