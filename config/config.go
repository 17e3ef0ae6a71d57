package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/ztsd/ztsd/trace"
)

// MaxConfigSize bounds the size of a TOML configuration file.
const MaxConfigSize = 1 << 20

// Durability policies, the values of Config.Sync.
const (
	SyncAlways = "always" // fsync per request
	SyncBatch  = "batch"  // group commit: concurrent requests share one fsync
	SyncNone   = "none"   // never fsync (tests, bulk import)
)

// Log levels and formats, the values of Config.LogLevel and Config.LogFormat.
const (
	LogDebug = "debug"
	LogInfo  = "info"
	LogWarn  = "warn"
	LogError = "error"

	LogText = "text"
	LogJSON = "json"
)

// Config is the daemon's configuration, decoded from TOML. Every key is
// optional; a missing key keeps its Default value.
type Config struct {
	// DataDir holds the store directories and the LOCK file.
	DataDir string `toml:"data_dir"`
	// Socket is the path of the unix socket serving the API (at most 107
	// bytes, the limit of sun_path).
	Socket string `toml:"socket"`
	// SocketMode is the socket file's permission bits, as octal digits
	// ("0660", at most 0777; see ParseFileMode).
	SocketMode string `toml:"socket_mode"`
	// SocketGroup, if set, is the group (name or numeric id) given to the
	// socket file; "" keeps the daemon's group.
	SocketGroup string `toml:"socket_group"`
	// Listen, if set, also serves the API over TCP on this loopback address
	// ("127.0.0.1:PORT", "[::1]:PORT", "localhost:PORT"). TCP peers have no
	// credentials, so Access does not apply to them.
	Listen string `toml:"listen"`
	// UI serves the web UI (/search, /trace/{id}, /stores) on the TCP
	// listener; it acts only when Listen is set.
	UI bool `toml:"ui"`
	// OTLPGRPCListen, if set, accepts OTLP/gRPC trace exports on this
	// address (any host, e.g. "0.0.0.0:4317"), or on a unix socket
	// ("unix:/path").
	OTLPGRPCListen string `toml:"otlp_grpc_listen"`
	// Sync is the durability policy: SyncAlways, SyncBatch or SyncNone.
	Sync string `toml:"sync"`
	// BatchMaxDelay is how long, under SyncBatch, the committer waits after
	// a group's first write for others to join its fsync (0 to 1s): every
	// write may wait this long. 0 sets no fixed delay: the writes that
	// arrived during the previous fsync share the next one, and the
	// committer waits for more only while recently more writes were in
	// flight at once than the group holds, at most about one recent fsync
	// or twice the recent spread of the writers' arrivals (never over
	// 2 ms); a lone writer never waits.
	BatchMaxDelay Duration `toml:"batch_max_delay"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `toml:"log_level"`
	// LogFormat is text or json.
	LogFormat string `toml:"log_format"`
	// Pprof serves net/http/pprof under /debug/pprof/ on the socket API.
	Pprof bool `toml:"pprof"`
	// QueryOnly runs the daemon with no local writes: it serves the API
	// over every node's stores in [object_store]'s bucket (ztsd --query).
	QueryOnly bool `toml:"query_only"`

	Store     StoreConfig     `toml:"store"`
	Retention RetentionConfig `toml:"retention"`
	Limits    LimitsConfig    `toml:"limits"`
	Access    AccessConfig    `toml:"access"`
	Zorka     ZorkaConfig     `toml:"zorka"`
	// ObjectStore tiers sealed stores to an S3-compatible bucket; it is
	// off while Bucket is empty.
	ObjectStore ObjectStoreConfig `toml:"object_store"`
}

// ObjectStoreConfig is where sealed stores are uploaded and read from:
// <prefix>/<node>/<store id>/ in an S3-compatible bucket. Credentials come
// from the AWS SDK's standard chain (AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY in the environment, or a shared credentials file,
// Profile selecting its section); they are never part of this file.
type ObjectStoreConfig struct {
	// Endpoint is the S3 API's URL ("https://s3.example.com",
	// "http://127.0.0.1:7070"); empty uses AWS's endpoint for Region.
	Endpoint string `toml:"endpoint"`
	// Bucket holds the stores; empty turns tiering off.
	Bucket string `toml:"bucket"`
	// Prefix is prepended to every key ("ztsd" puts stores under ztsd/).
	Prefix string `toml:"prefix"`
	// Region is the bucket's region (signing needs one; "us-east-1" for
	// most S3-compatible servers).
	Region string `toml:"region"`
	// PathStyle addresses the bucket as endpoint/bucket/key instead of
	// bucket.endpoint/key (most self-hosted servers need it).
	PathStyle bool `toml:"path_style"`
	// Profile names the section of the shared credentials file to use;
	// empty uses the SDK's default.
	Profile string `toml:"profile"`
	// TLSCAFile, if set, is a PEM file of CA certificates trusted for the
	// endpoint (besides the system's).
	TLSCAFile string `toml:"tls_ca_file"`
	// TLSInsecureSkipVerify accepts any certificate (tests only).
	TLSInsecureSkipVerify bool `toml:"tls_insecure_skip_verify"`
	// Node names this daemon's stores in the bucket; empty uses the host
	// name. Every ingesting daemon sharing a bucket needs its own.
	Node string `toml:"node"`
	// LocalMaxStores, LocalMaxTotalSize and LocalMaxAge remove the local
	// copies of the oldest sealed stores whose upload is verified while any
	// is exceeded (0 means unlimited); [retention] then applies to the
	// bucket.
	LocalMaxStores    int      `toml:"local_max_stores"`
	LocalMaxTotalSize Size     `toml:"local_max_total_size"`
	LocalMaxAge       Duration `toml:"local_max_age"`
	// CacheDir holds remote stores' index files (default
	// <data_dir>/remote-cache); CacheMaxSize bounds it (LRU).
	CacheDir     string `toml:"cache_dir"`
	CacheMaxSize Size   `toml:"cache_max_size"`
	// DiscoverInterval is how often the bucket's manifests are listed to
	// find stores other nodes uploaded.
	DiscoverInterval Duration `toml:"discover_interval"`
}

// Enabled reports whether tiering to a bucket is configured.
func (o ObjectStoreConfig) Enabled() bool { return o.Bucket != "" }

// StoreConfig shapes new stores; existing stores keep what their
// config.props says.
type StoreConfig struct {
	// Compression of chunks: none, lz4, zlib or zstd.
	Compression string `toml:"compression"`
	// Checksums adds a CRC32 to every chunk.
	Checksums bool `toml:"checksums"`
	// MaxStoreSize rotates to a new store once the data file reaches this
	// size (at least ChunkTargetSize).
	MaxStoreSize Size `toml:"max_store_size"`
	// MaxStoreAge rotates to a new store once the open one is this old;
	// 0 disables age-based rotation.
	MaxStoreAge Duration `toml:"max_store_age"`
	// ChunkTargetSize is the uncompressed size at which a chunk is cut
	// (4KiB to 64MiB).
	ChunkTargetSize Size `toml:"chunk_target_size"`
}

// RetentionConfig deletes the oldest sealed stores while any limit is
// exceeded; 0 means unlimited.
type RetentionConfig struct {
	MaxStores    int      `toml:"max_stores"`
	MaxTotalSize Size     `toml:"max_total_size"`
	MaxAge       Duration `toml:"max_age"`
}

// maxSearchLimit is storedir.MaxSearchLimit (config does not import storedir).
const maxSearchLimit = 10000

// LimitsConfig bounds what one request may make the daemon decode.
type LimitsConfig struct {
	MaxBodySize         Size `toml:"max_body_size"`          // request body, after content decoding
	MaxTracesPerRequest int  `toml:"max_traces_per_request"` // traces (spans) in one request
	MaxDepth            int  `toml:"max_depth"`              // nesting of records (1 to 1000)
	MaxAttrs            int  `toml:"max_attrs"`              // attributes on one span or record
	MaxRecordsPerSpan   int  `toml:"max_records_per_span"`   // method-call records in one span
	MaxStringSize       Size `toml:"max_string_size"`        // one string (name, attribute, message)
	MaxSearchLimit      int  `toml:"max_search_limit"`       // largest limit= a search may ask for

	// ReadTimeout bounds reading one request, headers and body; a client
	// sending slower is disconnected.
	ReadTimeout Duration `toml:"read_timeout"`
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout Duration `toml:"idle_timeout"`
	// MaxConnections caps the API connections open at once (unix socket
	// and TCP together); past it a client gets 503 "too many connections".
	MaxConnections int `toml:"max_connections"`
	// MemoryBudget is the daemon's memory budget: in-flight request bodies
	// (BodyMemoryFactor times their size), Zorka session symbol tables and
	// the memory held after start-up reserve against it; past it requests
	// get 503 with Retry-After. It is also the Go runtime's soft memory
	// limit. At least 4 times max_body_size.
	MemoryBudget Size `toml:"memory_budget"`
	// IndexCacheSize is the one block cache every local store's indexes
	// (meta/ and text/) share: their bloom filters, index blocks and
	// recently read data blocks. 0 means a quarter of MemoryBudget; else
	// 1MiB to MemoryBudget. It is memory outside the Go heap (Pebble's),
	// on top of what the memory budget counts.
	IndexCacheSize Size `toml:"index_cache_size"`
}

// BodyMemoryFactor is server.BodyMemoryFactor (config does not import
// server): what a request body is accounted as per byte.
const BodyMemoryFactor = 4

// AccessConfig lists who, besides root and the daemon's own uid (always
// allowed), may use the socket API; peers are identified by their socket
// credentials. Write access implies read access.
type AccessConfig struct {
	ReadUIDs  []uint32 `toml:"read_uids"`
	WriteUIDs []uint32 `toml:"write_uids"`
	ReadGIDs  []uint32 `toml:"read_gids"`
	WriteGIDs []uint32 `toml:"write_gids"`
}

// CanRead reports whether a peer with uid and groups gids may read, for a
// daemon running as daemonUID.
func (a AccessConfig) CanRead(uid uint32, gids []uint32, daemonUID uint32) bool {
	return a.CanWrite(uid, gids, daemonUID) || slices.Contains(a.ReadUIDs, uid) || containsAny(a.ReadGIDs, gids)
}

// CanWrite reports whether a peer with uid and groups gids may write, for a
// daemon running as daemonUID.
func (a AccessConfig) CanWrite(uid uint32, gids []uint32, daemonUID uint32) bool {
	return uid == 0 || uid == daemonUID || slices.Contains(a.WriteUIDs, uid) || containsAny(a.WriteGIDs, gids)
}

func containsAny(set, xs []uint32) bool {
	for _, x := range xs {
		if slices.Contains(set, x) {
			return true
		}
	}
	return false
}

// ZorkaConfig is the Zorka agent protocol's settings.
type ZorkaConfig struct {
	// SessionIdleTimeout forgets an agent session (and its string
	// dictionary) after this long without a request.
	SessionIdleTimeout Duration `toml:"session_idle_timeout"`
}

// Default returns the built-in configuration: what ztsd runs with when no
// file is given, and the base that a file overrides. Its paths are relative to
// the working directory; deploy/ztsd.toml sets the systemd ones.
func Default() Config {
	return Config{
		DataDir:       "./ztsd-data",
		Socket:        "./ztsd.sock",
		SocketMode:    "0660",
		UI:            true,
		Sync:          SyncBatch,
		BatchMaxDelay: 0,
		LogLevel:      LogInfo,
		LogFormat:     LogText,
		Store: StoreConfig{
			Compression:     CompressionZstd,
			Checksums:       true,
			MaxStoreSize:    1 << 30,
			MaxStoreAge:     Duration(24 * time.Hour),
			ChunkTargetSize: 1 << 20,
		},
		Limits: LimitsConfig{
			MaxBodySize:         64 << 20,
			MaxTracesPerRequest: 100000,
			MaxDepth:            512,
			MaxAttrs:            1024,
			MaxRecordsPerSpan:   1000000,
			MaxStringSize:       1 << 20,
			MaxSearchLimit:      10000,
			ReadTimeout:         Duration(time.Minute),
			IdleTimeout:         Duration(2 * time.Minute),
			MaxConnections:      4096,
			MemoryBudget:        1 << 30,
		},
		Zorka: ZorkaConfig{SessionIdleTimeout: Duration(2 * time.Minute)},
		ObjectStore: ObjectStoreConfig{
			Region:           "us-east-1",
			CacheMaxSize:     1 << 30,
			DiscoverInterval: Duration(30 * time.Second),
		},
	}
}

// Load reads the TOML file at path over Default() and validates the result.
func Load(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, err
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads TOML from r over Default() and validates the result; name (a
// file name) prefixes errors. Problems with keys are *KeyError values naming
// the key and, when it can be found, its line: unknown keys (also keys that
// differ from a known one only in case), values that do not decode, and
// values that Validate rejects.
func Parse(r io.Reader, name string) (Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxConfigSize+1))
	if err != nil {
		return Config{}, fmt.Errorf("%s: reading: %w", name, err)
	}
	if len(data) > MaxConfigSize {
		return Config{}, fmt.Errorf("%s: larger than %d bytes", name, MaxConfigSize)
	}
	c := Default()
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&c)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return Config{}, &KeyError{File: name, Line: pe.Position.Line, Key: pe.LastKey, Err: errors.New(pe.Message)}
		}
		if m := tomlDecodeErrorRE.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return Config{}, &KeyError{File: name, Line: line, Key: m[2], Err: errors.New(m[3])}
		}
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	lines := tomlKeyLines(data)
	if errs := unknownKeys(md); len(errs) > 0 {
		for _, ke := range errs {
			ke.File, ke.Line = name, lines[ke.Key]
		}
		return Config{}, joinKeyErrors(errs)
	}
	c.normalize()
	if errs := c.validate(); len(errs) > 0 {
		for _, ke := range errs {
			ke.File, ke.Line = name, lines[ke.Key]
		}
		return Config{}, joinKeyErrors(errs)
	}
	return c, nil
}

// tomlDecodeErrorRE matches the errors the toml decoder returns as plain
// text (type mismatches): `toml: line 3 (last key "store.checksums"): ...`.
var tomlDecodeErrorRE = regexp.MustCompile(`^toml: (?:line (\d+) )?\(last key "([^"]*)"\): (.*)$`)

