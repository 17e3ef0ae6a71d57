package migrate

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// Upgrader decodes a chunk payload written in one store format version
// into current trace values. It must treat payload as hostile (bound every
// allocation by lim, return an error, never panic) and must not retain it:
// the buffer is reused for the next chunk.
type Upgrader func(payload []byte, lim trace.Limits) ([]*trace.Span, error)

// Upgraders returns the readers of every store format version this build
// can migrate, keyed by the format version of config.props. Version 1
// (storedir.FormatVersion) is the current and only released one. See the
// package documentation for how the next version plugs in.
func Upgraders() map[int]Upgrader {
	return map[int]Upgrader{
		storedir.FormatVersion: trace.DecodeChunk,
	}
}

// Phase names a stage of a migration, as passed to Options.Progress.
type Phase string

// The phases, in order. Plan runs only when filters are set.
const (
	PhasePlan   Phase = "plan"   // reading the sources to decide which traces the filters keep
	PhaseCopy   Phase = "copy"   // copying pieces into the target
	PhaseVerify Phase = "verify" // re-reading the sources and the target
	PhaseReads  Phase = "reads"  // reading every trace back through the target's indexes
)

// Options describe a migration.
type Options struct {
	// Sources are the data directories to read, in order: where they hold
	// different versions of a piece, the last one in this order is the
	// target's current version. The same directory may be named twice (its
	// pieces are then duplicates, except that its superseded versions are
	// written again, each before its newer one).
	Sources []string
	// Target is the new data directory. It must not exist, be empty, or
	// hold an interrupted (or finished) migration with the same options.
	// Ignored with InPlace.
	Target string
	// InPlace migrates Sources[0] into itself (through
	// Sources[0]+".migrate-new"), merging any further sources into it.
	InPlace bool

	// Compression and Checksums of the target's data files; nil keeps
	// those of the first source store.
	Compression *chunk.Compression
	Checksums   *bool

	// SinceNS and UntilNS keep traces whose earliest span starts in
	// [SinceNS, UntilNS); zero is unbounded.
	SinceNS, UntilNS int64
	// DropAttrs drops every trace with a span that carries one of these
	// (span attributes and root record attributes, compared as text).
	DropAttrs []trace.Attr

	// BatchBytes is how many bytes of source chunk payloads are copied
	// between checkpoints; zero means DefaultBatchBytes.
	BatchBytes int
	// MaxStoreSize bounds a target store's data file (storedir rotates to
	// a new store beyond it); zero means storedir's default.
	MaxStoreSize int64
	// Limits bound the decoding of source payloads; zero fields mean
	// trace.DefaultLimits.
	Limits trace.Limits
	// Upgraders read each store format version; nil means Upgraders().
	Upgraders map[int]Upgrader
	// Progress, when set, is called with the work done so far in a phase
	// and the phase's total (bytes for plan, copy and verify; pieces for
	// reads).
	Progress func(phase Phase, done, total int64)
	// Logger receives what migrate and the target's storedir log; nil
	// discards it.
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Hook is a test seam: it is called after each durable step with the
	// step's name (the Step constants); an error stops the migration
	// there, as a crash would, and is returned.
	Hook func(step string) error
}

// DefaultBatchBytes is the default amount of source payload copied between
// checkpoints.
const DefaultBatchBytes = 4 << 20

// Durable steps, as passed to Options.Hook.
const (
	StepStarted     = "started"      // parameters recorded in the state
	StepPlanned     = "planned"      // the plan is complete
	StepAppended    = "appended"     // a batch reached the target, not yet checkpointed
	StepCheckpoint  = "checkpoint"   // a batch and its checkpoint are durable
	StepRotated     = "rotated"      // the target started a store for the next source store
	StepCopied      = "copied"       // every source chunk was copied
	StepVerified    = "verified"     // verification passed and was recorded
	StepReported    = "reported"     // .migrate-report.json written
	StepRenamedOld  = "renamed old"  // --in-place: DIR → DIR.migrate-old
	StepRenamedNew  = "renamed new"  // --in-place: DIR.migrate-new → DIR
	StepRemovedOld  = "removed old"  // --in-place: DIR.migrate-old removed
	StepStateMarked = "state marked" // .migrate renamed to .migrate.deleting
)

