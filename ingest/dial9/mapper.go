package dial9

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// spanKind says what a builder collects: a poll is one span; an active
// period and a stream segment are traces, whose events become spans of
// their own when the builder finishes.
type spanKind uint8

const (
	kindSegment spanKind = iota // events of one stream outside any active period
	kindActive                  // a worker's active period, unpark → park
	kindPoll                    // one task poll, PollStart → PollEnd
)

// Values of the dial9.kind span attribute (and, after "dial9.", of the
// span Type) for the spans an active period or a segment is made of.
const (
	spanPoll        = "poll"         // a task poll, PollStart → PollEnd
	spanUnpark      = "unpark"       // the WorkerUnparkEvent opening an active period
	spanPark        = "park"         // the WorkerParkEvent closing it, with the period's totals
	spanEvent       = "event"        // any other event, zero-length
	spanTracing     = "tracing_span" // a tracing span entered outside any poll
	spanSymbolTable = "symbol_table" // the stream's symbol table rows, counted
)

// containerKey names a span under construction; ord is the per-worker
// ordinal of an active period or poll.
type containerKey struct {
	kind   spanKind
	worker uint64
	ord    int
}

type interval struct {
	start, end uint64
	ord        int
}

// eventKind classifies a schema by name (and by the fields it needs).
type eventKind uint8

const (
	evGeneric eventKind = iota
	evPollStart
	evPollEnd
	evPark
	evUnpark
	evSpanEnter
	evSpanExit
	evCPUSample
	evTaskDump
	evSymbol
	evCallframe
	evClockSync
	evSegmentMeta
)

// drivesWorker reports whether events of kind k move a worker's state.
func (k eventKind) drivesWorker() bool { return k >= evPollStart && k <= evSpanExit }

const (
	spanEnterPrefix = "SpanEnter:"
	spanExitPrefix  = "SpanExit:"
	// epoch2020 is 2020-01-01 in ns: older SegmentMetadataEvents were
	// stamped with wall-clock time, recognisable by being past it.
	epoch2020 = 1577836800 * int64(1e9)
	// noTime marks a record whose event carried no timestamp.
	noTime = math.MinInt64
	// maxOpenSpans bounds the tracing spans open at once on a worker.
	maxOpenSpans = 128
)

type schemaInfo struct {
	kind eventKind
	// keys[i] is the attribute key of field i; order lists field indices
	// sorted by key with duplicates dropped (the last field wins).
	keys     []string
	order    []int
	worker   int
	callsite string // SpanEnter/SpanExit: schema name without the prefix
	// boundKeys are the keys of a park/unpark's fields on its active
	// period span: "dial9.park.<field>" / "dial9.unpark.<field>".
	boundKeys []string
}

// pendingSample is a CPU sample placed by time into a poll or an active
// period during the scan pass; its call chains are rendered once the
// symbol table is complete.
type pendingSample struct {
	rec    *trace.Record
	stacks []pendingStack
}

type pendingStack struct {
	key    string
	frames []uint64
}

type scannedSample struct {
	worker uint64
	ts     uint64
	offset int64
	sample *pendingSample
}

// fileInfo is what the scan pass learns about the whole file before
// spans are built.
type fileInfo struct {
	symbols     *symbolTable
	clockOffset int64
	clockSource string
	minTS       uint64
	legacyMeta  uint64
	streamOwner map[int]uint64
	workers     map[uint64]bool
	polls       map[uint64][]interval
	actives     map[uint64][]interval
	samples     []scannedSample
	placed      map[containerKey][]*pendingSample
	placedAt    map[int64]bool
}

func newFileInfo() *fileInfo {
	return &fileInfo{
		symbols:     newSymbolTable(),
		streamOwner: map[int]uint64{},
		workers:     map[uint64]bool{},
		polls:       map[uint64][]interval{},
		actives:     map[uint64][]interval{},
		placed:      map[containerKey][]*pendingSample{},
		placedAt:    map[int64]bool{},
	}
}

// placeSamples assigns every scanned CPU sample to the poll, else the
// active period, of its worker that contains its timestamp.
func (fi *fileInfo) placeSamples() {
	find := func(ivs []interval, ts uint64) (int, bool) {
		i := sort.Search(len(ivs), func(i int) bool { return ivs[i].start > ts }) - 1
		if i >= 0 && ts <= ivs[i].end {
			return ivs[i].ord, true
		}
		return 0, false
	}
	for _, m := range []map[uint64][]interval{fi.polls, fi.actives} {
		for _, ivs := range m {
			slices.SortStableFunc(ivs, func(a, b interval) int { return cmp.Compare(a.start, b.start) })
		}
	}
	for _, s := range fi.samples {
		key := containerKey{worker: s.worker}
		if ord, ok := find(fi.polls[s.worker], s.ts); ok {
			key.kind, key.ord = kindPoll, ord
		} else if ord, ok := find(fi.actives[s.worker], s.ts); ok {
			key.kind, key.ord = kindActive, ord
		} else {
			continue
		}
		fi.placed[key] = append(fi.placed[key], s.sample)
		fi.placedAt[s.offset] = true
	}
	fi.samples = nil
}

