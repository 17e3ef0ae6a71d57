package wtf

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ztsd/ztsd/trace"
)

// Event classes and flags (wtf.data.EventClass, wtf.data.EventFlag).
const (
	classInstance = 0
	classScope    = 1

	flagHighFrequency   = 0x02
	flagSystemTime      = 0x04
	flagInternal        = 0x08
	flagAppendScopeData = 0x10
	flagBuiltin         = 0x20
	flagAppendFlowData  = 0x40
)

// builtin identifies the events the decoder or the scope builder treats
// specially; everything else is a user event.
type builtin uint8

const (
	bNone builtin = iota
	bDefine
	bZoneCreate
	bZoneDelete
	bZoneSet
	bScopeEnter
	bScopeLeave
	bAppendData
	bTimeStamp
	bFrameStart
	bFrameEnd
	bMark
	bTimeRangeBegin
	bTimeRangeEnd
)

var builtinByName = map[string]builtin{
	"wtf.event#define":      bDefine,
	"wtf.zone#create":       bZoneCreate,
	"wtf.zone#delete":       bZoneDelete,
	"wtf.zone#set":          bZoneSet,
	"wtf.scope#enter":       bScopeEnter,
	"wtf.scope#leave":       bScopeLeave,
	"wtf.scope#appendData":  bAppendData,
	"wtf.trace#timeStamp":   bTimeStamp,
	"wtf.timing#frameStart": bFrameStart,
	"wtf.timing#frameEnd":   bFrameEnd,
	"wtf.trace#mark":        bMark,
	"wtf.timeRange#begin":   bTimeRangeBegin,
	"wtf.timeRange#end":     bTimeRangeEnd,
}

// builtinSignature is a builtin event as WTF HEAD defines it; legacy JSON
// files may use these names without defining them.
type builtinSignature struct {
	class uint8
	flags uint32
	args  string
}

var builtinSignatures = map[string]builtinSignature{
	"wtf.event#define":        {classInstance, flagBuiltin | flagInternal, "uint16 wireId, uint16 eventClass, uint32 flags, ascii name, ascii args"},
	"wtf.trace#discontinuity": {classInstance, flagBuiltin, ""},
	"wtf.zone#create":         {classInstance, flagBuiltin | flagInternal, "uint16 zoneId, ascii name, ascii type, ascii location"},
	"wtf.zone#delete":         {classInstance, flagBuiltin | flagInternal, "uint16 zoneId"},
	"wtf.zone#set":            {classInstance, flagBuiltin | flagInternal, "uint16 zoneId"},
	"wtf.scope#enter":         {classScope, flagBuiltin, "ascii name"},
	"wtf.scope#enterTracing":  {classScope, flagBuiltin | flagInternal | flagSystemTime, ""},
	"wtf.scope#leave":         {classInstance, flagBuiltin | flagInternal, ""},
	"wtf.scope#appendData":    {classInstance, flagBuiltin | flagInternal | flagAppendScopeData, "ascii name, any value"},
	"wtf.flow#branch":         {classInstance, flagBuiltin | flagInternal, "flowId id, flowId parentId, ascii name, any value"},
	"wtf.flow#extend":         {classInstance, flagBuiltin | flagInternal, "flowId id, ascii name, any value"},
	"wtf.flow#terminate":      {classInstance, flagBuiltin | flagInternal, "flowId id, any value"},
	"wtf.flow#appendData":     {classInstance, flagBuiltin | flagInternal | flagAppendFlowData, "flowId id, ascii name, any value"},
	"wtf.trace#mark":          {classInstance, flagBuiltin | flagInternal, "ascii name, any value"},
	"wtf.trace#timeStamp":     {classInstance, flagBuiltin, "ascii name, any value"},
	"wtf.timeRange#begin":     {classInstance, flagBuiltin | flagInternal, "uint32 id, ascii name, any value"},
	"wtf.timeRange#end":       {classInstance, flagBuiltin | flagInternal, "uint32 id"},
	"wtf.timing#frameStart":   {classInstance, flagInternal, "uint32 number"},
	"wtf.timing#frameEnd":     {classInstance, flagInternal, "uint32 number"},
}

