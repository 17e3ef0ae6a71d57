package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type kv struct{ k, v string }

func propsPairs(p *Props) []kv {
	var out []kv
	for _, k := range p.Keys() {
		v, _ := p.Get(k)
		out = append(out, kv{k, v})
	}
	return out
}

func pairsEqual(a, b []kv) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParsePropsSyntax(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []kv
	}{
		{"equals", "a=b\n", []kv{{"a", "b"}}},
		{"colon", "a:b", []kv{{"a", "b"}}},
		{"blank separator", "a b c", []kv{{"a", "b c"}}},
		{"blanks around separator", "  a \t =\f b  \n", []kv{{"a", "b  "}}},
		{"only first separator counts", "a = = b", []kv{{"a", "= b"}}},
		{"blank then colon", "a   :x", []kv{{"a", "x"}}},
		{"key only", "lonely\n", []kv{{"lonely", ""}}},
		{"empty key", "=v\n", []kv{{"", "v"}}},
		{"comments and blank lines", "# c1\n! c2\n   # c3\n\n \t \na=1\n", []kv{{"a", "1"}}},
		{"comment not continued", "# c \\\na=1", []kv{{"a", "1"}}},
		{"hash inside value", "a=b#c!d", []kv{{"a", "b#c!d"}}},
		{"CRLF and CR", "a=1\r\nb=2\rc=3", []kv{{"a", "1"}, {"b", "2"}, {"c", "3"}}},
		{"continuation", "a=one \\\n    two\\\n\tthree", []kv{{"a", "one twothree"}}},
		{"continuation into key", "ke\\\n  y=v", []kv{{"key", "v"}}},
		{"even backslashes do not continue", "a=x\\\\\nb=y", []kv{{"a", `x\`}, {"b", "y"}}},
		{"continuation onto blank line ends entry", "a=x\\\n\nb=y", []kv{{"a", "x"}, {"b", "y"}}},
		{"continuation line starting with hash", "a=x\\\n  #y", []kv{{"a", "x#y"}}},
		{"continuation at EOF", "a=x\\", []kv{{"a", "x"}}},
		{"escapes", `a=\t\n\r\f\\\=\:\#\!\ \b\q`, []kv{{"a", "\t\n\r\f\\=:#! bq"}}},
		{"escaped separators in key", `k\=1\:2\ 3=v`, []kv{{"k=1:2 3", "v"}}},
		{"unicode escape", `a=\u0041\u00e9\u4E2D`, []kv{{"a", "Aé中"}}},
		{"surrogate pair", `a=\uD83D\uDE00`, []kv{{"a", "😀"}}},
		{"raw UTF-8", "ключ=значение", []kv{{"ключ", "значение"}}},
		{"escaped multibyte", `a=\é`, []kv{{"a", "é"}}},
		{"duplicate keeps first position, last value", "a=1\nb=2\na=3", []kv{{"a", "3"}, {"b", "2"}}},
		{"empty input", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseProps(strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("ParseProps(%q): %v", tt.in, err)
			}
			if got := propsPairs(p); !pairsEqual(got, tt.want) {
				t.Fatalf("ParseProps(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParsePropsErrors(t *testing.T) {
	tests := []struct {
		name              string
		in                string
		line, col, offset int
		msgContains       string
	}{
		{"short unicode escape", "a=1\nb=\\u12", 2, 3, 6, "want 4 hex digits"},
		{"bad hex digit", "x=ok\nkey=ab\\u00G1", 2, 11, 15, `'G' is not a hex digit`},
		{"unicode escape in key", "\\uzzzz=1", 1, 3, 2, "not a hex digit"},
		{"lone high surrogate", "a=\\uD83Dx", 1, 3, 2, "not followed by a \\u low surrogate"},
		{"lone low surrogate", "a=\\uDE00", 1, 3, 2, "unpaired low surrogate"},
		{"high then non-low", "a=\\uD83D\\u0041", 1, 9, 8, "not a low surrogate"},
		{"invalid UTF-8", "a=1\n  b=\xff\xfe", 2, 5, 8, "invalid UTF-8 byte 0xff"},
		{"error on continuation line", "a=1\\\n   \\u00", 2, 4, 8, "want 4 hex digits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseProps(strings.NewReader(tt.in))
			var se *PropsSyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("ParseProps(%q) error = %v, want *PropsSyntaxError", tt.in, err)
			}
			if se.Line != tt.line || se.Column != tt.col || se.Offset != tt.offset {
				t.Errorf("position = line %d col %d offset %d, want line %d col %d offset %d (%v)",
					se.Line, se.Column, se.Offset, tt.line, tt.col, tt.offset, err)
			}
			if !strings.Contains(err.Error(), tt.msgContains) {
				t.Errorf("error %q does not contain %q", err, tt.msgContains)
			}
		})
	}
}

func TestParsePropsTooLarge(t *testing.T) {
	big := bytes.Repeat([]byte("k=v\n"), MaxPropsSize/4+1)
	if _, err := ParseProps(bytes.NewReader(big)); !errors.Is(err, ErrPropsTooLarge) {
		t.Fatalf("error = %v, want ErrPropsTooLarge", err)
	}
	if _, err := ParseProps(bytes.NewReader(big[:MaxPropsSize])); err != nil {
		t.Fatalf("input of exactly MaxPropsSize: %v", err)
	}
}

func TestPropsMarshalEscapes(t *testing.T) {
	p := NewProps()
	p.Set("plain.key", "plain value")
	p.Set(" key with spaces ", " leading and inner spaces ")
	p.Set("sep=:#!\\", "sep=:#!\\")
	p.Set("ctl\t\n\r\f", "ctl\t\n\r\f")
	p.Set("ünï", "中😀\x01\x7f")
	p.Set("", "")
	got, err := p.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	want := `plain.key=plain value
\ key\ with\ spaces\ =\ leading and inner spaces 
sep\=\:\#\!\\=sep\=\:\#\!\\
ctl\t\n\r\f=ctl\t\n\r\f
\u00FCn\u00EF=\u4E2D\uD83D\uDE00\u0001\u007F
=
`
	if string(got) != want {
		t.Fatalf("MarshalText:\n%s\nwant:\n%s", got, want)
	}
	back, err := ParseProps(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	if !pairsEqual(propsPairs(back), propsPairs(p)) {
		t.Fatalf("round trip = %q, want %q", propsPairs(back), propsPairs(p))
	}
}

func TestPropsMarshalRejectsInvalidUTF8(t *testing.T) {
	a := NewProps()
	a.Set("k\xff", "v")
	if _, err := a.MarshalText(); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Errorf("invalid key: err = %v", err)
	}
	b := NewProps()
	b.Set("k", "v\xff")
	if _, err := b.MarshalText(); err == nil || !strings.Contains(err.Error(), `property "k"`) {
		t.Errorf("invalid value: err = %v", err)
	}
}

func TestPropsSetDeleteOrderAndLines(t *testing.T) {
	p, err := ParseProps(strings.NewReader("# header\na=1\n\nb=2\nc=3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := []int{p.Line("a"), p.Line("b"), p.Line("c"), p.Line("zz")}; fmt.Sprint(got) != "[2 4 5 0]" {
		t.Errorf("lines = %v", got)
	}
	p.Set("b", "two")
	p.Set("d", "4")
	if !p.Delete("a") || p.Delete("a") {
		t.Fatal("Delete(a) twice: want true then false")
	}
	want := []kv{{"b", "two"}, {"c", "3"}, {"d", "4"}}
	if got := propsPairs(p); !pairsEqual(got, want) {
		t.Fatalf("pairs = %q, want %q", got, want)
	}
	if p.Line("b") != 0 || p.Line("c") != 5 {
		t.Errorf("after Set, Line(b) = %d (want 0), Line(c) = %d (want 5)", p.Line("b"), p.Line("c"))
	}
	if v, ok := p.Get("c"); !ok || v != "3" || p.Len() != 3 {
		t.Errorf("Get(c) = %q %v, Len = %d", v, ok, p.Len())
	}
	var zero Props
	zero.Set("x", "y")
	if v, _ := zero.Get("x"); v != "y" {
		t.Error("zero Props not usable")
	}
}

func TestReadWritePropsFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.props")
	if _, err := ReadPropsFile(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err = %v, want ErrNotExist", err)
	}
	p := NewProps()
	p.Set("a", "1")
	p.Set("b", "x y")
	if err := WritePropsFileAtomic(path, p); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != PropsFileMode {
		t.Errorf("mode = %v, want %v", fi.Mode().Perm(), PropsFileMode)
	}
	raw, _ := os.ReadFile(path)
	if string(raw) != "a=1\nb=x y\n" {
		t.Errorf("file = %q", raw)
	}
	back, err := ReadPropsFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !pairsEqual(propsPairs(back), propsPairs(p)) {
		t.Errorf("read back %q", propsPairs(back))
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after a write, want 1", len(entries))
	}
	// A syntax error names the file and the line.
	os.WriteFile(path, []byte("ok=1\nbad=\\u12\n"), 0o644)
	if _, err := ReadPropsFile(path); err == nil || !strings.Contains(err.Error(), path+": line 2, column 5") {
		t.Errorf("syntax error = %v", err)
	}
}

// TestWriteFileAtomicFailures makes each step of the atomic write fail and
// checks that the target holds either the old or the new content, complete,
// and that no temporary file is left behind.
func TestWriteFileAtomicFailures(t *testing.T) {
	oldText, newText := []byte("state=open\n"), []byte("state=sealed\n")
	for _, step := range []atomicStep{stepWrite, stepSyncFile, stepClose, stepRename, stepSyncDir} {
		t.Run(step.String(), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "config.props")
			if err := writeFileAtomic(path, oldText, 0o644, nil); err != nil {
				t.Fatal(err)
			}
			injected := errors.New("injected failure")
			err := writeFileAtomic(path, newText, 0o644, func(s atomicStep) error {
				if s == step {
					return injected
				}
				return nil
			})
			if !errors.Is(err, injected) {
				t.Fatalf("err = %v, want the injected failure", err)
			}
			got, _ := os.ReadFile(path)
			want := oldText
			if step > stepRename {
				want = newText // renamed, only the directory fsync failed
			}
			if !bytes.Equal(got, want) {
				t.Errorf("after failing at %v the file holds %q, want %q", step, got, want)
			}
			if names, _ := filepath.Glob(filepath.Join(dir, ".config.props.tmp-*")); len(names) != 0 {
				t.Errorf("temporary files left: %v", names)
			}
		})
	}
}

// TestWritePropsFileAtomicConcurrentReaders checks that readers racing with
// repeated replacements only ever see one complete version.
func TestWritePropsFileAtomicConcurrentReaders(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.props")
	versions := make([]*Props, 2)
	texts := make(map[string]bool)
	for i := range versions {
		p := NewProps()
		for k := 0; k < 200; k++ {
			p.Set(fmt.Sprintf("key.%03d", k), strings.Repeat(string(rune('a'+i)), 40))
		}
		versions[i] = p
		text, _ := p.MarshalText()
		texts[string(text)] = true
	}
	if err := WritePropsFileAtomic(path, versions[0]); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var bad []string
	var mu sync.Mutex
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				raw, err := os.ReadFile(path)
				if err != nil || !texts[string(raw)] {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("err=%v len=%d", err, len(raw)))
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < 100; i++ {
		if err := WritePropsFileAtomic(path, versions[i%2]); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d reads saw a partial or missing file, first: %s", len(bad), bad[0])
	}
}

// TestWritePropsFileAtomicKill9 kills a process that rewrites config.props in
// a loop and checks the file holds one complete version; leftovers of the
// interrupted write are removed by RemoveStaleTemps.
func TestWritePropsFileAtomicKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.props")
	for round := 0; round < 3; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAtomicWriterHelper$")
		cmd.Env = append(os.Environ(), "ZTSD_CONFIG_ATOMIC_HELPER="+path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the helper has written at least once, then a little more.
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := os.Stat(path); err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(20+round*15) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		p, err := ReadPropsFile(path)
		if err != nil {
			t.Fatalf("round %d: after kill -9: %v", round, err)
		}
		v, _ := p.Get("value")
		if p.Len() != 2 || (v != strings.Repeat("x", 1000) && v != strings.Repeat("y", 1000)) {
			t.Fatalf("round %d: after kill -9 the file holds %d keys, value of %d bytes", round, p.Len(), len(v))
		}
		if _, err := RemoveStaleTemps(path); err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Fatalf("round %d: %d entries after RemoveStaleTemps, want 1", round, len(entries))
		}
	}
}

