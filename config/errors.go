package config

import (
	"strconv"
	"strings"
)

// KeyError is a problem with one configuration key: an unknown key, a missing
// one, or a value that does not parse or validate. File and Line locate the key
// when they are known (Line 0 means unknown). Errors that combine several
// KeyErrors are built with errors.Join, so errors.As finds the first one.
type KeyError struct {
	File string // file name, "" if unknown
	Line int    // 1-based line, 0 if unknown
	Key  string // dotted key, e.g. "store.compression"
	Err  error
}

func (e *KeyError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	if e.Line > 0 {
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteByte(':')
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *KeyError) Unwrap() error { return e.Err }
