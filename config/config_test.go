package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// deploySample is the sample configuration shipped for systemd, read in place.
const deploySample = "../deploy/ztsd.toml"

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
	c := Default()
	if c.DataDir != "./ztsd-data" || c.Socket != "./ztsd.sock" || c.SocketMode != "0660" || c.Sync != SyncBatch ||
		c.Store.Compression != CompressionZstd || !c.Store.Checksums || c.Store.MaxStoreSize != 1<<30 ||
		c.Store.MaxStoreAge.Std() != 24*time.Hour || c.Store.ChunkTargetSize != 1<<20 ||
		c.Limits.MaxBodySize != 64<<20 || c.Limits.MaxTracesPerRequest != 100000 || c.Retention != (RetentionConfig{}) {
		t.Errorf("Default() = %+v", c)
	}
	// Each call returns an independent value.
	c.Access.ReadUIDs = append(c.Access.ReadUIDs, 7)
	if Default().Access.ReadUIDs != nil {
		t.Error("Default() shares state between calls")
	}
}

func TestParseEmptyIsDefault(t *testing.T) {
	for _, in := range []string{"", "# nothing\n\n", "[store]\n[access]\nread_uids = []\n"} {
		c, err := Parse(strings.NewReader(in), "empty.toml")
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if !reflect.DeepEqual(c, Default()) {
			t.Errorf("Parse(%q) = %+v, want Default()", in, c)
		}
	}
}