// builder is a span under construction. Record StartNS values hold
// absolute monotonic times (or noTime) until the span is finished.
type builder struct {
	kind       spanKind
	key        containerKey
	span       *trace.Span
	start      uint64 // poll / active period start
	minTS      uint64 // segment: time range of what it holds
	maxTS      uint64
	timed      bool
	worker     *workerState
	stream     int
	childSpans int64
	symbolRows int64
	// symbolTS is the time of the stream's first symbol table row.
	symbolTS uint64
	// unparkCPU is the worker's CPU clock at unpark, when it was given.
	unparkCPU    uint64
	hasUnparkCPU bool
	// parked: the period ended with a WorkerParkEvent whose fields (as
	// dial9.park.* attributes) are parkAttrs.
	parked    bool
	parkAttrs trace.Attrs
	// tracing marks the records of tracing spans entered outside any poll.
	tracing map[*trace.Record]bool
}

type openSpan struct {
	rec   *trace.Record
	id    uint64
	owner *builder
}

// workerState is the per-worker state machine shared by both passes, so
// that both number polls and active periods identically.
type workerState struct {
	id           uint64
	name         string
	pollOpen     bool
	pollInActive bool
	pollOrd      int
	pollStart    uint64
	activeOpen   bool
	activeOrd    int
	activeStart  uint64
	nextPoll     int
	nextActive   int
	lastTS       uint64
	// map pass only
	poll   *builder
	active *builder
	spans  []openSpan
}

type streamState struct {
	idx     int
	worker  *workerState
	segment *builder
}

// accounting says where each source event went.
type accounting struct {
	boundaries int64 // PollStart/End, Unpark/Park that delimit spans
	records    int64 // events that became records
	attributes int64 // symbol table rows, counted on their segment
}

func (a accounting) total() int64 { return a.boundaries + a.records + a.attributes }

// mapper turns events into spans. The scan pass (scan = true) runs the
// same state machine but only collects fileInfo; the map pass emits.
type mapper struct {
	scan    bool
	info    *fileInfo
	emit    ingest.Emit
	file    string
	size    int64
	schemas map[*Schema]*schemaInfo
	workers map[uint64]*workerState
	stream  *streamState
	acc     accounting
	traces  int64
	spans   int64
	records int64
	polls   int64
	periods int64
	chains  map[*uint64]trace.Value
}

func newMapper(scan bool, info *fileInfo, file string, size int64, emit ingest.Emit) *mapper {
	return &mapper{
		scan: scan, info: info, emit: emit, file: file, size: size,
		schemas: map[*Schema]*schemaInfo{}, workers: map[uint64]*workerState{},
		chains: map[*uint64]trace.Value{},
	}
}

func isIntegral(t FieldType) bool {
	switch t.Base() {
	case TypeVarint, TypeU8, TypeU16, TypeU32, TypeI64:
		return true
	}
	return false
}

func (m *mapper) schemaInfo(s *Schema) *schemaInfo {
	if si, ok := m.schemas[s]; ok {
		return si
	}
	si := &schemaInfo{worker: -1, keys: make([]string, len(s.Fields))}
	for i, f := range s.Fields {
		si.keys[i] = "dial9." + f.Name
	}
	order := make([]int, len(s.Fields))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(si.keys[a], si.keys[b]) })
	for i, fi := range order {
		if i+1 < len(order) && si.keys[order[i+1]] == si.keys[fi] {
			continue
		}
		si.order = append(si.order, fi)
	}
	has := func(name string) bool {
		i := s.FieldIndex(name)
		return i >= 0 && isIntegral(s.Fields[i].Type)
	}
	if has("worker_id") {
		si.worker = s.FieldIndex("worker_id")
	}
	worker := si.worker >= 0
	switch {
	case s.Name == "PollStartEvent" && worker:
		si.kind = evPollStart
	case s.Name == "PollEndEvent" && worker:
		si.kind = evPollEnd
	case s.Name == "WorkerParkEvent" && worker:
		si.kind = evPark
	case s.Name == "WorkerUnparkEvent" && worker:
		si.kind = evUnpark
	case strings.HasPrefix(s.Name, spanEnterPrefix) && worker && has("span_id"):
		si.kind, si.callsite = evSpanEnter, strings.TrimPrefix(s.Name, spanEnterPrefix)
	case strings.HasPrefix(s.Name, spanExitPrefix) && worker && has("span_id"):
		si.kind, si.callsite = evSpanExit, strings.TrimPrefix(s.Name, spanExitPrefix)
	case s.Name == "CpuSampleEvent" && worker:
		si.kind = evCPUSample
	case s.Name == "TaskDumpEvent":
		si.kind = evTaskDump
	case s.Name == "SymbolTableEntry" && has("addr"):
		si.kind = evSymbol
	case s.Name == "CallframeDefEvent" && has("address"):
		si.kind = evCallframe
	case s.Name == "ClockSyncEvent" && has("realtime_ns"):
		si.kind = evClockSync
	case s.Name == "SegmentMetadataEvent":
		si.kind = evSegmentMeta
	}
	if si.kind == evPark || si.kind == evUnpark {
		prefix := "dial9.park."
		if si.kind == evUnpark {
			prefix = "dial9.unpark."
		}
		si.boundKeys = make([]string, len(s.Fields))
		for i, f := range s.Fields {
			si.boundKeys[i] = prefix + f.Name
		}
	}
	m.schemas[s] = si
	return si
}

// uintField returns an integral field's value.
func uintField(ev *Event, i int) (uint64, bool) {
	if i < 0 || i >= len(ev.Values) {
		return 0, false
	}
	v := &ev.Values[i]
	if v.Absent {
		return 0, false
	}
	switch v.Type {
	case TypeVarint, TypeU8, TypeU16, TypeU32:
		return v.Uint, true
	case TypeI64:
		return uint64(v.Int), true
	}
	return 0, false
}

