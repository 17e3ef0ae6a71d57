package traceql

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAccepts(t *testing.T) {
	for q, want := range map[string]string{
		`{}`:    "",
		` { } `: "",
		`{ resource.service.name = "x" && span.http.status_code = 500 && duration > 5ms && status = error && name =~ "GET.*" }`: `((((resource.service.name = "x" && span.http.status_code = 500) && duration > 5000000) && status = error) && name =~ "GET.*")`,
		`{ .a = 1 || .b != "y" && kind = server }`:      `(.a = 1 || (.b != "y" && kind = server))`,
		`{ (.a = 1 || .b = 2) && span:duration >= 1s }`: `((.a = 1 || .b = 2) && duration >= 1000000000)`,
		`{ span."my key" !~ "a\"b" }`:                   `(span.my key !~ "a\"b")`,
		`{ span.ratio < 0.5 && span.ok = true }`:        `(span.ratio < 0.5 && span.ok = true)`,
		"{ name = `raw\\s` }":                           "name = \"raw\\\\s\"",
		`{ duration<=-1ms }`:                            `duration <= -1000000`,
	} {
		e, err := Parse(q)
		if err != nil {
			t.Errorf("Parse(%q): %v", q, err)
			continue
		}
		if got := show(e); strings.Trim(got, "()") != strings.Trim(want, "()") {
			t.Errorf("Parse(%q) = %s, want %s", q, got, want)
		}
	}
}

func show(e Expr) string {
	switch x := e.(type) {
	case nil:
		return ""
	case *Binary:
		return "(" + show(x.L) + " " + x.Op + " " + show(x.R) + ")"
	case *Cond:
		v := x.Value.Text()
		if x.Value.Kind == String {
			v = quote(v)
		}
		return x.Field.String() + " " + x.Op + " " + v
	}
	return "?"
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

func TestParseRejects(t *testing.T) {
	for q, want := range map[string]string{
		`.a = 1`:                                  "one spanset filter in braces",
		`{ .a = 1 } | count() > 2`:                "pipelines, aggregates",
		`{ .a = 1 } && { .b = 2 }`:                "spanset operators",
		`{ .a = 1 } >> { .b = 2 }`:                "spanset operators",
		`{ rootName = "x" }`:                      `"rootName" is not a supported field`,
		`{ span:parentID = "x" }`:                 "intrinsic span:parentID is not supported",
		`{ .a = nil }`:                            "nil is not supported",
		`{ .a > "x" }`:                            "needs a number or a duration",
		`{ .a =~ 5 }`:                             "needs a string",
		`{ status = "error" }`:                    "status is compared with",
		`{ duration > 5 }`:                        "duration is compared with a duration",
		`{ .a = "x"`:                              "expected }",
		`{ .a = "x }`:                             "unterminated",
		`{ .a + 1 = 2 }`:                          "expected a comparison",
		`{ .a = error }`:                          "intrinsic value",
		`{ ` + strings.Repeat("(", 40) + `.a = 1`: "nested deeper",
	} {
		_, err := Parse(q)
		var qe *Error
		if !errors.As(err, &qe) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an *Error containing %q", q, err, want)
		}
	}
}

func TestDNF(t *testing.T) {
	e, err := Parse(`{ (.a = 1 || .b = 2) && (.c = 3 || .d = 4) }`)
	if err != nil {
		t.Fatal(err)
	}
	terms, err := DNF(e, 16)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, term := range terms {
		var s []string
		for _, c := range term {
			s = append(s, c.Field.Name)
		}
		got = append(got, strings.Join(s, "&"))
	}
	if strings.Join(got, " | ") != "a&c | a&d | b&c | b&d" {
		t.Errorf("DNF = %v", got)
	}
	if _, err := DNF(e, 3); err == nil {
		t.Error("DNF over its bound: no error")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`{}`, `{ resource.service.name = "x" && span.http.status_code = 500 && duration > 5ms && status = error && name =~ "GET.*" }`,
		`{ .a = 1 || .b != "y" && kind = server }`, `{ (.a=1||.b=2)&&(.c=3||.d=4) }`, "{ name = `x` }", `{ .a = "\u00e9\x00" }`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		e, err := Parse(q)
		if err != nil {
			var qe *Error
			if !errors.As(err, &qe) || qe.Offset < 0 || qe.Offset > len(q) {
				t.Fatalf("Parse(%q): error %v (%T) with a bad offset", q, err, err)
			}
			return
		}
		if _, err := DNF(e, 16); err != nil {
			var qe *Error
			if !errors.As(err, &qe) {
				t.Fatalf("DNF: %v", err)
			}
		}
	})
}