func TestParseEveryKey(t *testing.T) {
	in := `
data_dir = "/srv/ztsd"
socket = "/run/z.sock"
socket_mode = "0600"
socket_group = "tracers"
listen = "127.0.0.1:9411"
otlp_grpc_listen = "0.0.0.0:4317"
sync = "always"
batch_max_delay = "5ms"
log_level = "debug"
log_format = "json"
pprof = true
ui = false
query_only = true
[store]
compression = "zlib"
checksums = false
max_store_size = "2GiB"
max_store_age = "7d"
chunk_target_size = 262144
[retention]
max_stores = 16
max_total_size = "50GB"
max_age = "14d"
[limits]
max_body_size = "16MiB"
max_traces_per_request = 5000
max_depth = 64
max_attrs = 128
max_records_per_span = 20000
max_string_size = "64KiB"
max_search_limit = 500
read_timeout = "30s"
idle_timeout = "5m"
max_connections = 100
memory_budget = "512MiB"
index_cache_size = "96MiB"
[access]
read_uids = [1000, 1001]
write_uids = [1002]
read_gids = [50]
write_gids = [51, 52]
[zorka]
session_idle_timeout = "90s"
[object_store]
endpoint = "http://127.0.0.1:7070"
bucket = "traces"
prefix = "fleet/ztsd"
region = "eu-west-1"
path_style = true
profile = "ztsd"
tls_ca_file = "/etc/ztsd/ca.pem"
tls_insecure_skip_verify = true
node = "web-1"
local_max_stores = 4
local_max_total_size = "10GiB"
local_max_age = "2d"
cache_dir = "/var/cache/ztsd"
cache_max_size = "4GiB"
discover_interval = "10s"
`
	got, err := Parse(strings.NewReader(in), "full.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		DataDir: "/srv/ztsd", Socket: "/run/z.sock", SocketMode: "0600", SocketGroup: "tracers",
		Listen: "127.0.0.1:9411", UI: false, OTLPGRPCListen: "0.0.0.0:4317", Sync: SyncAlways,
		BatchMaxDelay: Duration(5 * time.Millisecond), LogLevel: LogDebug, LogFormat: LogJSON, Pprof: true, QueryOnly: true,
		Store: StoreConfig{Compression: CompressionZlib, Checksums: false, MaxStoreSize: 2 << 30,
			MaxStoreAge: Duration(7 * 24 * time.Hour), ChunkTargetSize: 256 << 10},
		Retention: RetentionConfig{MaxStores: 16, MaxTotalSize: 50e9, MaxAge: Duration(14 * 24 * time.Hour)},
		Limits: LimitsConfig{MaxBodySize: 16 << 20, MaxTracesPerRequest: 5000, MaxDepth: 64, MaxAttrs: 128,
			MaxRecordsPerSpan: 20000, MaxStringSize: 64 << 10, MaxSearchLimit: 500,
			ReadTimeout: Duration(30 * time.Second), IdleTimeout: Duration(5 * time.Minute), MaxConnections: 100, MemoryBudget: 512 << 20,
			IndexCacheSize: 96 << 20},
		Access: AccessConfig{ReadUIDs: []uint32{1000, 1001}, WriteUIDs: []uint32{1002}, ReadGIDs: []uint32{50},
			WriteGIDs: []uint32{51, 52}},
		Zorka: ZorkaConfig{SessionIdleTimeout: Duration(90 * time.Second)},
		ObjectStore: ObjectStoreConfig{Endpoint: "http://127.0.0.1:7070", Bucket: "traces", Prefix: "fleet/ztsd",
			Region: "eu-west-1", PathStyle: true, Profile: "ztsd", TLSCAFile: "/etc/ztsd/ca.pem", TLSInsecureSkipVerify: true,
			Node: "web-1", LocalMaxStores: 4, LocalMaxTotalSize: 10 << 30, LocalMaxAge: Duration(48 * time.Hour),
			CacheDir: "/var/cache/ztsd", CacheMaxSize: 4 << 30, DiscoverInterval: Duration(10 * time.Second)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse =\n%+v\nwant\n%+v", got, want)
	}
	// The test sets every key Config defines.
	lines := tomlKeyLines([]byte(in))
	for _, k := range Keys() {
		if lines[k] == 0 {
			t.Errorf("test input lacks key %s", k)
		}
	}
	// Diff against the default names every key (the values all differ).
	if d := Default().Diff(got); len(d) != len(Keys()) {
		t.Errorf("Diff lists %d keys, want %d: %q", len(d), len(Keys()), d)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		key  string
		line int
		msg  string
	}{
		// Bad sizes.
		{"size unit", "[store]\nmax_store_size = \"1XB\"", "store.max_store_size", 2, `unknown unit "XB"`},
		{"size negative int", "[limits]\nmax_body_size = -5", "limits.max_body_size", 2, "negative"},
		{"size fraction of byte", "[limits]\nmax_string_size = \"1.5\"", "limits.max_string_size", 2, "a fraction of a byte"},
		{"size float", "[limits]\nmax_body_size = 1.5", "limits.max_body_size", 2, "not a TOML float64"},
		{"size overflow", "[retention]\nmax_total_size = \"9000PiB\"", "retention.max_total_size", 2, "larger than"},
		{"chunk too small", "[store]\nchunk_target_size = \"1KiB\"", "store.chunk_target_size", 2, "not within 4KiB to 64MiB"},
		{"store smaller than chunk", "[store]\nmax_store_size = \"512KiB\"", "store.max_store_size", 2, "smaller than store.chunk_target_size 1MiB"},
		{"body too small", "\n\n[limits]\nmax_body_size = 10", "limits.max_body_size", 4, "less than 1KiB"},
		{"string above body", "[limits]\nmax_string_size = \"128MiB\"", "limits.max_string_size", 2, "larger than limits.max_body_size"},
		// Bad durations.
		{"duration no unit", "batch_max_delay = 5", "batch_max_delay", 1, "missing unit"},
		{"duration negative", "[retention]\nmax_age = \"-1d\"", "retention.max_age", 2, "negative"},
		{"duration bad", "[zorka]\nsession_idle_timeout = \"soon\"", "zorka.session_idle_timeout", 2, "want a number with a unit"},
		{"duration zero timeout", "[zorka]\nsession_idle_timeout = \"0s\"", "zorka.session_idle_timeout", 2, "not positive"},
		{"batch delay too long", "batch_max_delay = \"2s\"", "batch_max_delay", 1, "not within 0s to 1s"},
		// Bad enums.
		{"compression", "[store]\ncompression = \"brotli\"", "store.compression", 2, `"brotli" is not one of none, lz4, zlib, zstd`},
		{"compression case", "[store]\ncompression = \"LZ4\"", "store.compression", 2, "is not one of"},
		{"sync", "sync = \"sometimes\"", "sync", 1, `"sometimes" is not one of always, batch, none`},
		{"log level", "log_level = \"trace\"", "log_level", 1, "is not one of debug, info, warn, error"},
		{"log format", "log_format = \"xml\"", "log_format", 1, "is not one of text, json"},
		// Unknown keys.
		{"unknown top", "colour = \"blue\"", "colour", 1, "unknown key"},
		{"unknown in table", "[store]\n\ncompresion = \"lz4\"", "store.compresion", 3, "unknown key"},
		{"unknown table", "sync = \"none\"\n[storage]\npath = \"x\"", "storage", 2, "unknown key"},
		{"wrong case", "Data_Dir = \"/x\"", "Data_Dir", 1, "case-sensitive: did you mean data_dir?"},
		{"wrong table", "compression = \"lz4\"", "compression", 1, "did you mean store.compression?"},
		{"dotted unknown", "store.level = 3", "store.level", 1, "unknown key"},
		// Types and ranges.
		{"bool as string", "[store]\nchecksums = \"yes\"", "store.checksums", 2, "incompatible types"},
		{"string as int", "data_dir = 5", "data_dir", 1, "incompatible types"},
		{"uid negative", "[access]\nread_uids = [-1]", "access.read_uids", 2, "out of range for uint32"},
		{"uid too big", "[access]\nwrite_gids = [4294967296]", "access.write_gids", 2, "out of range for uint32"},
		{"mode int", "socket_mode = 0o660", "socket_mode", 1, "incompatible types"},
		{"mode string", "socket_mode = \"rw\"", "socket_mode", 1, "want octal digits"},
		{"mode range", "socket_mode = \"1660\"", "socket_mode", 1, "within 0777"},
		{"max_depth", "[limits]\nmax_depth = 0", "limits.max_depth", 2, "not within 1 to 1000"},
		{"max_attrs", "[limits]\nmax_attrs = -3", "limits.max_attrs", 2, "not positive"},
		{"retention negative", "[retention]\nmax_stores = -1", "retention.max_stores", 2, "negative"},
		// Paths and addresses.
		{"empty data_dir", "data_dir = \"\"", "data_dir", 1, "empty"},
		{"long socket", "socket = \"/" + strings.Repeat("s", 120) + "\"", "socket", 1, "longer than the 107"},
		{"socket group", "socket_group = \"a b\"", "socket_group", 1, "not a group name"},
		{"listen not loopback", "listen = \"0.0.0.0:9411\"", "listen", 1, "loopback"},
		{"listen no port", "listen = \"127.0.0.1\"", "listen", 1, "not host:port"},
		{"listen bad port", "listen = \"127.0.0.1:99999\"", "listen", 1, "not a number from 0 to 65535"},
		{"otlp bad", "otlp_grpc_listen = \"4317\"", "otlp_grpc_listen", 1, "not host:port"},
		// Syntax.
		{"syntax", "\n\nsync = batch", "sync", 3, "expected value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.in), "bad.toml")
			var ke *KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("err = %v, want a *KeyError", err)
			}
			if ke.Key != tt.key || ke.Line != tt.line || ke.File != "bad.toml" || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %q (file %q key %q line %d), want key %q line %d containing %q",
					err, ke.File, ke.Key, ke.Line, tt.key, tt.line, tt.msg)
			}
			if !strings.HasPrefix(err.Error(), "bad.toml:") {
				t.Errorf("err = %q does not start with the file name", err)
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	in := "colour = 1\nshape = 2\n[nested]\na = 1\n"
	_, err := Parse(strings.NewReader(in), "x.toml")
	want := "x.toml:1: colour: unknown key\nx.toml:2: shape: unknown key\nx.toml:3: nested: unknown key"
	if err == nil || err.Error() != want {
		t.Errorf("err =\n%v\nwant\n%s", err, want)
	}
	in = "sync = \"x\"\n[store]\ncompression = \"y\"\n"
	_, err = Parse(strings.NewReader(in), "x.toml")
	want = "x.toml:1: sync: \"x\" is not one of always, batch, none\nx.toml:3: store.compression: \"y\" is not one of none, lz4, zlib, zstd"
	if err == nil || err.Error() != want {
		t.Errorf("err =\n%v\nwant\n%s", err, want)
	}
}

func TestParseTooLarge(t *testing.T) {
	in := bytes.Repeat([]byte("# padding\n"), MaxConfigSize/10+1)
	if _, err := Parse(bytes.NewReader(in), "big.toml"); err == nil || !strings.Contains(err.Error(), "big.toml: larger than") {
		t.Errorf("err = %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ztsd.toml")
	os.WriteFile(path, []byte("data_dir = \"/d\"\n[store]\nmax_store_age = \"1d\"\n"), 0o644)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/d" || c.Store.MaxStoreAge.Std() != 24*time.Hour || c.Socket != "./ztsd.sock" {
		t.Errorf("Load = %+v", c)
	}
	os.WriteFile(path, []byte("[store]\nmax_store_age = \"1y\"\n"), 0o644)
	if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), path+":2: store.max_store_age: invalid duration") {
		t.Errorf("err = %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.toml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
}

// systemdDefault is Default() with the paths deploy/ztsd.toml sets.
func systemdDefault() Config {
	c := Default()
	c.DataDir = "/var/lib/ztsd"
	c.Socket = "/run/ztsd/ztsd.sock"
	return c
}

// TestDeploySample parses deploy/ztsd.toml as shipped, and with every
// commented "# key = value" line uncommented: both must equal Default()
// except for the systemd paths, and the uncommented form must set every key
// Config defines, so the sample documents every key with its true default.
func TestDeploySample(t *testing.T) {
	raw, err := os.ReadFile(deploySample)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(bytes.NewReader(raw), deploySample)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, systemdDefault()) {
		t.Errorf("sample as shipped differs from the default: %q", systemdDefault().Diff(c))
	}

	commentedKey := regexp.MustCompile(`(?m)^# ([a-z_]+ = )`)
	uncommented := commentedKey.ReplaceAll(raw, []byte("$1"))
	c, err = Parse(bytes.NewReader(uncommented), deploySample+" (uncommented)")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, systemdDefault()) {
		t.Errorf("a commented default in the sample is wrong: %q", systemdDefault().Diff(c))
	}
	lines := tomlKeyLines(uncommented)
	for _, k := range Keys() {
		if lines[k] == 0 {
			t.Errorf("sample does not document key %s", k)
		}
	}
}