func uintNamed(ev *Event, name string) (uint64, bool) {
	return uintField(ev, ev.Schema.FieldIndex(name))
}

// resolvedNamed returns a string field's value, "" when absent or not in
// the pool.
func resolvedNamed(ev *Event, name string) string {
	if s, ok := stringNamed(ev, name); ok && !strings.HasPrefix(s, "<unresolved") {
		return s
	}
	return ""
}

func stringNamed(ev *Event, name string) (string, bool) {
	i := ev.Schema.FieldIndex(name)
	if i < 0 || i >= len(ev.Values) {
		return "", false
	}
	v := &ev.Values[i]
	if v.Absent || (v.Type != TypeString && v.Type != TypePooledString) {
		return "", false
	}
	if v.Unresolved {
		return fmt.Sprintf("<unresolved string #%d>", v.Uint), true
	}
	return v.Str, true
}

func absTS(ts uint64) int64 {
	if ts > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(ts)
}

func recTime(ev *Event) int64 {
	if !ev.HasTimestamp {
		return noTime
	}
	return absTS(ev.TimestampNS)
}

func workerName(id uint64) string {
	switch id {
	case 255:
		return "non-worker"
	case 254:
		return "blocking"
	}
	return "worker-" + strconv.FormatUint(id, 10)
}

func uintValue(x uint64) trace.Value {
	if x > math.MaxInt64 {
		return trace.String(strconv.FormatUint(x, 10))
	}
	return trace.Int(int64(x))
}

// value converts a decoded value to an attribute value; call chains are
// resolved through the file's symbol table.
func (m *mapper) value(v *Value) trace.Value {
	if v.Absent {
		return trace.Null()
	}
	switch v.Type {
	case TypeI64:
		return trace.Int(v.Int)
	case TypeF64:
		return trace.Float(v.Float)
	case TypeBool:
		return trace.Bool(v.Bool)
	case TypeString:
		return trace.String(v.Str)
	case TypePooledString:
		if v.Unresolved {
			return trace.String(fmt.Sprintf("<unresolved string #%d>", v.Uint))
		}
		return trace.String(v.Str)
	case TypeBytes:
		return trace.String(hex.EncodeToString(v.Bytes))
	case TypeVarint, TypeU8, TypeU16, TypeU32:
		return uintValue(v.Uint)
	case TypeStackFrames:
		return m.info.symbols.callchain(v.Frames)
	case TypePooledStackFrames:
		if v.Unresolved {
			return trace.String(fmt.Sprintf("<unresolved stack #%d>", v.Uint))
		}
		if len(v.Frames) == 0 {
			return trace.List()
		}
		// Pool entries are shared by every event that references them.
		if c, ok := m.chains[&v.Frames[0]]; ok {
			return c
		}
		c := m.info.symbols.callchain(v.Frames)
		m.chains[&v.Frames[0]] = c
		return c
	case TypeStringMap:
		a := make(trace.Attrs, 0, len(v.Pairs))
		for _, p := range v.Pairs {
			a = append(a, trace.Attr{Key: p.Key, Value: trace.String(p.Value)})
		}
		return trace.MapValue(a) // sorts; the last of duplicate keys wins
	case TypeDynamicList:
		out := make([]trace.Value, len(v.List))
		for i := range v.List {
			out[i] = m.value(&v.List[i])
		}
		return trace.List(out...)
	case TypeDynamicMap:
		a := make(trace.Attrs, 0, len(v.Map))
		for i := range v.Map {
			a = append(a, trace.Attr{Key: m.value(&v.Map[i].Key).Text(), Value: m.value(&v.Map[i].Value)})
		}
		return trace.MapValue(a)
	}
	return trace.Null()
}

// newRecord makes a zero-length record of ev with one "dial9.<field>"
// attribute per field; a StringMap field becomes one "dial9.<field>.<key>"
// attribute per entry, so that each is searchable. In the scan pass call
// chains are returned to be rendered later instead.
func (m *mapper) newRecord(ev *Event, si *schemaInfo) (*trace.Record, []pendingStack) {
	rec := &trace.Record{Method: ev.Schema.Name, StartNS: recTime(ev)}
	var stacks []pendingStack
	var maps []int
	rec.Attrs = make(trace.Attrs, 0, len(si.order))
	for _, i := range si.order {
		v := &ev.Values[i]
		switch {
		case v.Absent || v.Unresolved:
		case v.Type == TypeStringMap:
			maps = append(maps, i)
			continue
		case m.scan && (v.Type == TypeStackFrames || v.Type == TypePooledStackFrames):
			stacks = append(stacks, pendingStack{key: si.keys[i], frames: v.Frames})
			continue
		}
		rec.Attrs = append(rec.Attrs, trace.Attr{Key: si.keys[i], Value: m.value(v)})
	}
	if len(maps) > 0 {
		for _, i := range maps {
			for _, p := range ev.Values[i].Pairs {
				rec.Attrs = append(rec.Attrs, trace.Attr{Key: si.keys[i] + "." + p.Key, Value: trace.String(p.Value)})
			}
		}
		rec.Attrs = sortAttrs(rec.Attrs)
	}
	return rec, stacks
}