func joinKeyErrors(errs []*KeyError) error {
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return errors.Join(all...)
}

// normalize makes empty lists nil, so that a file saying "read_uids = []"
// equals the default.
func (c *Config) normalize() {
	for _, l := range []*[]uint32{&c.Access.ReadUIDs, &c.Access.WriteUIDs, &c.Access.ReadGIDs, &c.Access.WriteGIDs} {
		if len(*l) == 0 {
			*l = nil
		}
	}
}

// unknownKeys returns the keys of the document that Config does not define:
// those the decoder left undecoded and those it matched only ignoring case.
// Below an unknown table only the table is reported.
func unknownKeys(md toml.MetaData) []*KeyError {
	known := make(map[string]bool)
	leafByName := make(map[string][]string)
	for _, f := range configFields() {
		known[f.key] = true
		if f.section != "" {
			known[f.section] = true
		}
		leafByName[f.name] = append(leafByName[f.name], f.key)
	}
	undecoded := make(map[string]bool)
	for _, k := range md.Undecoded() {
		undecoded[k.String()] = true
	}
	var errs []*KeyError
	reported := make(map[string]bool)
	for _, k := range md.Keys() {
		key := k.String()
		if known[key] && !undecoded[key] {
			continue
		}
		parentReported := false
		for i := 1; i < len(k); i++ {
			if reported[k[:i].String()] {
				parentReported = true
			}
		}
		if parentReported {
			continue
		}
		reported[key] = true
		msg := "unknown key"
		for k2 := range known {
			if strings.EqualFold(k2, key) {
				msg = fmt.Sprintf("unknown key (keys are case-sensitive: did you mean %s?)", k2)
			}
		}
		if cands := leafByName[k[len(k)-1]]; msg == "unknown key" && len(cands) > 0 {
			msg = fmt.Sprintf("unknown key (did you mean %s?)", strings.Join(cands, " or "))
		}
		errs = append(errs, &KeyError{Key: key, Err: errors.New(msg)})
	}
	return errs
}