func TestDiff(t *testing.T) {
	a := Default()
	if d := a.Diff(Default()); len(d) != 0 {
		t.Errorf("Diff of equal configs = %q", d)
	}
	b := Default()
	b.Sync = SyncNone
	b.Store.MaxStoreSize = 2 << 30
	b.Retention.MaxAge = Duration(14 * 24 * time.Hour)
	b.Access.ReadUIDs = []uint32{1000}
	b.SocketMode = "0600"
	a.Access.WriteGIDs = []uint32{} // empty equals nil
	want := []string{
		`socket_mode: "0660" -> "0600"`,
		`sync: "batch" -> "none"`,
		"store.max_store_size: 1GiB -> 2GiB",
		"retention.max_age: 0s -> 14d",
		"access.read_uids: [] -> [1000]",
	}
	if d := a.Diff(b); !reflect.DeepEqual(d, want) {
		t.Errorf("Diff =\n%q\nwant\n%q", d, want)
	}
}

// TestIndexCacheSize: index_cache_size sets the index block cache; 0 (the
// default) is a quarter of memory_budget; a size under 1MiB or over
// memory_budget is refused naming the key.
func TestIndexCacheSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{"", 256 << 20, ""},
		{"[limits]\nmemory_budget = \"512MiB\"", 128 << 20, ""},
		{"[limits]\nindex_cache_size = \"64MiB\"", 64 << 20, ""},
		{"[limits]\nindex_cache_size = \"1GiB\"", 1 << 30, ""},
		{"[limits]\nindex_cache_size = \"2GiB\"", 0, "limits.index_cache_size"},
		{"[limits]\nindex_cache_size = \"512KiB\"", 0, "limits.index_cache_size"},
	} {
		c, err := Parse(strings.NewReader(tc.in), "t.toml")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want one naming %s", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || c.IndexCacheBytes() != tc.want {
			t.Errorf("%q: IndexCacheBytes = %d, %v; want %d", tc.in, c.IndexCacheBytes(), err, tc.want)
		}
	}
}