// defineArgs is the implicit signature of wire id 1, wtf.event#define.
var defineArgs = []argSpec{
	{"wireId", argUint16}, {"eventClass", argUint16}, {"flags", argUint32}, {"name", argASCII}, {"args", argASCII},
}

// eventType is one defined event type.
type eventType struct {
	id      int // index in loader.types
	name    string
	argsSig string
	class   uint8
	flags   uint32
	args    []argSpec
	builtin builtin
	order   []int // argument indexes in attribute-key order (attrOrder)
}

func (t *eventType) isScope() bool { return t.class == classScope }

// appendsScopeData reports whether the event's arguments go to the open
// scope (by flag, as WTF's EventList does).
func (t *eventType) appendsScopeData() bool {
	return t.flags&flagAppendScopeData != 0 && t.class != classScope
}

// event is one stored (not consumed) event. It holds no pointers, so that
// the hundreds of thousands of them cost the garbage collector nothing.
type event struct {
	time int64 // µs from the file timebase
	typ  int32 // index in loader.types
	args int32 // index in loader.args; -1: none
}

// zone is a WTF zone: a thread of execution.
type zone struct {
	index    int
	name     string
	typ      string
	location string
	hasType  bool
	hasLoc   bool
	events   []event
	children []int32 // per event: child records of a scope (set by prepare)
}

// displayName is the zone name used in attributes.
func (z *zone) displayName() string {
	if z.name == "" {
		return "(default)"
	}
	return z.name
}

// fileHeader is what a file says about itself.
type fileHeader struct {
	timebaseMS float64
	timebaseNS int64
	flags      []string
	context    trace.Attrs // wtf.context.*
	metadata   trace.Attrs // wtf.metadata.*
}

// loader holds the per-file decoding state shared by all encodings: the
// wire-id table, the zones and the stored events.
type loader struct {
	ctx  context.Context
	enc  encoding
	warn *warnings

	wires   []*eventType // by wire id; wire 1 is the implicit define
	types   []*eventType
	renamed map[string]*eventType

	zones          []*zone
	zoneByWire     map[uint32]*zone
	zoneByKey      map[string]*zone
	defaultZone    *zone
	defaultRenamed bool
	cur            *zone

	storeZoneCreate bool // legacy JSON stores wtf.zone#create as an event

	header     fileHeader
	haveHeader bool

	raw        int64 // every event record read
	defines    int64
	zoneEvents int64 // zone create/set/delete consumed
	stored     int64
	args       []trace.Attrs // arguments of stored events
	attrSlab   trace.Attrs   // storage the next events' arguments are carved from
	eventHint  int           // expected number of events, for the first allocation
	chunks     int
	resources  int64

	tick int // context polling counter
}

func newLoader(ctx context.Context, enc encoding) *loader {
	l := &loader{
		ctx:        ctx,
		enc:        enc,
		warn:       newWarnings(),
		renamed:    map[string]*eventType{},
		zoneByWire: map[uint32]*zone{},
		zoneByKey:  map[string]*zone{},
	}
	def := builtinSignatures["wtf.event#define"]
	l.setWire(1, l.newType("wtf.event#define", def.args, def.class, def.flags, defineArgs))
	return l
}

func (l *loader) newType(name, argsSig string, class uint8, flags uint32, args []argSpec) *eventType {
	t := &eventType{id: len(l.types), name: name, argsSig: argsSig, class: class, flags: flags, args: args, builtin: builtinByName[name]}
	l.types = append(l.types, t)
	return t
}

func (l *loader) setWire(wire uint32, t *eventType) {
	for uint32(len(l.wires)) <= wire {
		l.wires = append(l.wires, nil)
	}
	l.wires[wire] = t
}

// wire returns the type defined for a wire id, or nil.
func (l *loader) wire(id uint32) *eventType {
	if id < uint32(len(l.wires)) {
		return l.wires[id]
	}
	return nil
}

// poll checks for cancellation every few thousand events.
func (l *loader) poll() error {
	l.tick++
	if l.tick&0x3fff == 0 {
		return l.ctx.Err()
	}
	return nil
}