// configField is one leaf key of Config.
type configField struct {
	key     string // dotted TOML key, e.g. "store.compression"
	section string // "store", or "" for a top-level key
	name    string // last key component
	index   []int  // reflect field index path
}

// configFields lists Config's keys in declaration order.
func configFields() []configField {
	var out []configField
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("toml")
		if f.Type.Kind() == reflect.Struct {
			for j := range f.Type.NumField() {
				g := f.Type.Field(j)
				name := g.Tag.Get("toml")
				out = append(out, configField{key: tag + "." + name, section: tag, name: name, index: []int{i, j}})
			}
			continue
		}
		out = append(out, configField{key: tag, name: tag, index: []int{i}})
	}
	return out
}

// Keys returns every key Config defines, dotted ("store.compression"), in
// declaration order.
func Keys() []string {
	fields := configFields()
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	return keys
}

// Validate checks every value; each problem is a *KeyError naming the key,
// and all of them are returned, joined.
func (c Config) Validate() error {
	return joinKeyErrors(c.validate())
}

func (c Config) validate() []*KeyError {
	var errs []*KeyError
	bad := func(key, format string, args ...any) {
		errs = append(errs, &KeyError{Key: key, Err: fmt.Errorf(format, args...)})
	}
	oneOf := func(key, v string, allowed ...string) {
		if !slices.Contains(allowed, v) {
			bad(key, "%q is not one of %s", v, strings.Join(allowed, ", "))
		}
	}
	if c.DataDir == "" {
		bad("data_dir", "empty")
	}
	switch {
	case c.Socket == "":
		bad("socket", "empty")
	case len(c.Socket) > 107:
		bad("socket", "path is %d bytes, longer than the 107 a unix socket address holds", len(c.Socket))
	}
	if _, err := ParseFileMode(c.SocketMode); err != nil {
		bad("socket_mode", "%v", err)
	}
	if strings.ContainsAny(c.SocketGroup, " \t\n:") {
		bad("socket_group", "%q is not a group name or id", c.SocketGroup)
	}
	if c.Listen != "" {
		if err := checkListenAddr(c.Listen, true); err != nil {
			bad("listen", "%v", err)
		}
	}
	if path, ok := strings.CutPrefix(c.OTLPGRPCListen, "unix:"); ok {
		if path == "" {
			bad("otlp_grpc_listen", "%q names no socket path (want unix:/path)", c.OTLPGRPCListen)
		}
	} else if c.OTLPGRPCListen != "" {
		if err := checkListenAddr(c.OTLPGRPCListen, false); err != nil {
			bad("otlp_grpc_listen", "%v", err)
		}
	}
	oneOf("sync", c.Sync, SyncAlways, SyncBatch, SyncNone)
	if c.BatchMaxDelay < 0 || c.BatchMaxDelay > Duration(time.Second) {
		bad("batch_max_delay", "%s is not within 0s to 1s", c.BatchMaxDelay)
	}
	oneOf("log_level", c.LogLevel, LogDebug, LogInfo, LogWarn, LogError)
	oneOf("log_format", c.LogFormat, LogText, LogJSON)

	oneOf("store.compression", c.Store.Compression, CompressionNone, CompressionLZ4, CompressionZlib, CompressionZstd)
	const minChunk, maxChunk = 4 << 10, 64 << 20
	if c.Store.ChunkTargetSize < minChunk || c.Store.ChunkTargetSize > maxChunk {
		bad("store.chunk_target_size", "%s is not within %s to %s", c.Store.ChunkTargetSize, Size(minChunk), Size(maxChunk))
	}
	if c.Store.MaxStoreSize < c.Store.ChunkTargetSize {
		bad("store.max_store_size", "%s is smaller than store.chunk_target_size %s", c.Store.MaxStoreSize, c.Store.ChunkTargetSize)
	}
	if c.Store.MaxStoreAge < 0 {
		bad("store.max_store_age", "negative")
	}

	if c.Retention.MaxStores < 0 {
		bad("retention.max_stores", "%d is negative (0 means unlimited)", c.Retention.MaxStores)
	}
	if c.Retention.MaxTotalSize < 0 {
		bad("retention.max_total_size", "negative (0 means unlimited)")
	}
	if c.Retention.MaxAge < 0 {
		bad("retention.max_age", "negative (0 means unlimited)")
	}

	if c.Limits.MaxBodySize < 1<<10 {
		bad("limits.max_body_size", "%s is less than 1KiB", c.Limits.MaxBodySize)
	}
	positive := func(key string, v int) {
		if v < 1 {
			bad(key, "%d is not positive", v)
		}
	}
	positive("limits.max_traces_per_request", c.Limits.MaxTracesPerRequest)
	if c.Limits.MaxDepth < 1 || c.Limits.MaxDepth > trace.MaxDepth {
		bad("limits.max_depth", "%d is not within 1 to %d", c.Limits.MaxDepth, trace.MaxDepth)
	}
	positive("limits.max_attrs", c.Limits.MaxAttrs)
	positive("limits.max_records_per_span", c.Limits.MaxRecordsPerSpan)
	switch {
	case c.Limits.MaxStringSize < 1:
		bad("limits.max_string_size", "%s is not positive", c.Limits.MaxStringSize)
	case c.Limits.MaxStringSize > c.Limits.MaxBodySize:
		bad("limits.max_string_size", "%s is larger than limits.max_body_size %s", c.Limits.MaxStringSize, c.Limits.MaxBodySize)
	case c.Limits.MaxStringSize > Size(trace.DefaultLimits().MaxStringLen):
		bad("limits.max_string_size", "%s is larger than the %s a stored string can hold", c.Limits.MaxStringSize, Size(trace.DefaultLimits().MaxStringLen))
	}
	if c.Limits.MaxSearchLimit < 1 || c.Limits.MaxSearchLimit > maxSearchLimit {
		bad("limits.max_search_limit", "%d is not within 1 to %d", c.Limits.MaxSearchLimit, maxSearchLimit)
	}
	if c.Limits.ReadTimeout < Duration(time.Second) {
		bad("limits.read_timeout", "%s is less than 1s", c.Limits.ReadTimeout)
	}
	if c.Limits.IdleTimeout < Duration(time.Second) {
		bad("limits.idle_timeout", "%s is less than 1s", c.Limits.IdleTimeout)
	}
	positive("limits.max_connections", c.Limits.MaxConnections)
	if c.Limits.MemoryBudget < BodyMemoryFactor*c.Limits.MaxBodySize {
		bad("limits.memory_budget", "%s is less than %d times limits.max_body_size %s: a largest request could never be accepted",
			c.Limits.MemoryBudget, BodyMemoryFactor, c.Limits.MaxBodySize)
	}

	if c.Limits.IndexCacheSize != 0 && (c.Limits.IndexCacheSize < 1<<20 || c.Limits.IndexCacheSize > c.Limits.MemoryBudget) {
		bad("limits.index_cache_size", "%s is not 0 (a quarter of limits.memory_budget) or within 1MiB to limits.memory_budget %s",
			c.Limits.IndexCacheSize, c.Limits.MemoryBudget)
	}

	if c.Zorka.SessionIdleTimeout <= 0 {
		bad("zorka.session_idle_timeout", "%s is not positive", c.Zorka.SessionIdleTimeout)
	}

	o := c.ObjectStore
	if o.Endpoint != "" {
		if u, err := url.Parse(o.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("object_store.endpoint", "%q is not an http:// or https:// URL", o.Endpoint)
		}
	}
	if strings.ContainsAny(o.Bucket, "/ ") {
		bad("object_store.bucket", "%q is not a bucket name", o.Bucket)
	}
	if strings.HasPrefix(o.Prefix, "/") || strings.Contains(o.Prefix, "//") {
		bad("object_store.prefix", "%q: a key prefix has no leading or doubled /", o.Prefix)
	}
	if strings.ContainsAny(o.Node, "/ ") {
		bad("object_store.node", "%q: a node name has no / or space", o.Node)
	}
	if o.LocalMaxStores < 0 {
		bad("object_store.local_max_stores", "%d is negative (0 means unlimited)", o.LocalMaxStores)
	}
	if o.LocalMaxTotalSize < 0 {
		bad("object_store.local_max_total_size", "negative (0 means unlimited)")
	}
	if o.LocalMaxAge < 0 {
		bad("object_store.local_max_age", "negative (0 means unlimited)")
	}
	if o.CacheMaxSize < 1<<20 {
		bad("object_store.cache_max_size", "%s is less than 1MiB", o.CacheMaxSize)
	}
	if o.DiscoverInterval < Duration(time.Second) {
		bad("object_store.discover_interval", "%s is less than 1s", o.DiscoverInterval)
	}
	if c.QueryOnly && !o.Enabled() {
		bad("query_only", "needs object_store.bucket: a query node serves the stores in a bucket")
	}
	return errs
}