// TestAtomicWriterHelper is the process TestWritePropsFileAtomicKill9 kills.
func TestAtomicWriterHelper(t *testing.T) {
	path := os.Getenv("ZTSD_CONFIG_ATOMIC_HELPER")
	if path == "" {
		t.Skip("helper process for TestWritePropsFileAtomicKill9")
	}
	for i := 0; ; i++ {
		p := NewProps()
		p.Set("round", fmt.Sprint(i))
		p.Set("value", strings.Repeat(string(rune('x'+i%2)), 1000))
		if err := WritePropsFileAtomic(path, p); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRemoveStaleTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.props")
	for _, name := range []string{"config.props", ".config.props.tmp-123", ".config.props.tmp-9", ".other.props.tmp-1", "000001"} {
		os.WriteFile(filepath.Join(dir, name), nil, 0o644)
	}
	removed, err := RemoveStaleTemps(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 {
		t.Errorf("removed %v, want the two .config.props.tmp-* files", removed)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if fmt.Sprint(names) != "[.other.props.tmp-1 000001 config.props]" {
		t.Errorf("left %v", names)
	}
}

// FuzzParseProps checks that ParseProps never panics and that whatever it
// accepts survives MarshalText → ParseProps unchanged.
func FuzzParseProps(f *testing.F) {
	for _, seed := range []string{
		"", "a=b", "a:b\nc d\r\ne=f\rg", "# c\n! c\n  a = b  ", "a=1\\\n  2\\\n", "k\\=1=v\\\\",
		`a=\u0041\uD83D\uDE00\t\n`, "a=\\uD83D", "a=\\u12", "\xff=1", "ключ=значение", "=", "\\", "a\\\n\n=",
		"format.version=1\ncompression=lz4\nchecksums=true\ncreated=2025-11-21T12:05:00Z\nstate=open\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProps(bytes.NewReader(data))
		if err != nil {
			var se *PropsSyntaxError
			if !errors.As(err, &se) && !errors.Is(err, ErrPropsTooLarge) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			if se != nil && (se.Offset < 0 || se.Offset > len(data) || se.Line < 1 || se.Column < 1) {
				t.Fatalf("error position out of range: %+v (input %d bytes)", se, len(data))
			}
			return
		}
		text, err := p.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText of parsed props: %v", err)
		}
		back, err := ParseProps(bytes.NewReader(text))
		if err != nil {
			t.Fatalf("re-parsing %q: %v", text, err)
		}
		if !pairsEqual(propsPairs(back), propsPairs(p)) {
			t.Fatalf("round trip changed %q into %q", propsPairs(p), propsPairs(back))
		}
	})
}

func BenchmarkParseProps(b *testing.B) {
	text, _ := sampleStoreProps().ToProps().MarshalText()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseProps(bytes.NewReader(text)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPropsMarshalText(b *testing.B) {
	p := sampleStoreProps().ToProps()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.MarshalText(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWritePropsFileAtomic(b *testing.B) {
	path := filepath.Join(b.TempDir(), "config.props")
	p := sampleStoreProps().ToProps()
	for b.Loop() {
		if err := WritePropsFileAtomic(path, p); err != nil {
			b.Fatal(err)
		}
	}
}