// sortAttrs sorts a by key in place; of duplicate keys the last wins.
// Appending attributes and sorting once keeps building linear-logarithmic
// where Attrs.Set key by key would be quadratic.
func sortAttrs(a trace.Attrs) trace.Attrs {
	byKey := func(x, y trace.Attr) int { return strings.Compare(x.Key, y.Key) }
	if slices.IsSortedFunc(a, byKey) {
		dup := false
		for i := 1; i < len(a) && !dup; i++ {
			dup = a[i].Key == a[i-1].Key
		}
		if !dup {
			return a
		}
	}
	slices.SortStableFunc(a, byKey)
	out := a[:0]
	for i := range a {
		if len(out) > 0 && out[len(out)-1].Key == a[i].Key {
			out[len(out)-1] = a[i]
			continue
		}
		out = append(out, a[i])
	}
	return out
}

// appendFields appends ev's fields, except the worker id, field skip and
// containers/call chains, as attributes named by keys.
func (m *mapper) appendFields(dst trace.Attrs, ev *Event, si *schemaInfo, keys []string, skip int) trace.Attrs {
	for _, i := range si.order {
		v := &ev.Values[i]
		if i == si.worker || i == skip || v.Type == TypeStringMap || v.Type == TypeStackFrames ||
			v.Type == TypePooledStackFrames {
			continue
		}
		dst = append(dst, trace.Attr{Key: keys[i], Value: m.value(v)})
	}
	return dst
}

func (m *mapper) worker(id uint64) *workerState {
	w := m.workers[id]
	if w == nil {
		w = &workerState{id: id, name: workerName(id)}
		m.workers[id] = w
	}
	return w
}

// event handles one decoded event.
func (m *mapper) event(ev *Event) error {
	si := m.schemaInfo(ev.Schema)
	if m.stream == nil || ev.Stream != m.stream.idx {
		if err := m.endStream(); err != nil {
			return err
		}
		m.stream = &streamState{idx: ev.Stream}
		if owner, ok := m.info.streamOwner[ev.Stream]; ok && !m.scan {
			m.stream.worker = m.worker(owner)
		}
	}
	ts := ev.TimestampNS
	if m.scan {
		m.scanEvent(ev, si)
		if !si.kind.drivesWorker() {
			return nil // the scan pass only runs the worker state machine
		}
	}
	switch si.kind {
	case evPollStart, evPollEnd, evPark, evUnpark, evSpanEnter, evSpanExit:
		id, _ := uintField(ev, si.worker)
		w := m.worker(id)
		m.stream.worker = w
		var err error
		switch si.kind {
		case evPollStart:
			err = m.pollStart(w, ev, si)
		case evPollEnd:
			err = m.pollEnd(w, ev, si)
		case evUnpark:
			err = m.unpark(w, ev, si)
		case evPark:
			err = m.park(w, ev, si)
		case evSpanEnter:
			m.spanEnter(w, ev, si)
		case evSpanExit:
			m.spanExit(w, ev, si)
		}
		w.lastTS = max(w.lastTS, ts)
		return err
	case evSymbol, evCallframe:
		m.acc.attributes++
		if !m.scan {
			b := m.segment()
			if b.symbolRows == 0 && ev.HasTimestamp {
				b.symbolTS = ev.TimestampNS
			}
			b.symbolRows++
		}
		return nil
	case evCPUSample:
		if m.info.placedAt[ev.Offset] {
			return nil // attached to its poll or active period; counted there
		}
		m.addRecord(m.segment(), nil, ev, si)
		return nil
	case evTaskDump:
		// A dump describes an idle task, stamped when it went idle: it
		// belongs to no poll.
		m.addRecord(m.segment(), nil, ev, si)
		return nil
	}
	b, w := m.contextAt(ev)
	m.addRecord(b, w, ev, si)
	return nil
}

// scanEvent collects what the map pass needs from the whole file.
func (m *mapper) scanEvent(ev *Event, si *schemaInfo) {
	fi := m.info
	if ev.HasTimestamp && ev.TimestampNS != 0 && (fi.minTS == 0 || ev.TimestampNS < fi.minTS) &&
		!(si.kind == evSegmentMeta && absTS(ev.TimestampNS) >= epoch2020) {
		fi.minTS = ev.TimestampNS
	}
	switch si.kind {
	case evPollStart, evPollEnd, evPark, evUnpark, evSpanEnter, evSpanExit:
		id, _ := uintField(ev, si.worker)
		if _, ok := fi.streamOwner[ev.Stream]; !ok {
			fi.streamOwner[ev.Stream] = id
		}
		if si.kind != evSpanEnter && si.kind != evSpanExit {
			fi.workers[id] = true
		}
	case evSymbol:
		addr, _ := uintNamed(ev, "addr")
		depth, _ := uintNamed(ev, "inline_depth")
		line, _ := uintNamed(ev, "source_line")
		name := resolvedNamed(ev, "symbol_name")
		file := resolvedNamed(ev, "source_file")
		fi.symbols.add(addr, symbolRow{depth: depth, name: name, file: file, line: line})
	case evCallframe:
		addr, _ := uintNamed(ev, "address")
		name := resolvedNamed(ev, "symbol")
		loc := resolvedNamed(ev, "location")
		fi.symbols.add(addr, symbolRow{name: name, file: loc})
	case evClockSync:
		if fi.clockSource == "" && ev.HasTimestamp {
			rt, _ := uintNamed(ev, "realtime_ns")
			fi.clockOffset = absTS(rt) - absTS(ev.TimestampNS)
			fi.clockSource = "ClockSyncEvent"
		}
	case evSegmentMeta:
		if fi.legacyMeta == 0 && ev.HasTimestamp && absTS(ev.TimestampNS) >= epoch2020 {
			fi.legacyMeta = ev.TimestampNS
		}
	case evCPUSample:
		id, _ := uintField(ev, si.worker)
		rec, stacks := m.newRecord(ev, si)
		fi.samples = append(fi.samples, scannedSample{worker: id, ts: ev.TimestampNS, offset: ev.Offset,
			sample: &pendingSample{rec: rec, stacks: stacks}})
	}
}