// Errors callers branch on (with errors.Is).
var (
	// ErrUsage marks options that cannot describe a migration.
	ErrUsage = errors.New("invalid migration options")
	// ErrTargetNotEmpty: the target holds something that is not a
	// migration with these options.
	ErrTargetNotEmpty = errors.New("target data directory is not empty")
	// ErrParamsChanged: the target holds an interrupted migration with
	// different options; re-run with the same ones or remove the target.
	ErrParamsChanged = errors.New("the target holds a migration with different options")
	// ErrSourceChanged: a source store changed since the migration started.
	ErrSourceChanged = errors.New("a source changed since the migration started")
	// ErrVerifyFailed: the target does not hold what the sources say it
	// should; the report lists the problems.
	ErrVerifyFailed = errors.New("verification failed")
	// ErrUnknownVersion: a source store has a format version no Upgrader
	// reads.
	ErrUnknownVersion = errors.New("unknown store format version")
)

func (o *Options) fill() {
	if o.BatchBytes <= 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	if o.Limits == (trace.Limits{}) {
		o.Limits = trace.DefaultLimits()
	}
	if o.Upgraders == nil {
		o.Upgraders = Upgraders()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

func (o *Options) hook(step string) error {
	if o.Hook == nil {
		return nil
	}
	if err := o.Hook(step); err != nil {
		return fmt.Errorf("after step %q: %w", step, err)
	}
	return nil
}

func (o *Options) progress(p Phase, done, total int64) {
	if o.Progress != nil {
		o.Progress(p, done, total)
	}
}

func (o *Options) filtered() bool {
	return o.SinceNS != 0 || o.UntilNS != 0 || len(o.DropAttrs) > 0
}

// ParseDropAttr parses "key=value" (the value may be empty or contain '=').
func ParseDropAttr(s string) (trace.Attr, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return trace.Attr{}, fmt.Errorf("%w: drop attribute %q: want key=value", ErrUsage, s)
	}
	return trace.Attr{Key: k, Value: trace.String(v)}, nil
}

func dropAttrStrings(attrs []trace.Attr) []string {
	out := make([]string, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, a.Key+"="+a.Value.Text())
	}
	sort.Strings(out)
	return out
}

// absDir returns the absolute, symlink-resolved form of a directory path
// (of its longest existing prefix, for a path that does not exist yet).
func absDir(p string) (string, error) {
	a, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	a = filepath.Clean(a)
	rest := ""
	for cur := a; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest), nil
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return a, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// within reports whether p is dir or inside it (both absolute and clean).
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// validate checks o and resolves the paths: the distinct source
// directories and the target directory.
func (o *Options) validate() (sources []string, target string, err error) {
	if len(o.Sources) == 0 {
		return nil, "", fmt.Errorf("%w: no source data directory", ErrUsage)
	}
	if o.InPlace && o.Target != "" {
		return nil, "", fmt.Errorf("%w: a target directory and in-place are mutually exclusive", ErrUsage)
	}
	if !o.InPlace && o.Target == "" {
		return nil, "", fmt.Errorf("%w: no target data directory (or in-place)", ErrUsage)
	}
	if o.SinceNS != 0 && o.UntilNS != 0 && o.UntilNS <= o.SinceNS {
		return nil, "", fmt.Errorf("%w: until (%d) is not after since (%d)", ErrUsage, o.UntilNS, o.SinceNS)
	}
	if o.Compression != nil {
		switch *o.Compression {
		case chunk.None, chunk.LZ4, chunk.Zlib, chunk.Zstd:
		default:
			return nil, "", fmt.Errorf("%w: compression %v", ErrUsage, *o.Compression)
		}
	}
	for _, a := range o.DropAttrs {
		if a.Key == "" {
			return nil, "", fmt.Errorf("%w: drop attribute with an empty key", ErrUsage)
		}
	}
	for _, s := range o.Sources {
		a, err := absDir(s)
		if err != nil {
			return nil, "", fmt.Errorf("source %s: %w", s, err)
		}
		sources = append(sources, a)
	}
	if o.InPlace {
		return sources, sources[0] + newSuffix, nil
	}
	target, err = absDir(o.Target)
	if err != nil {
		return nil, "", fmt.Errorf("target %s: %w", o.Target, err)
	}
	for _, s := range sources {
		if within(target, s) || within(s, target) {
			return nil, "", fmt.Errorf("%w: target %s overlaps source %s (use in-place to rewrite a directory)", ErrUsage, target, s)
		}
	}
	return sources, target, nil
}

// checkSourceDir refuses a source that is missing or is a store directory.
func checkSourceDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("source %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: source %s is not a directory", ErrUsage, dir)
	}
	for _, n := range []string{dataFileName, propsFileName} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			return fmt.Errorf("%w: source %s is a store directory; name its data directory %s", ErrUsage, dir, filepath.Dir(dir))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, stateDirName)); err == nil {
		return fmt.Errorf("%w: source %s is the target of an unfinished migration; re-run that one to completion first", ErrUsage, dir)
	}
	return nil
}