// handle processes one decoded event: definitions and zone events update
// the decoder state, everything else is stored in the current zone.
func (l *loader) handle(t *eventType, timeUS int64, vals []trace.Value) error {
	if t.builtin == bDefine {
		if err := l.define(vals); err != nil {
			return err
		}
		l.raw++
		l.defines++
		return nil
	}
	l.raw++
	switch t.builtin {
	case bZoneCreate:
		l.zoneEvents++
		if l.storeZoneCreate {
			// Stored in the zone current before the create (for the first
			// create: the default zone, which the create then names).
			l.zoneEvents--
			l.store(t, timeUS, vals, l.current())
		}
		l.createZone(vals)
		return nil
	case bZoneDelete:
		l.zoneEvents++
		return nil
	case bZoneSet:
		l.zoneEvents++
		l.setZone(vals)
		return nil
	case bScopeEnter:
		name, _ := strArg(vals, 0)
		if name == "" {
			name = "unnamed.scope"
		}
		l.store(l.renamedType(name, classScope), timeUS, nil, nil)
		return nil
	case bTimeStamp:
		name, _ := strArg(vals, 0)
		if name == "" {
			name = "unnamed.instance"
		}
		var args trace.Attrs
		if len(vals) > 1 && vals[1].Kind != trace.KindNull {
			args = trace.Attrs{{Key: "value", Value: vals[1]}}
		}
		l.storeAttrs(l.renamedType(name, classInstance), timeUS, args)
		return nil
	}
	l.store(t, timeUS, vals, nil)
	return nil
}

// renamedType returns the type WTF creates when it re-types wtf.scope#enter
// and wtf.trace#timeStamp events after their name argument.
func (l *loader) renamedType(name string, class uint8) *eventType {
	key := strconv.Itoa(int(class)) + name
	if t, ok := l.renamed[key]; ok {
		return t
	}
	t := l.newType(name, "", class, 0, nil)
	t.builtin = bNone
	l.renamed[key] = t
	return t
}

// store appends an event with its arguments to zone z (nil: the current
// zone). The attributes are laid out in the type's precomputed key order
// and carved from a slab, each capped at its length.
func (l *loader) store(t *eventType, timeUS int64, vals []trace.Value, z *zone) {
	var args trace.Attrs
	if len(vals) == len(t.args) && len(vals) > 0 {
		order := t.attrOrder()
		n := len(order)
		if len(l.attrSlab) < n {
			l.attrSlab = make(trace.Attrs, max(n, attrSlabSize))
		}
		args = l.attrSlab[:n:n]
		l.attrSlab = l.attrSlab[n:]
		for i, j := range order {
			args[i] = trace.Attr{Key: t.args[j].name, Value: vals[j]}
		}
	}
	l.storeIn(t, timeUS, args, z)
}

// attrSlabSize is how many argument attributes are allocated at once.
const attrSlabSize = 1024

// attrOrder returns the argument indexes in attribute-key order; of
// arguments with the same name only the last is kept (as a JS object
// would).
func (t *eventType) attrOrder() []int {
	if t.order != nil || len(t.args) == 0 {
		return t.order
	}
	last := map[string]int{}
	for i, a := range t.args {
		last[a.name] = i
	}
	order := make([]int, 0, len(last))
	for _, i := range last {
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(t.args[a].name, t.args[b].name) })
	t.order = order
	return order
}

func (l *loader) storeAttrs(t *eventType, timeUS int64, args trace.Attrs) {
	l.storeIn(t, timeUS, args, nil)
}

func (l *loader) storeIn(t *eventType, timeUS int64, args trace.Attrs, z *zone) {
	if z == nil {
		z = l.current()
	}
	e := event{time: timeUS, typ: int32(t.id), args: -1}
	if args != nil {
		e.args = int32(len(l.args))
		l.args = append(l.args, args)
	}
	if len(z.events) == cap(z.events) {
		// The first zone starts at the size the input suggests; then double
		// (append grows large slices by only 1.25×).
		grow := max(len(z.events), 256)
		if l.eventHint > 0 {
			grow, l.eventHint = max(grow, l.eventHint), 0
		}
		z.events = slices.Grow(z.events, grow)
	}
	z.events = append(z.events, e)
	l.stored++
}

// eventArgs returns the arguments of a stored event.
func (l *loader) eventArgs(e event) trace.Attrs {
	if e.args < 0 {
		return nil
	}
	return l.args[e.args]
}