// finishScan settles the clock and places the CPU samples.
func (fi *fileInfo) finishScan() {
	if fi.clockSource == "" && fi.legacyMeta != 0 && fi.minTS != 0 {
		// Before ClockSyncEvent, segment metadata was stamped with wall
		// time when the segment was opened: anchor it to the first event.
		fi.clockOffset = absTS(fi.legacyMeta) - absTS(fi.minTS)
		fi.clockSource = "SegmentMetadataEvent"
	}
	fi.placeSamples()
}

// context returns where an event without a worker of its own goes: the
// stream's worker's open poll, else its open active period, else the
// stream's segment (nil in the scan pass, which builds nothing).
func (m *mapper) context() (*builder, *workerState) {
	w := m.stream.worker
	if m.scan {
		return nil, w
	}
	if w != nil {
		if w.poll != nil {
			return w.poll, w
		}
		if w.active != nil {
			return w.active, w
		}
	}
	return m.segment(), w
}

// contextAt is context for an event stamped ts: an event stamped before
// the open poll or active period began (single-stream files interleave
// threads) goes to the segment instead.
func (m *mapper) contextAt(ev *Event) (*builder, *workerState) {
	b, w := m.context()
	if b != nil && b.kind != kindSegment && ev.HasTimestamp && ev.TimestampNS < b.start {
		return m.segment(), w
	}
	return b, w
}

// addRecord attaches a zero-length record of ev to b, inside the innermost
// open tracing span of w that b owns.
func (m *mapper) addRecord(b *builder, w *workerState, ev *Event, si *schemaInfo) {
	m.acc.records++
	if m.scan {
		return
	}
	rec, _ := m.newRecord(ev, si)
	if si.kind == evSegmentMeta && m.info.clockSource == "SegmentMetadataEvent" && ev.TimestampNS == m.info.legacyMeta {
		rec.StartNS = absTS(m.info.minTS)
	}
	m.attach(b, w, rec)
}

func (m *mapper) attach(b *builder, w *workerState, rec *trace.Record) {
	parent := b.span.Root
	if w != nil {
		for i := len(w.spans) - 1; i >= 0; i-- {
			if w.spans[i].owner == b {
				parent = w.spans[i].rec
				break
			}
		}
	}
	parent.Children = append(parent.Children, rec)
	b.note(rec.StartNS, rec.StartNS+rec.DurationNS)
}

func (b *builder) note(start, end int64) {
	if start == noTime {
		return
	}
	s, e := uint64(max(start, 0)), uint64(max(end, start, 0))
	if !b.timed {
		b.minTS, b.maxTS, b.timed = s, e, true
		return
	}
	b.minTS, b.maxTS = min(b.minTS, s), max(b.maxTS, e)
}

// traceID derives a deterministic trace id from the file identity
// (format, base name, size) and a stable per-trace key.
func (m *mapper) traceID(key string) trace.TraceID {
	buf := make([]byte, 0, 64+len(m.file)+len(key))
	buf = append(buf, trace.SourceDial9+"\x00"...)
	buf = append(buf, m.file...)
	buf = append(buf, 0)
	buf = binary.BigEndian.AppendUint64(buf, uint64(m.size))
	buf = append(buf, 0)
	buf = append(buf, key...)
	sum := sha256.Sum256(buf)
	var id trace.TraceID
	copy(id[:], sum[:])
	return id
}

// spanID derives a span id from its trace id: the trace's root span has
// the empty suffix, a poll "/poll/<worker>/<ordinal>".
func spanID(tid trace.TraceID, suffix ...string) trace.SpanID {
	buf := make([]byte, 0, 64)
	buf = append(append(buf, tid[:]...), "span"...)
	for _, s := range suffix {
		buf = append(buf, s...)
	}
	sum := sha256.Sum256(buf)
	id := trace.SpanID(binary.BigEndian.Uint64(sum[:8]))
	if id == 0 {
		id = 1
	}
	return id
}

// newBuilder starts what b collects. A poll's span and an active period's
// unpark span are emitted as built here; a segment's span is never emitted
// (its events become spans of their own) and only holds the records.
func (m *mapper) newBuilder(kind spanKind, key containerKey, w *workerState, stream int, method string, startTS uint64) *builder {
	b := &builder{kind: kind, key: key, worker: w, stream: stream, start: startTS}
	b.span = &trace.Span{Source: trace.SourceDial9, Root: &trace.Record{Method: method, StartNS: absTS(startTS)}}
	switch kind {
	case kindPoll:
		b.span.Type, b.span.Attrs = "dial9."+spanPoll, m.commonAttrs(spanPoll, w, stream, 10)
	case kindActive:
		b.span.Type, b.span.Attrs = "dial9."+spanUnpark, m.commonAttrs(spanUnpark, w, stream, 16)
	}
	return b
}

