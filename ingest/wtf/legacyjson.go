package wtf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/ztsd/ztsd/trace"
)

// legacyJSONEntry is one entry of a legacy JSON event list (JsonTrace v2).
type legacyJSONEntry struct {
	Event     json.RawMessage   `json:"event"`
	Type      string            `json:"type"`
	Time      json.Number       `json:"time"`
	Args      []json.RawMessage `json:"args"`
	Signature string            `json:"signature"`
	Class     string            `json:"class"`
	Flags     json.Number       `json:"flags"`
	EventID   json.RawMessage   `json:"event_id"`
	// header fields
	FormatVersion json.Number     `json:"format_version"`
	Timebase      json.Number     `json:"timebase"`
	TimeOffset    json.Number     `json:"time_offset"`
	Metadata      json.RawMessage `json:"metadata"`
	HighRes       *bool           `json:"high_resolution_times"`
	ContextInfo   json.RawMessage `json:"contextInfo"`
}

// maxJSONTimeUS bounds legacy JSON times (µs from the timebase, 4e12 ms).
const maxJSONTimeUS = 4e15

// decodeLegacyJSON decodes a legacy JSON event list as WTF's JsonDataSource
// did: a "wtf.json#header" entry before the first event (format_version 2,
// timebase in ms), "wtf.event#define" entries (signature "name(args)",
// class "scope" unless "instance"), and events {"event": id|name, "time": ms,
// "args": [...]}; event -1 is wtf.scope#leave and builtin names need no
// define. wtf.zone#create events are stored as events too.
func (l *loader) decodeLegacyJSON(data []byte) error {
	l.storeZoneCreate = true
	entries, err := legacyJSONEntries(data)
	if err != nil {
		return l.errAt(fileLoc, -1, err)
	}
	byID := map[int64]*eventType{}
	byName := map[string]*eventType{}
	version := int64(1)
	delayMS := 0.0
	sawEvent := false
	entryErr := func(i int, err error) error {
		return &DecodeError{Encoding: l.enc.String(), Chunk: -1, Part: -1, Offset: -1, Entry: i, Err: err}
	}
	for i, raw := range entries {
		var e legacyJSONEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return entryErr(i, errf(ErrMalformed, "entry: %v", err))
		}
		if isTruthy(e.Event) {
			if !sawEvent {
				sawEvent = true
				if version != legacyJSONVersion {
					return entryErr(i, errf(ErrUnsupported, "legacy JSON format version %d (no v2 header before the first event), want %d", version, legacyJSONVersion))
				}
				if !l.haveHeader {
					if err := l.setHeader(0, 0, nil, trace.Null(), trace.Null()); err != nil {
						return entryErr(i, err)
					}
				}
			}
			if err := l.jsonEvent(&e, byID, byName, delayMS); err != nil {
				return entryErr(i, err)
			}
			if err := l.poll(); err != nil {
				return err
			}
			continue
		}
		switch e.Type {
		case "wtf.json#header":
			if sawEvent {
				l.warn.add("late-header", "wtf.json#header after the first event; ignored (as WTF does)")
				continue
			}
			if e.FormatVersion != "" {
				v, err := e.FormatVersion.Int64()
				if err != nil {
					return entryErr(i, errf(ErrMalformed, "format_version %q", e.FormatVersion))
				}
				version = v
			}
			var tb float64
			var tbNS int64
			if e.Timebase != "" {
				var err error
				if tb, tbNS, err = timebaseFromText(string(e.Timebase)); err != nil {
					return entryErr(i, err)
				}
			}
			if e.TimeOffset != "" {
				if delayMS, err = jsonFloat(e.TimeOffset); err != nil {
					return entryErr(i, errf(ErrMalformed, "time_offset %q", e.TimeOffset))
				}
			}
			var flags []string
			if e.HighRes != nil && *e.HighRes {
				flags = []string{"has_high_resolution_times"}
			}
			meta, err := rawToValue(e.Metadata)
			if err != nil {
				return entryErr(i, errf(ErrMalformed, "metadata: %v", err))
			}
			ctxInfo, err := rawToValue(e.ContextInfo)
			if err != nil {
				return entryErr(i, errf(ErrMalformed, "contextInfo: %v", err))
			}
			if err := l.setHeader(tb, tbNS, flags, ctxInfo, meta); err != nil {
				return entryErr(i, err)
			}
		case "wtf.event#define":
			l.raw++
			l.defines++
			if err := l.jsonDefine(&e, byID, byName); err != nil {
				return entryErr(i, err)
			}
		default:
			l.warn.add("json-entry", fmt.Sprintf("entry %d: neither an event nor a known type (%q); ignored", i, e.Type))
		}
	}
	if !sawEvent && version != legacyJSONVersion {
		return l.errAt(fileLoc, -1, errf(ErrUnsupported, "legacy JSON without a version 2 header"))
	}
	return nil
}

