// Package export renders stored traces for viewers outside ztsd: the Chrome
// Trace Event format (Chrome writes it; Perfetto UI and chrome://tracing
// open it) and a self-contained SVG timeline for people who have no viewer
// at hand. It reads trace.Span trees as the client package returns them
// (root spans with child spans in Span.Children) and knows nothing about
// sockets or storage. Trace JSON export needs no code here: it is the
// daemon's own output (client.GetRaw), which `ztsctl import --format json`
// reads back.
//
// # Lanes
//
// Both formats draw records on lanes, one per thread of the source. A
// span's thread is the first of its attributes "thread", "wtf.zone",
// "dial9.worker" (as "worker-N"), "atf.thread_id" (as "thread N"); a span
// with none of them gets a lane of its own named after its span id. All
// records of one span share its lane, and so do the spans of a trace that
// name the same thread.
//
// Viewers require the events of one lane to nest properly: two intervals on
// a lane are either disjoint or one contains the other. Importers produce
// properly nested trees, but spans of different traces may overlap on one
// thread (a dial9 stream segment and a worker's active periods) and some
// sources record overlapping siblings. So records are placed on a lane in
// time order, each preferably on its parent's lane; a record that would
// overlap an open record without nesting inside it goes to an overflow lane
// of the same thread ("worker-0 #2"). Properly nested input therefore keeps
// one lane per thread and its nesting exactly; the layout never moves a
// record in time and never drops one.
//
// Two boundary rules decide what touching intervals mean: an interval that
// starts exactly where an open one ends is a later sibling, unless it has
// zero length, in which case it is the last thing inside.
//
// # Chrome Trace Event format
//
// Chrome writes one JSON object {"traceEvents":[...], "displayTimeUnit":"ns",
// "otherData":{...}}, one event per line:
//
//   - one process (pid) per source file (the root span's "source.format" and
//     "source.file" attributes; for ATF, whose files are per thread, per
//     session and "atf.pid"), or per trace when the trace has no source
//     file; its name is in a "process_name" metadata event ("M");
//   - one thread (tid, numbered per process) per lane, named by a
//     "thread_name" metadata event and ordered by "thread_sort_index";
//   - every record is one complete event ("X") named by its method, with
//     ts and dur in microseconds written exactly from nanoseconds (three
//     decimals at most), absolute: ts is the span start plus the record's
//     offset. A zero-length record (an instant in its source) is an X event
//     with dur 0 rather than an "i" event, so that every record is exactly
//     one X event and keeps its place in the nesting; Perfetto draws such
//     slices as chevrons. A span without a root record is one X event
//     named by its type, covering the span;
//   - args are the record's attributes as JSON values written as Trace
//     JSON writes them (trace.AppendValueJSON: NaN and ±Inf as
//     {"$float":"NaN"}, {"$float":"Infinity"}, {"$float":"-Infinity"}),
//     plus reserved entries:
//     "ztsd.exception" (class, message, stack as "Class.method(File:line)"
//     strings, cause), "ztsd.calls" when a record stands for more than one
//     call, "ztsd.open" for a record that never ended, and on the root
//     record of each span "ztsd.span" (trace and span ids, type, source,
//     counts and the span's attributes). An attribute whose key equals a
//     reserved entry written for the same event is written as
//     "<key> (attribute)";
//   - a record with an exception has cname "terrible" (red in
//     chrome://tracing);
//   - events are written in input order: traces as given, each trace's
//     spans depth first (a span's records depth first, then its child
//     spans), metadata first.
//
// # SVG timeline
//
// SVG draws one trace (its root spans and their child spans) as a
// standalone SVG document: a header, a time axis with ticks relative to the
// first record, one band per lane with records stacked by nesting depth,
// records with exceptions in red, zero-length records as diamonds, records
// that never ended with a dashed outline, and a <title> tooltip on every
// record with its method, offset, duration, calls, attributes and
// exception. All text is escaped and characters XML cannot carry are
// replaced by U+FFFD, so any method name or attribute yields a well-formed
// document. The output is bounded: at most SVGOptions.MaxRecords records
// are drawn (the shallowest, longest first) and the picture says how many
// were left out; tooltips list at most maxTooltipAttrs attributes of at
// most maxTooltipValue characters each.
package export

//go:generate go test -run ^TestDocsTimeline$ -update-docs
