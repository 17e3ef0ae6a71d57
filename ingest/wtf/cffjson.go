package wtf

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// cffJSONDoc is one JSON document of a CFF JSON file: the whole file in
// "complete" mode, or, in "partial" mode, the header document followed by one
// document per chunk (either {"chunks": [...]} or the chunk object itself).
type cffJSONDoc struct {
	WtfVersion       json.RawMessage `json:"wtfVersion"`
	WtfVersionOld    json.RawMessage `json:"wtf_version"`
	FormatVersion    json.RawMessage `json:"formatVersion"`
	FormatVersionOld json.RawMessage `json:"format_version"`
	Chunks           []cffJSONChunk  `json:"chunks"`
	cffJSONChunk
}

type cffJSONChunk struct {
	ID    json.RawMessage `json:"id"`
	Type  string          `json:"type"`
	Parts []cffJSONPart   `json:"parts"`
}

type cffJSONPart struct {
	Type       string          `json:"type"`
	Mode       string          `json:"mode"`
	ByteLength *int64          `json:"byteLength"`
	Value      json.RawMessage `json:"value"`
	cffHeader
}

var (
	chunkTypeByName = map[string]uint32{"file_header": chunkFileHeader, "event_data": chunkEventData}
	partTypeByName  = map[string]uint32{
		"file_header":         partFileHeader,
		"json_event_buffer":   partJSONEventBuffer,
		"legacy_event_buffer": partLegacyEventBuffer,
		"binary_event_buffer": partBinaryEventBuffer,
		"string_table":        partStringTable,
		"binary_resource":     partBinaryResource,
		"string_resource":     partStringResource,
	}
)

// decodeCFFJSON decodes the JSON form of the chunked file format. Event
// buffers are base64 text holding the same slot stream as the binary form;
// string tables are JSON arrays.
func (l *loader) decodeCFFJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	idx := 0
	for doc := 0; ; doc++ {
		var d cffJSONDoc
		start := dec.InputOffset()
		if err := dec.Decode(&d); err != nil {
			if errors.Is(err, io.EOF) && doc > 0 {
				return nil
			}
			return l.errAt(fileLoc, start, errf(ErrMalformed, "JSON document %d: %v", doc, err))
		}
		for _, raw := range []json.RawMessage{d.FormatVersion, d.FormatVersionOld} {
			if len(raw) == 0 {
				continue
			}
			if v, err := strconv.ParseFloat(string(raw), 64); err != nil || v != cffFormatVersion {
				return l.errAt(fileLoc, start, errf(ErrUnsupported, "chunked JSON format version %s, want %d", raw, cffFormatVersion))
			}
		}
		chunks := d.Chunks
		if d.Type != "" || d.Parts != nil {
			chunks = append(chunks, d.cffJSONChunk)
		}
		for _, c := range chunks {
			if err := l.jsonChunk(idx, c); err != nil {
				return err
			}
			idx++
		}
	}
}

func (l *loader) jsonChunk(idx int, c cffJSONChunk) error {
	loc := errLoc{chunk: idx, part: -1}
	if id, err := strconv.ParseUint(string(c.ID), 10, 32); err == nil {
		loc.chunkID = uint32(id)
	}
	ctype, ok := chunkTypeByName[c.Type]
	if !ok {
		l.warn.add("chunk-type", fmt.Sprintf("chunk %d has unknown type %q; skipped", idx, c.Type))
		return nil
	}
	parts := make([]cffPart, 0, len(c.Parts))
	for i := range c.Parts {
		jp := &c.Parts[i]
		ploc := loc
		ploc.part = i
		p := cffPart{typ: partTypeByName[jp.Type]}
		switch p.typ {
		case partFileHeader:
			p.header = &jp.cffHeader
		case partStringTable:
			var entries []*string
			if err := json.Unmarshal(jp.Value, &entries); err != nil {
				return l.errAt(ploc, -1, errf(ErrMalformed, "string table: %v", err))
			}
			p.strings = make([]string, len(entries))
			for j, e := range entries {
				if e != nil {
					p.strings[j] = *e
				}
			}
		case partBinaryEventBuffer, partLegacyEventBuffer, partBinaryResource:
			body, err := base64Part(jp)
			if err != nil {
				return l.errAt(ploc, -1, err)
			}
			p.body = body
		case partStringResource, partJSONEventBuffer:
		default:
			p.typ = 0xFFFFFFFF
			l.warn.add("part-type", fmt.Sprintf("chunk %d: unknown part type %q; skipped", idx, jp.Type))
			continue
		}
		parts = append(parts, p)
	}
	l.chunks++
	loc.inPart = true
	return l.chunk(loc, ctype, parts, -1)
}

// base64Part decodes a {"mode": "base64", "byteLength": n, "value": "..."}
// part body.
func base64Part(jp *cffJSONPart) ([]byte, error) {
	if jp.Mode != "base64" {
		return nil, errf(ErrUnsupported, "part %s in mode %q (only base64 is defined)", jp.Type, jp.Mode)
	}
	var text string
	if err := json.Unmarshal(jp.Value, &text); err != nil {
		return nil, errf(ErrMalformed, "part %s value: %v", jp.Type, err)
	}
	body, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		if body2, err2 := base64.RawStdEncoding.DecodeString(text); err2 == nil {
			body, err = body2, nil
		}
	}
	if err != nil {
		return nil, errf(ErrMalformed, "part %s base64: %v", jp.Type, err)
	}
	if jp.ByteLength != nil {
		n := *jp.ByteLength
		switch {
		case n < 0 || n > int64(len(body)):
			return nil, errf(ErrTruncated, "part %s byteLength %d, base64 holds %d bytes", jp.Type, n, len(body))
		case n < int64(len(body)):
			body = body[:n]
		}
	}
	return body, nil
}