// commonAttrs are the attributes every dial9 span carries, in key order,
// with room for extra more.
func (m *mapper) commonAttrs(kind string, w *workerState, stream int, extra int) trace.Attrs {
	attrs := make(trace.Attrs, 0, 6+extra)
	attrs = append(attrs,
		trace.Attr{Key: "dial9.kind", Value: trace.String(kind)},
		trace.Attr{Key: "dial9.stream", Value: trace.Int(int64(stream))})
	thread := "stream-" + strconv.Itoa(stream)
	if w != nil {
		thread = w.name
		attrs = append(attrs, trace.Attr{Key: "dial9.worker", Value: uintValue(w.id)})
	}
	return append(attrs,
		trace.Attr{Key: "source.file", Value: trace.String(m.file)},
		trace.Attr{Key: "source.format", Value: trace.String(trace.SourceDial9)},
		trace.Attr{Key: "thread", Value: trace.String(thread)})
}

// segment returns (creating) the trace of the current stream's events
// outside any active period.
func (m *mapper) segment() *builder {
	idx := m.stream.idx
	if m.stream.segment == nil {
		var w *workerState
		if owner, ok := m.info.streamOwner[idx]; ok {
			w = m.worker(owner)
		}
		b := m.newBuilder(kindSegment, containerKey{kind: kindSegment, ord: idx}, w, idx, "stream "+strconv.Itoa(idx), 0)
		b.span.TraceID = m.traceID("segment/" + strconv.Itoa(idx))
		b.span.SpanID = spanID(b.span.TraceID)
		m.stream.segment = b
	}
	return m.stream.segment
}

func (m *mapper) pollStart(w *workerState, ev *Event, si *schemaInfo) error {
	ts := ev.TimestampNS
	if w.pollOpen {
		if err := m.closePoll(w, w.pollStart, true); err != nil {
			return err
		}
	}
	w.pollOpen, w.pollInActive, w.pollOrd, w.pollStart = true, w.activeOpen, w.nextPoll, ts
	w.nextPoll++
	m.acc.boundaries++
	if m.scan {
		return nil
	}
	var parent *builder
	if w.active != nil {
		parent = w.active
	} else {
		parent = m.segment()
	}
	spawn, ok := stringNamed(ev, "spawn_loc")
	method := "poll"
	if ok {
		method = "poll " + spawn
	}
	key := containerKey{kind: kindPoll, worker: w.id, ord: w.pollOrd}
	b := m.newBuilder(kindPoll, key, w, ev.Stream, method, ts)
	b.span.TraceID = parent.span.TraceID
	b.span.SpanID = spanID(parent.span.TraceID, "/poll/", strconv.FormatUint(w.id, 10), "/", strconv.Itoa(w.pollOrd))
	parent.childSpans++
	parent.note(absTS(ts), absTS(ts))
	attrs := m.appendFields(b.span.Attrs, ev, si, si.keys, ev.Schema.FieldIndex("spawn_loc"))
	if ok {
		attrs = append(attrs, trace.Attr{Key: "dial9.spawn_location", Value: trace.String(spawn)})
	}
	b.span.Attrs = sortAttrs(attrs)
	w.poll = b
	return nil
}

func (m *mapper) pollEnd(w *workerState, ev *Event, si *schemaInfo) error {
	if !w.pollOpen {
		b, _ := m.context()
		m.addRecord(b, w, ev, si) // the poll began before the trace
		return nil
	}
	m.acc.boundaries++
	return m.closePoll(w, ev.TimestampNS, false)
}

// closePoll ends w's open poll at end; an unterminated poll (no PollEnd)
// gets zero duration and an open root record.
func (m *mapper) closePoll(w *workerState, end uint64, unterminated bool) error {
	end = max(end, w.pollStart)
	w.pollOpen = false
	m.polls++
	if m.scan {
		m.info.polls[w.id] = append(m.info.polls[w.id], interval{start: w.pollStart, end: end, ord: w.pollOrd})
		return nil
	}
	b := w.poll
	w.poll = nil
	if unterminated {
		if b.timed {
			end = max(end, b.maxTS) // cover what was seen of it
		}
		b.span.Root.Open = true
		b.span.Attrs.Set("dial9.unterminated", trace.Bool(true))
	}
	return m.finish(b, end)
}

func (m *mapper) unpark(w *workerState, ev *Event, si *schemaInfo) error {
	ts := ev.TimestampNS
	if w.activeOpen {
		if err := m.closeActive(w, max(w.lastTS, w.activeStart), true); err != nil {
			return err
		}
	}
	w.activeOpen, w.activeOrd, w.activeStart = true, w.nextActive, ts
	w.nextActive++
	m.acc.boundaries++
	if m.scan {
		return nil
	}
	key := containerKey{kind: kindActive, worker: w.id, ord: w.activeOrd}
	b := m.newBuilder(kindActive, key, w, ev.Stream, w.name+" unpark", ts)
	b.span.TraceID = m.traceID("active/" + strconv.FormatUint(w.id, 10) + "/" + strconv.Itoa(w.activeOrd))
	b.span.SpanID = spanID(b.span.TraceID)
	b.span.Attrs = sortAttrs(m.appendFields(b.span.Attrs, ev, si, si.boundKeys, -1))
	b.unparkCPU, b.hasUnparkCPU = uintNamed(ev, "cpu_time_ns")
	w.active = b
	return nil
}