// checkListenAddr checks a TCP listen address "host:port"; loopbackOnly
// requires the host to be a loopback address or "localhost".
func checkListenAddr(addr string, loopbackOnly bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", addr, port)
	}
	if !loopbackOnly {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q: host must be a loopback address (127.0.0.1, ::1 or localhost): TCP peers carry no credentials for access control", addr)
	}
	return nil
}

// IndexCacheBytes is the size of the index block cache limits
// index_cache_size asks for: the setting, or a quarter of memory_budget
// when it is 0.
func (c Config) IndexCacheBytes() int64 {
	if c.Limits.IndexCacheSize > 0 {
		return int64(c.Limits.IndexCacheSize)
	}
	return int64(c.Limits.MemoryBudget) / 4
}

// Diff lists the keys whose values differ between c and o, one
// "key: old -> new" string each, in declaration order (for logging what a
// reload changed). Empty and nil lists are equal.
func (c Config) Diff(o Config) []string {
	var out []string
	cv, ov := reflect.ValueOf(c), reflect.ValueOf(o)
	for _, f := range configFields() {
		a, b := cv.FieldByIndex(f.index), ov.FieldByIndex(f.index)
		if a.Kind() == reflect.Slice && a.Len() == 0 && b.Len() == 0 {
			continue
		}
		if reflect.DeepEqual(a.Interface(), b.Interface()) {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s -> %s", f.key, formatValue(a), formatValue(b)))
	}
	return out
}

func formatValue(v reflect.Value) string {
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String()
	}
	if v.Kind() == reflect.String {
		return strconv.Quote(v.String())
	}
	return fmt.Sprint(v.Interface())
}

