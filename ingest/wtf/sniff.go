package wtf

import (
	"bytes"
	"encoding/binary"
)

// encoding is one of the WTF file encodings this package reads.
type encoding uint8

const (
	encUnknown encoding = iota
	encLegacyBinary
	encCFFBinary
	encCFFJSON
	encLegacyJSON
)

func (e encoding) String() string {
	switch e {
	case encLegacyBinary:
		return "legacy-binary"
	case encCFFBinary:
		return "cff-binary"
	case encCFFJSON:
		return "cff-json"
	case encLegacyJSON:
		return "legacy-json"
	}
	return "unknown"
}

// Format versions and magic numbers.
const (
	legacyFormatVersion = 3  // BinaryTrace.VERSION
	cffFormatVersion    = 10 // ChunkedFileFormat.VERSION
	legacyJSONVersion   = 2  // JsonTrace.VERSION
	magic               = 0xDEADBEEF
	binaryHeaderSize    = 12 // magic, wtf version, format version
)

// Sniff reports whether head, the first bytes of a file (up to 64), look
// like a WTF trace in any of the encodings this package reads or rejects
// with a precise error (a DE AD BE EF magic in either byte order; a JSON
// document with WTF's keys).
func Sniff(head []byte) bool {
	if len(head) >= 4 {
		if binary.BigEndian.Uint32(head) == magic || binary.LittleEndian.Uint32(head) == magic {
			return true
		}
	}
	return sniffJSON(head) != encUnknown
}

// sniffJSON recognises the two JSON encodings from the start of a document.
func sniffJSON(head []byte) encoding {
	p := skipSpace(head)
	if len(p) == 0 {
		return encUnknown
	}
	switch p[0] {
	case '{':
		if bytes.Contains(p, []byte(`"wtfVersion"`)) || bytes.Contains(p, []byte(`"wtf_version"`)) ||
			(bytes.Contains(p, []byte(`"formatVersion"`)) && bytes.Contains(p, []byte(`"chunks"`))) {
			return encCFFJSON
		}
		if bytes.Contains(p, []byte(`"events"`)) && bytes.Contains(p, []byte(`"wtf.`)) {
			return encLegacyJSON
		}
	case '[':
		q := skipSpace(p[1:])
		if len(q) > 0 && q[0] == '{' && (bytes.Contains(q, []byte(`"wtf.`)) || bytes.Contains(q, []byte(`"event"`))) {
			return encLegacyJSON
		}
	}
	return encUnknown
}

// skipSpace drops a UTF-8 byte-order mark and JSON white space.
func skipSpace(p []byte) []byte {
	p = bytes.TrimPrefix(p, []byte("\xEF\xBB\xBF"))
	for len(p) > 0 && (p[0] == ' ' || p[0] == '\t' || p[0] == '\n' || p[0] == '\r') {
		p = p[1:]
	}
	return p
}

// detect decides the encoding of a whole file. For the binary encodings it
// also checks the format version, so that variants WTF itself rejects get a
// clear error; le reports little-endian integers for the legacy encoding.
func detect(data []byte) (enc encoding, le bool, err error) {
	if len(data) >= 4 {
		be := binary.BigEndian.Uint32(data) == magic
		lm := binary.LittleEndian.Uint32(data) == magic
		if be || lm {
			if len(data) < binaryHeaderSize {
				return encUnknown, false, errf(ErrTruncated, "file header needs %d bytes, have %d", binaryHeaderSize, len(data))
			}
			var version uint32
			if be {
				version = binary.BigEndian.Uint32(data[8:])
			} else {
				version = binary.LittleEndian.Uint32(data[8:])
			}
			switch {
			case be && version == legacyFormatVersion:
				return encLegacyBinary, false, nil
			case lm && version == legacyFormatVersion:
				return encLegacyBinary, true, nil
			case lm && version == cffFormatVersion:
				return encCFFBinary, true, nil
			case be && version == cffFormatVersion:
				return encUnknown, false, errf(ErrUnsupported, "big-endian chunked format version 10 (pre-release, June 2013) is not supported")
			case be:
				return encUnknown, false, errf(ErrUnsupported, "big-endian (legacy) format version %d, want %d", version, legacyFormatVersion)
			default:
				return encUnknown, false, errf(ErrUnsupported, "little-endian format version %d, want %d (chunked) or %d (legacy)", version, cffFormatVersion, legacyFormatVersion)
			}
		}
	}
	p := skipSpace(data)
	if len(p) > 0 {
		switch p[0] {
		case '[':
			return encLegacyJSON, false, nil
		case '{':
			// Decide by the keys of the whole document head: CFF JSON has
			// wtfVersion/formatVersion/chunks, legacy JSON an "events" list.
			head := p
			if len(head) > 4096 {
				head = head[:4096]
			}
			if e := sniffJSON(head); e != encUnknown {
				return e, false, nil
			}
			if bytes.Contains(head, []byte(`"chunks"`)) || bytes.Contains(head, []byte(`"formatVersion"`)) {
				return encCFFJSON, false, nil
			}
			if bytes.Contains(head, []byte(`"events"`)) {
				return encLegacyJSON, false, nil
			}
		}
	}
	return encUnknown, false, ErrNotWTF
}
