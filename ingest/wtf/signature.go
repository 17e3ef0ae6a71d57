package wtf

import (
	"fmt"
	"regexp"
	"strings"
)

// argType is a normalized WTF argument type (wtf.data.Variable).
type argType uint8

const (
	argBool argType = iota + 1
	argInt8
	argUint8
	argInt16
	argUint16
	argInt32
	argUint32
	argFloat32
	argASCII
	argUTF8
	argChar
	argWChar
	argAny
	argFlowID
	argTime32
	argInt8Array
	argUint8Array
	argInt16Array
	argUint16Array
	argInt32Array
	argUint32Array
	argFloat32Array
	argCharArray
	argWCharArray
)

var argTypeNames = [...]string{
	argBool: "bool", argInt8: "int8", argUint8: "uint8", argInt16: "int16", argUint16: "uint16",
	argInt32: "int32", argUint32: "uint32", argFloat32: "float32", argASCII: "ascii", argUTF8: "utf8",
	argChar: "char", argWChar: "wchar", argAny: "any", argFlowID: "flowId", argTime32: "time32",
	argInt8Array: "int8[]", argUint8Array: "uint8[]", argInt16Array: "int16[]", argUint16Array: "uint16[]",
	argInt32Array: "int32[]", argUint32Array: "uint32[]", argFloat32Array: "float32[]",
	argCharArray: "char[]", argWCharArray: "wchar[]",
}

func (t argType) String() string {
	if int(t) < len(argTypeNames) && argTypeNames[t] != "" {
		return argTypeNames[t]
	}
	return fmt.Sprintf("argtype(%d)", uint8(t))
}

// argSpec is one argument of an event type.
type argSpec struct {
	name string
	typ  argType
}

// scalarTypes maps every type name WTF accepts (wtf.data.Variable.TYPE_MAP_)
// to the normalized type.
var scalarTypes = map[string]argType{
	"bool": argBool, "int8": argInt8, "byte": argInt8, "uint8": argUint8, "octet": argUint8,
	"int16": argInt16, "short": argInt16, "uint16": argUint16, "unsigned short": argUint16,
	"int32": argInt32, "long": argInt32, "uint32": argUint32, "unsigned long": argUint32,
	"float32": argFloat32, "float": argFloat32, "ascii": argASCII, "utf8": argUTF8,
	"DOMString": argUTF8, "char": argChar, "wchar": argWChar, "any": argAny,
	"flowId": argFlowID, "time32": argTime32,
}

// arrayOf maps a scalar type to its array type; WTF's readers implement
// arrays of these only.
var arrayOf = map[argType]argType{
	argInt8: argInt8Array, argUint8: argUint8Array, argInt16: argInt16Array,
	argUint16: argUint16Array, argInt32: argInt32Array, argUint32: argUint32Array,
	argFloat32: argFloat32Array, argChar: argCharArray, argWChar: argWCharArray,
}

// signatureArgRE is WTF's SIGNATURE_REGEX_: the first match in each
// comma-separated piece gives the type (greedy, may contain spaces, [] and
// <>) and the name. A trailing "@N" ordinal is not matched and so ignored,
// as in WTF.
var signatureArgRE = regexp.MustCompile(`[ ]*([a-zA-Z0-9 \[\]<>]+) ([a-zA-Z0-9_]+)`)

// maxArgs bounds the argument list of one event type.
const maxArgs = 1024

// parseArgs parses the argument list of a define record ("uint32 n, ascii
// label"); an empty string means no arguments.
func parseArgs(s string) ([]argSpec, error) {
	if s == "" {
		return nil, nil
	}
	pieces := strings.Split(s, ",")
	if len(pieces) > maxArgs {
		return nil, errf(ErrBadSignature, "%d arguments, at most %d supported", len(pieces), maxArgs)
	}
	specs := make([]argSpec, 0, len(pieces))
	for _, piece := range pieces {
		m := signatureArgRE.FindStringSubmatch(piece)
		if m == nil {
			return nil, errf(ErrBadSignature, "invalid signature argument %q", piece)
		}
		typ, err := parseArgType(m[1])
		if err != nil {
			return nil, err
		}
		specs = append(specs, argSpec{name: m[2], typ: typ})
	}
	return specs, nil
}

func parseArgType(s string) (argType, error) {
	name := s
	isArray := false
	if strings.HasSuffix(name, "[]") {
		isArray = true
		name = strings.Replace(name, "[]", "", 1)
	}
	if strings.HasPrefix(name, "sequence<") && strings.HasSuffix(name, ">") {
		isArray = true
		name = name[len("sequence<") : len(name)-1]
	}
	t, ok := scalarTypes[name]
	if !ok {
		return 0, errf(ErrBadSignature, "invalid signature argument type %q", s)
	}
	if isArray {
		at, ok := arrayOf[t]
		if !ok {
			return 0, errf(ErrBadSignature, "argument type %q: arrays of %s are not supported by WTF", s, t)
		}
		t = at
	}
	return t, nil
}

// signatureNameRE is the name part of a full signature "name(args)".
var signatureNameRE = regexp.MustCompile(`^([a-zA-Z0-9_.#:$\[\]"'\-]+)(\((.*)\))?$`)

// parseSignature splits a full signature ("my.app#work(uint32 n)" or a bare
// name) as WTF's wtf.data.Variable.parseSignature does: spaces before the
// first "(" are removed.
func parseSignature(sig string) (name string, args []argSpec, err error) {
	sig = strings.TrimSpace(sig)
	if i := strings.IndexByte(sig, '('); i >= 0 {
		sig = strings.ReplaceAll(sig[:i], " ", "") + sig[i:]
	} else {
		sig = strings.ReplaceAll(sig, " ", "")
	}
	m := signatureNameRE.FindStringSubmatch(sig)
	if m == nil {
		return "", nil, errf(ErrBadSignature, "invalid event signature %q", sig)
	}
	args, err = parseArgs(m[3])
	if err != nil {
		return "", nil, err
	}
	return m[1], args, nil
}