func (m *mapper) park(w *workerState, ev *Event, si *schemaInfo) error {
	if !w.activeOpen {
		b, _ := m.context()
		m.addRecord(b, w, ev, si) // the worker was active before the trace
		return nil
	}
	m.acc.boundaries++
	if !m.scan {
		b := w.active
		b.parked = true
		b.parkAttrs = m.appendFields(m.commonAttrs(spanPark, w, ev.Stream, 16), ev, si, si.boundKeys, -1)
		if cpu, ok := uintNamed(ev, "cpu_time_ns"); ok && b.hasUnparkCPU && cpu >= b.unparkCPU {
			b.parkAttrs = append(b.parkAttrs, trace.Attr{Key: "dial9.cpu_time_ns", Value: uintValue(cpu - b.unparkCPU)})
		}
	}
	return m.closeActive(w, ev.TimestampNS, false)
}

func (m *mapper) closeActive(w *workerState, end uint64, unterminated bool) error {
	if w.pollOpen && w.pollInActive {
		if err := m.closePoll(w, w.pollStart, true); err != nil {
			return err
		}
	}
	end = max(end, w.activeStart)
	w.activeOpen = false
	m.periods++
	if m.scan {
		m.info.actives[w.id] = append(m.info.actives[w.id], interval{start: w.activeStart, end: end, ord: w.activeOrd})
		return nil
	}
	b := w.active
	w.active = nil
	if unterminated {
		if b.timed {
			end = max(end, b.maxTS)
		}
		b.span.Attrs.Set("dial9.unterminated", trace.Bool(true))
	}
	return m.finish(b, end)
}

func (m *mapper) spanEnter(w *workerState, ev *Event, si *schemaInfo) {
	m.acc.records++
	if m.scan {
		return
	}
	b, _ := m.context()
	rec, _ := m.newRecord(ev, si)
	rec.Method = si.callsite
	m.attach(b, w, rec)
	if b.kind != kindPoll {
		if b.tracing == nil {
			b.tracing = map[*trace.Record]bool{}
		}
		b.tracing[rec] = true
	}
	if len(w.spans) >= maxOpenSpans {
		// Deeper nesting stays a zero-length record (its exit will be one
		// too), keeping record trees well inside trace.MaxDepth.
		rec.Open = true
		return
	}
	id, _ := uintNamed(ev, "span_id")
	w.spans = append(w.spans, openSpan{rec: rec, id: id, owner: b})
}

// spanExit closes the innermost open record of the same span id; records
// entered inside it and never exited are closed with it (left open).
func (m *mapper) spanExit(w *workerState, ev *Event, si *schemaInfo) {
	id, _ := uintNamed(ev, "span_id")
	b, _ := m.context()
	at := -1
	for i := len(w.spans) - 1; i >= 0; i-- {
		if w.spans[i].id == id && w.spans[i].owner == b {
			at = i
			break
		}
	}
	if at < 0 {
		m.addRecord(b, w, ev, si) // exit of a span entered before the trace
		return
	}
	m.acc.records++ // the exit completes its enter's record
	if m.scan {
		return
	}
	end := recTime(ev)
	for i := len(w.spans) - 1; i > at; i-- {
		closeOpen(w.spans[i].rec, end)
	}
	rec := w.spans[at].rec
	if end != noTime && rec.StartNS != noTime {
		rec.DurationNS = max(end-rec.StartNS, 0)
	}
	rec.Attrs = sortAttrs(m.appendFields(rec.Attrs, ev, si, si.keys, -1)) // usually the enter's fields again
	b.note(rec.StartNS, rec.StartNS+rec.DurationNS)
	w.spans = w.spans[:at]
}

func closeOpen(rec *trace.Record, end int64) {
	rec.Open = true
	if end != noTime && rec.StartNS != noTime {
		rec.DurationNS = max(end-rec.StartNS, 0)
	}
}

// finish closes the tracing-span records b owns and emits what b built:
// a poll as one span; an active period or a segment as the spans it is
// made of (see explode).
func (m *mapper) finish(b *builder, end uint64) error {
	endNS := absTS(end)
	if b.kind == kindSegment {
		if b.timed {
			b.start, end = b.minTS, b.maxTS
		}
		endNS = absTS(end)
	}
	if b.worker != nil && len(b.worker.spans) > 0 {
		keep := b.worker.spans[:0]
		for _, s := range b.worker.spans {
			if s.owner == b {
				closeOpen(s.rec, endNS)
				continue
			}
			keep = append(keep, s)
		}
		b.worker.spans = keep
	}
	placed := m.info.placed[b.key]
	if b.kind != kindSegment {
		for _, p := range placed {
			rec := p.rec
			for _, st := range p.stacks {
				rec.Attrs.Set(st.key, m.info.symbols.callchain(st.frames))
			}
			b.span.Root.Children = append(b.span.Root.Children, rec)
			m.acc.records++
		}
		delete(m.info.placed, b.key)
	}
	// Samples placed by time, per-CPU sample buffers and task dumps
	// arrive out of order: keep the children in time order.
	byStart := func(x, y *trace.Record) int { return cmp.Compare(x.StartNS, y.StartNS) }
	if !slices.IsSortedFunc(b.span.Root.Children, byStart) {
		slices.SortStableFunc(b.span.Root.Children, byStart)
	}
	start := absTS(b.start)
	if b.kind != kindPoll {
		return m.explode(b, start, endNS)
	}
	dur := max(endNS-start, 0)
	sp := b.span
	sp.StartNS = satAdd(start, m.info.clockOffset)
	sp.DurationNS = dur
	relativize(sp.Root, start, dur, true)
	return m.emitSpan(sp)
}

