package zorka

import (
	"strings"
)

// symbolTable is one session's translation of agent ids: string symbols and
// method ids (stored already rendered the way ZICO shows them).
type symbolTable struct {
	strs    map[uint64]string
	methods map[uint64]string
	bytes   int64 // accounted size of strs and methods
}

// symbolOverhead is what one table entry is accounted as beyond its text.
const symbolOverhead = 48

func newSymbolTable() *symbolTable {
	return &symbolTable{strs: make(map[uint64]string), methods: make(map[uint64]string)}
}

func (t *symbolTable) count() int { return len(t.strs) + len(t.methods) }

func (t *symbolTable) clear() {
	t.strs = make(map[uint64]string)
	t.methods = make(map[uint64]string)
	t.bytes = 0
}

// Java primitive type names by JVM descriptor letter.
var primitiveNames = [...]string{
	'B': "byte", 'C': "char", 'D': "double", 'F': "float", 'I': "int",
	'J': "long", 'S': "short", 'Z': "boolean", 'V': "void",
}

// renderMethod renders a method the way ZICO does: short return type, fully
// qualified class, method name and short argument types, e.g.
// `void org.apache.catalina.core.StandardEngineValve.invoke(Request, Response)`.
// A signature that is not a JVM method descriptor is appended as is.
func renderMethod(class, method, signature string) string {
	args, ret, ok := parseDescriptor(signature)
	if !ok {
		return class + "." + method + signature
	}
	var b strings.Builder
	b.Grow(len(class) + len(method) + len(signature) + 8)
	b.WriteString(ret)
	b.WriteByte(' ')
	b.WriteString(class)
	b.WriteByte('.')
	b.WriteString(method)
	b.WriteByte('(')
	for i, a := range args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a)
	}
	b.WriteByte(')')
	return b.String()
}

// parseDescriptor splits a JVM method descriptor such as
// "(Ljava/lang/String;[I)V" into short type names.
func parseDescriptor(d string) (args []string, ret string, ok bool) {
	if len(d) < 3 || d[0] != '(' {
		return nil, "", false
	}
	i := 1
	for i < len(d) && d[i] != ')' {
		t, n, ok := parseFieldType(d[i:])
		if !ok {
			return nil, "", false
		}
		args = append(args, t)
		i += n
	}
	if i >= len(d) {
		return nil, "", false
	}
	i++ // ')'
	rest := d[i:]
	if rest == "V" {
		return args, "void", true
	}
	t, n, ok := parseFieldType(rest)
	if !ok || n != len(rest) {
		return nil, "", false
	}
	return args, t, true
}

// parseFieldType parses one field type at the start of d and returns its
// short name and encoded length.
func parseFieldType(d string) (name string, n int, ok bool) {
	dims := 0
	for dims < len(d) && d[dims] == '[' {
		dims++
	}
	if dims >= len(d) || dims > 255 {
		return "", 0, false
	}
	c := d[dims]
	switch {
	case c == 'L':
		end := strings.IndexByte(d[dims:], ';')
		if end < 2 {
			return "", 0, false
		}
		full := d[dims+1 : dims+end]
		if k := strings.LastIndexAny(full, "/."); k >= 0 {
			full = full[k+1:]
		}
		name, n = full, dims+end+1
	case int(c) < len(primitiveNames) && primitiveNames[c] != "" && c != 'V':
		name, n = primitiveNames[c], dims+1
	default:
		return "", 0, false
	}
	if dims > 0 {
		name += strings.Repeat("[]", dims)
	}
	return name, n, true
}

// str resolves a string symbol (what, at off, in errors).
func (d *traceDecoder) str(off int, id uint64, what string) (string, error) {
	if s, ok := d.syms.strs[id]; ok {
		return s, nil
	}
	return "", undefinedString(off, id, what)
}

func undefinedString(off int, id uint64, what string) error {
	return decodeErrorf(off, "%s: undefined string symbol %d", what, id)
}

// symbol reads a string symbol id (what, in errors) and resolves it.
func (d *traceDecoder) symbol(what string) (string, error) {
	off := d.r.pos
	id, err := d.r.uint(what)
	if err != nil {
		return "", err
	}
	return d.str(off, id, what)
}

// frameStr resolves a stack-frame symbol, where 0 stands for an unknown
// (null) class, method or file.
func (d *traceDecoder) frameStr(off int, id uint64, what string) (string, error) {
	if s, ok := d.syms.strs[id]; ok {
		return s, nil
	}
	if id == 0 {
		return "", nil
	}
	return "", undefinedString(off, id, what)
}

// method resolves a method id (at off) to the method as ZICO renders it.
func (d *traceDecoder) method(off int, id uint64) (string, error) {
	m, ok := d.syms.methods[id]
	if !ok {
		return "", decodeErrorf(off, "undefined method id %d", id)
	}
	return m, nil
}