// legacyJSONEntries returns the entries of the top-level array (or of the
// object's "events" array). Like WTF, a missing closing "]" and a trailing
// comma are tolerated.
func legacyJSONEntries(data []byte) ([]json.RawMessage, error) {
	p := skipSpace(data)
	if len(p) > 0 && p[0] == '{' {
		var obj struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal(p, &obj); err != nil {
			return nil, errf(ErrMalformed, "legacy JSON: %v", err)
		}
		if obj.Events == nil {
			return nil, errf(ErrMalformed, "legacy JSON object without an \"events\" array")
		}
		return obj.Events, nil
	}
	var list []json.RawMessage
	err := json.Unmarshal(p, &list)
	if err == nil {
		return list, nil
	}
	fixed := bytes.TrimRight(p, " \t\r\n")
	fixed = bytes.TrimSuffix(fixed, []byte("]"))
	fixed = bytes.TrimRight(fixed, " \t\r\n")
	fixed = bytes.TrimSuffix(fixed, []byte(","))
	fixed = append(fixed[:len(fixed):len(fixed)], ']')
	if err2 := json.Unmarshal(fixed, &list); err2 == nil {
		return list, nil
	}
	return nil, errf(ErrMalformed, "legacy JSON: %v", err)
}

// isTruthy mirrors the JS test `if (entry.event)`.
func isTruthy(raw json.RawMessage) bool {
	s := string(bytes.TrimSpace(raw))
	switch s {
	case "", "null", "false", "0", `""`, "-0":
		return false
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f != 0 && !math.IsNaN(f)
	}
	return true
}

func jsonFloat(n json.Number) (float64, error) {
	if n == "" {
		return 0, nil
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("not a finite number")
	}
	return f, nil
}

// jsonDefine registers a define entry; types are looked up by event_id and
// by name (a later define of a known name reuses the first, as WTF does).
func (l *loader) jsonDefine(e *legacyJSONEntry, byID map[int64]*eventType, byName map[string]*eventType) error {
	name, specs, err := parseSignature(e.Signature)
	if err != nil {
		return err
	}
	t, ok := byName[name]
	if !ok {
		class := uint8(classScope)
		if e.Class == "instance" {
			class = classInstance
		}
		var flags int64
		if e.Flags != "" {
			if flags, err = e.Flags.Int64(); err != nil || flags < 0 || flags > math.MaxUint32 {
				return errf(ErrBadSignature, "define of %q: flags %q", name, e.Flags)
			}
		}
		t = l.newType(name, e.Signature, class, uint32(flags), specs)
		byName[name] = t
	}
	if isTruthy(e.EventID) {
		id, err := strconv.ParseInt(string(bytes.TrimSpace(e.EventID)), 10, 64)
		if err != nil {
			return errf(ErrBadSignature, "define of %q: event_id %s", name, e.EventID)
		}
		byID[id] = t
	}
	return nil
}

// jsonEvent resolves and handles one event entry.
func (l *loader) jsonEvent(e *legacyJSONEntry, byID map[int64]*eventType, byName map[string]*eventType, delayMS float64) error {
	var t *eventType
	ref := bytes.TrimSpace(e.Event)
	if ref[0] == '"' {
		var name string
		if err := json.Unmarshal(ref, &name); err != nil {
			return errf(ErrMalformed, "event %s: %v", ref, err)
		}
		t = l.jsonType(name, byName)
		if t == nil {
			return errf(ErrUnknownEvent, "event %q is not defined", name)
		}
	} else {
		id, err := strconv.ParseInt(string(ref), 10, 64)
		if err != nil {
			return errf(ErrMalformed, "event %s is neither an id nor a name", ref)
		}
		if id == -1 {
			t = l.jsonType("wtf.scope#leave", byName)
		} else if t = byID[id]; t == nil {
			return errf(ErrUnknownEvent, "event id %d is not defined", id)
		}
	}
	ms, err := jsonFloat(e.Time)
	if err != nil {
		return errf(ErrMalformed, "event %s time %q", t.name, e.Time)
	}
	us := math.Trunc((ms + delayMS) * 1000)
	if us < 0 {
		us = 0
	}
	if us > maxJSONTimeUS {
		return errf(ErrMalformed, "event %s time %v ms out of range", t.name, ms)
	}
	var vals []trace.Value
	if len(e.Args) > 0 {
		if len(e.Args) != len(t.args) {
			l.warn.add("json-args", fmt.Sprintf("event %s has %d arguments, its signature %d: arguments dropped (as WTF does)", t.name, len(e.Args), len(t.args)))
		} else {
			vals = make([]trace.Value, len(e.Args))
			for i, raw := range e.Args {
				v, err := rawToValue(raw)
				if err != nil {
					return errf(ErrMalformed, "event %s argument %d: %v", t.name, i, err)
				}
				vals[i] = v
			}
		}
	}
	return l.handle(t, int64(us), vals)
}

// jsonType returns a defined type by name, defining builtins on first use.
func (l *loader) jsonType(name string, byName map[string]*eventType) *eventType {
	if t, ok := byName[name]; ok {
		return t
	}
	sig, ok := builtinSignatures[name]
	if !ok {
		return nil
	}
	specs, err := parseArgs(sig.args)
	if err != nil {
		return nil
	}
	t := l.newType(name, sig.args, sig.class, sig.flags, specs)
	byName[name] = t
	return t
}