// explode emits an active period or a stream segment as a trace of the
// spans it is made of; the polls in it were emitted as they ended. An
// active period or a segment is not a span itself: it has no source event
// of its own with a duration, and a span lasting from unpark to park would
// be found by every duration search meant for polls. So:
//
//   - the WorkerUnparkEvent is a zero-length span (dial9.unpark.* fields;
//     dial9.unterminated when no park followed);
//   - every other event in it outside the polls is a zero-length span of
//     its own, in time order, whose root record is the event; a tracing
//     span entered outside any poll is a span lasting as it did, with what
//     happened inside it as nested records;
//   - the WorkerParkEvent is a zero-length span with the period's totals:
//     dial9.active_ns (unpark to park), dial9.cpu_time_ns, dial9.polls;
//   - a segment's symbol table rows are counted on one zero-length span.
func (m *mapper) explode(b *builder, start, end int64) error {
	tid := b.span.TraceID
	off := m.info.clockOffset
	spans := b.childSpans
	children := b.span.Root.Children
	b.span.Root.Children = nil
	if b.kind == kindActive {
		sp := b.span
		sp.StartNS = satAdd(start, off)
		relativize(sp.Root, start, 0, true)
		if err := m.emitSpan(sp); err != nil {
			return err
		}
		spans++
	}
	for i, c := range children {
		at := c.StartNS
		if at == noTime {
			at = start // an event without a timestamp sits where its trace begins
		}
		kind := spanEvent
		if b.tracing[c] {
			kind = spanTracing
		}
		sp := &trace.Span{TraceID: tid, SpanID: spanID(tid, "/event/", strconv.Itoa(i)),
			Source: trace.SourceDial9, Type: "dial9." + kind, Root: c,
			StartNS: satAdd(at, off), DurationNS: max(c.DurationNS, 0),
			Attrs: m.commonAttrs(kind, b.worker, b.stream, 0)}
		relativize(c, at, sp.DurationNS, true)
		if err := m.emitSpan(sp); err != nil {
			return err
		}
		spans++
	}
	if b.kind == kindActive && b.parked {
		attrs := append(b.parkAttrs,
			trace.Attr{Key: "dial9.active_ns", Value: trace.Int(max(end-start, 0))},
			trace.Attr{Key: "dial9.polls", Value: trace.Int(b.childSpans)})
		sp := &trace.Span{TraceID: tid, SpanID: spanID(tid, "/park"),
			Source: trace.SourceDial9, Type: "dial9." + spanPark,
			Root:    &trace.Record{Method: b.worker.name + " park", Calls: 1},
			StartNS: satAdd(end, off), Attrs: sortAttrs(attrs)}
		if err := m.emitSpan(sp); err != nil {
			return err
		}
		spans++
	}
	if b.symbolRows > 0 {
		at := start
		if b.symbolTS != 0 {
			at = absTS(b.symbolTS)
		}
		attrs := append(m.commonAttrs(spanSymbolTable, b.worker, b.stream, 1),
			trace.Attr{Key: "dial9.symbol_table_entries", Value: trace.Int(b.symbolRows)})
		sp := &trace.Span{TraceID: tid, SpanID: spanID(tid, "/symbols"),
			Source: trace.SourceDial9, Type: "dial9." + spanSymbolTable,
			Root:    &trace.Record{Method: "symbol table", Calls: 1},
			StartNS: satAdd(at, off), Attrs: sortAttrs(attrs)}
		if err := m.emitSpan(sp); err != nil {
			return err
		}
		spans++
	}
	if spans > 0 {
		m.traces++
	}
	return nil
}

// emitSpan fills sp's summary, counts it and hands it on.
func (m *mapper) emitSpan(sp *trace.Span) error {
	sp.FillSummary()
	m.spans++
	m.records += sp.Recs
	return m.emit(sp)
}

func satAdd(a, b int64) int64 {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// relativize turns absolute record times into offsets from the span start,
// clamped into the span (a clamped record keeps its source time in
// dial9.timestamp_ns), and sets each record's Calls to its subtree size.
func relativize(r *trace.Record, start, dur int64, root bool) int64 {
	if root {
		r.StartNS, r.DurationNS = 0, dur
	} else {
		abs := r.StartNS
		switch {
		case abs == noTime:
			r.StartNS = 0
		case abs-start < 0 || abs-start > dur:
			r.Attrs.Set("dial9.timestamp_ns", trace.Int(abs))
			r.StartNS = min(max(abs-start, 0), dur)
		default:
			r.StartNS = abs - start
		}
		r.DurationNS = min(r.DurationNS, dur-r.StartNS)
	}
	calls := int64(1)
	for _, c := range r.Children {
		calls += relativize(c, start, dur, false)
	}
	r.Calls = calls
	return calls
}

// endStream emits the segment trace of the current stream.
func (m *mapper) endStream() error {
	if m.stream == nil || m.stream.segment == nil {
		return nil
	}
	b := m.stream.segment
	m.stream.segment = nil
	if m.scan {
		return nil
	}
	return m.finish(b, b.maxTS)
}

// flush ends everything still open at the end of the input (or at an
// undecodable frame), in worker order so that ids stay deterministic.
func (m *mapper) flush() error {
	ids := make([]uint64, 0, len(m.workers))
	for id := range m.workers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		w := m.workers[id]
		if w.pollOpen {
			if err := m.closePoll(w, w.pollStart, true); err != nil {
				return err
			}
		}
		if w.activeOpen {
			if err := m.closeActive(w, max(w.lastTS, w.activeStart), true); err != nil {
				return err
			}
		}
	}
	return m.endStream()
}