// tomlKeyLines maps each dotted key defined in the TOML text to the line of
// its first definition. It is a line-oriented scan for error messages, not a
// parser: it understands [table] headers and bare or quoted "key = value"
// lines, which is what a configuration file consists of.
func tomlKeyLines(data []byte) map[string]int {
	lines := make(map[string]int)
	table := ""
	for i, raw := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(raw)
		if t == "" || t[0] == '#' {
			continue
		}
		if t[0] == '[' {
			end := strings.IndexByte(t, ']')
			if end < 0 {
				continue
			}
			table = normalizeTOMLKey(strings.Trim(t[:end], "[ \t"))
			if _, ok := lines[table]; !ok {
				lines[table] = i + 1
			}
			continue
		}
		eq := strings.IndexByte(t, '=')
		if eq <= 0 {
			continue
		}
		key := normalizeTOMLKey(t[:eq])
		if key == "" {
			continue
		}
		if table != "" {
			key = table + "." + key
		}
		if _, ok := lines[key]; !ok {
			lines[key] = i + 1
		}
	}
	return lines
}

// normalizeTOMLKey turns `a . "b"` into "a.b"; it returns "" for text that is
// not a key.
func normalizeTOMLKey(s string) string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if len(p) >= 2 && (p[0] == '"' || p[0] == '\'') && p[len(p)-1] == p[0] {
			p = p[1 : len(p)-1]
		} else if p == "" || strings.ContainsAny(p, " \t\"'") {
			return ""
		}
		parts[i] = p
	}
	return strings.Join(parts, ".")
}