// current returns the current zone, creating the unnamed default zone that
// holds events seen before any zone is set.
func (l *loader) current() *zone {
	if l.cur == nil {
		l.cur = l.defaultZoneOrNew()
	}
	return l.cur
}

func (l *loader) defaultZoneOrNew() *zone {
	if l.defaultZone == nil {
		l.defaultZone = l.addZone()
	}
	return l.defaultZone
}

func (l *loader) addZone() *zone {
	z := &zone{index: len(l.zones)}
	l.zones = append(l.zones, z)
	return z
}

// define registers an event type from a wtf.event#define record (wireId,
// eventClass, flags, name, args).
func (l *loader) define(vals []trace.Value) error {
	wire, ok1 := intArg(vals, 0)
	class, ok2 := intArg(vals, 1)
	flags, ok3 := intArg(vals, 2)
	name, _ := strArg(vals, 3)
	argsSig, _ := strArg(vals, 4)
	if !ok1 || !ok2 || !ok3 || wire < 0 || wire > math.MaxUint16 {
		return errf(ErrBadSignature, "define record with invalid wire id/class/flags")
	}
	if name == "" {
		return errf(ErrBadSignature, "define of wire id %d has no name", wire)
	}
	if wire == 1 {
		// wtf.event#define is implicit and cannot be replaced.
		return nil
	}
	if old := l.wire(uint32(wire)); old != nil && old.name == name && old.argsSig == argsSig &&
		old.class == uint8(class) && old.flags == uint32(flags) {
		return nil // redefinition, as every snapshot writes
	}
	specs, err := parseArgs(argsSig)
	if err != nil {
		return fmt.Errorf("define of %q (wire id %d): %w", name, wire, err)
	}
	cls := uint8(classInstance)
	if class == classScope {
		cls = classScope
	}
	l.setWire(uint32(wire), l.newType(name, argsSig, cls, uint32(flags), specs))
	return nil
}

// createZone handles wtf.zone#create(zoneId, name, type, location): zones
// are deduplicated by name, type and location; the first create names the
// default zone in place (events before any zone#set belong to it).
func (l *loader) createZone(vals []trace.Value) *zone {
	id, ok := intArg(vals, 0)
	name, _ := strArg(vals, 1)
	typ, hasType := strArg(vals, 2)
	loc, hasLoc := strArg(vals, 3)
	key := name + "\x00" + typ + "\x00" + loc
	z, found := l.zoneByKey[key]
	if !found {
		if !l.defaultRenamed {
			z = l.defaultZoneOrNew()
			l.defaultRenamed = true
		} else {
			z = l.addZone()
		}
		z.name, z.typ, z.location, z.hasType, z.hasLoc = name, typ, loc, hasType, hasLoc
		l.zoneByKey[key] = z
	}
	if ok {
		l.zoneByWire[uint32(id)] = z
	} else {
		l.warn.add("zone-id", "wtf.zone#create without a numeric zone id")
	}
	return z
}

// setZone handles wtf.zone#set(zoneId). An unknown id (which crashes WTF's
// own loader) falls back to the default zone with a warning.
func (l *loader) setZone(vals []trace.Value) {
	id, _ := intArg(vals, 0)
	if z, ok := l.zoneByWire[uint32(id)]; ok {
		l.cur = z
		return
	}
	l.warn.add("zone-set", fmt.Sprintf("wtf.zone#set to undefined zone id %d: events go to the default zone", id))
	l.cur = l.defaultZoneOrNew()
}

func intArg(vals []trace.Value, i int) (int64, bool) {
	if i >= len(vals) {
		return 0, false
	}
	switch v := vals[i]; v.Kind {
	case trace.KindInt:
		return v.Int, true
	case trace.KindFloat:
		if v.Float == math.Trunc(v.Float) && math.Abs(v.Float) < 1<<53 {
			return int64(v.Float), true
		}
	}
	return 0, false
}

// strArg returns a string argument; ok is false when it is null or absent.
func strArg(vals []trace.Value, i int) (string, bool) {
	if i >= len(vals) {
		return "", false
	}
	switch v := vals[i]; v.Kind {
	case trace.KindString:
		return v.Str, true
	case trace.KindNull:
		return "", false
	default:
		return v.Text(), true
	}
}