func TestKeys(t *testing.T) {
	keys := Keys()
	if len(keys) != 53 || keys[0] != "data_dir" || keys[len(keys)-1] != "object_store.discover_interval" {
		t.Errorf("Keys() = %d keys %q", len(keys), keys)
	}
}

func TestAccess(t *testing.T) {
	const daemon = 995
	a := AccessConfig{ReadUIDs: []uint32{1000}, WriteUIDs: []uint32{1001}, ReadGIDs: []uint32{50}, WriteGIDs: []uint32{51}}
	tests := []struct {
		uid         uint32
		gids        []uint32
		read, write bool
	}{
		{0, nil, true, true},
		{daemon, nil, true, true},
		{1000, nil, true, false},
		{1001, nil, true, true},
		{2000, []uint32{7, 50}, true, false},
		{2000, []uint32{51}, true, true},
		{2000, []uint32{52}, false, false},
		{2000, nil, false, false},
	}
	for _, tt := range tests {
		if r, w := a.CanRead(tt.uid, tt.gids, daemon), a.CanWrite(tt.uid, tt.gids, daemon); r != tt.read || w != tt.write {
			t.Errorf("uid %d gids %v: read %v write %v, want %v %v", tt.uid, tt.gids, r, w, tt.read, tt.write)
		}
	}
	var none AccessConfig
	if none.CanRead(1000, []uint32{1000}, daemon) || !none.CanWrite(daemon, nil, daemon) {
		t.Error("default access: only root and the daemon uid")
	}
}

// FuzzParse checks that Parse never panics and that whatever it accepts is
// valid.
func FuzzParse(f *testing.F) {
	if raw, err := os.ReadFile(deploySample); err == nil {
		f.Add(raw)
	}
	for _, s := range []string{"", "sync = \"none\"", "[store]\nmax_store_size = \"2GiB\"", "a = [", "socket_mode = \"0600\"",
		"[access]\nread_uids = [1, 2]", "store = 5", "[[store]]\ncompression = \"lz4\"", "x.y.z = 1", "\"quoted\" = 1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(bytes.NewReader(data), "fuzz.toml")
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid config: %v", err)
		}
	})
}

func BenchmarkParseSample(b *testing.B) {
	raw, err := os.ReadFile(deploySample)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(bytes.NewReader(raw), deploySample); err != nil {
			b.Fatal(err)
		}
	}
}
