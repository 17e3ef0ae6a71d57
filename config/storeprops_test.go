package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func sampleStoreProps() StoreProps {
	return StoreProps{
		FormatVersion:  1,
		Compression:    CompressionLZ4,
		Checksums:      true,
		Created:        time.Date(2025, 11, 21, 12, 5, 0, 123456789, time.UTC),
		State:          StateSealed,
		FirstTraceNS:   1763726700000000000,
		LastTraceNS:    1763730300123456789,
		Chunks:         4711,
		MasterChecksum: 0x0badf00d,
	}
}

const sampleStorePropsText = `format.version=1
compression=lz4
checksums=true
created=2025-11-21T12\:05\:00.123456789Z
state=sealed
first.trace.ns=1763726700000000000
last.trace.ns=1763730300123456789
chunks=4711
master.checksum=0badf00d
`

func TestStorePropsRoundTrip(t *testing.T) {
	sp := sampleStoreProps()
	text, err := sp.ToProps().MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	if string(text) != sampleStorePropsText {
		t.Fatalf("ToProps text:\n%s\nwant:\n%s", text, sampleStorePropsText)
	}
	p, err := ParseProps(strings.NewReader(string(text)))
	if err != nil {
		t.Fatal(err)
	}
	back, err := StorePropsFrom(p)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Created.Equal(sp.Created) {
		t.Errorf("Created = %v, want %v", back.Created, sp.Created)
	}
	back.Created = sp.Created
	if back != sp {
		t.Errorf("round trip = %+v, want %+v", back, sp)
	}

	// A non-UTC creation time is stored in UTC and comes back as the same instant.
	sp.Created = time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	sp.State, sp.Compression, sp.Checksums, sp.MasterChecksum = StateOpen, CompressionNone, false, 0
	back, err = StorePropsFrom(sp.ToProps())
	if err != nil {
		t.Fatal(err)
	}
	if !back.Created.Equal(sp.Created) || back.Created.Location() != time.UTC {
		t.Errorf("Created = %v, want %v in UTC", back.Created, sp.Created)
	}
	if v, _ := sp.ToProps().Get("master.checksum"); v != "00000000" {
		t.Errorf("master.checksum = %q", v)
	}
}

func TestStorePropsFromErrors(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(p *Props)
		key     string
		line    int
		message string
	}{
		{"missing key", func(p *Props) { p.Delete("state") }, "state", 0, "missing"},
		{"unknown key", func(p *Props) { p.Set("colour", "blue") }, "colour", 0, "unknown key"},
		{"bad version", func(p *Props) { p.Set("format.version", "one") }, "format.version", 1, "not a decimal integer"},
		{"zero version", func(p *Props) { p.Set("format.version", "0") }, "format.version", 1, "not positive"},
		{"version overflow", func(p *Props) { p.Set("format.version", "4294967296") }, "format.version", 1, "32 bits"},
		{"bad compression", func(p *Props) { p.Set("compression", "brotli") }, "compression", 2, `"brotli" is not one of none, lz4, zlib, zstd`},
		{"bad bool", func(p *Props) { p.Set("checksums", "TRUE") }, "checksums", 3, "not true or false"},
		{"bad time", func(p *Props) { p.Set("created", "yesterday") }, "created", 4, "RFC 3339"},
		{"bad state", func(p *Props) { p.Set("state", "closed") }, "state", 5, "not one of open, sealed"},
		{"bad first", func(p *Props) { p.Set("first.trace.ns", "1e9") }, "first.trace.ns", 6, "decimal integer"},
		{"last before first", func(p *Props) { p.Set("last.trace.ns", "5") }, "last.trace.ns", 7, "before first.trace.ns"},
		{"negative chunks", func(p *Props) { p.Set("chunks", "-1") }, "chunks", 8, "negative"},
		{"short checksum", func(p *Props) { p.Set("master.checksum", "badf00d") }, "master.checksum", 9, "not 8 hex digits"},
		{"checksum not hex", func(p *Props) { p.Set("master.checksum", "0badf00g") }, "master.checksum", 9, "not 8 hex digits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseProps(strings.NewReader(sampleStorePropsText))
			if err != nil {
				t.Fatal(err)
			}
			tt.edit(p)
			if tt.line > 0 {
				// Set forgets the parsed line; re-parse the edited text so
				// that errors carry lines.
				text, _ := p.MarshalText()
				if p, err = ParseProps(strings.NewReader(string(text))); err != nil {
					t.Fatal(err)
				}
			}
			_, err = StorePropsFrom(p)
			var ke *KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("err = %v, want a *KeyError", err)
			}
			if ke.Key != tt.key || ke.Line != tt.line || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("err = %v (key %q line %d), want key %q line %d containing %q", err, ke.Key, ke.Line, tt.key, tt.line, tt.message)
			}
		})
	}
}

func TestStorePropsFromReportsEveryProblem(t *testing.T) {
	p := NewProps()
	p.Set("format.version", "x")
	p.Set("extra", "1")
	_, err := StorePropsFrom(p)
	var keys []string
	for _, e := range unjoin(err) {
		var ke *KeyError
		if errors.As(e, &ke) {
			keys = append(keys, ke.Key)
		}
	}
	want := "extra format.version compression checksums created state first.trace.ns last.trace.ns chunks master.checksum"
	if strings.Join(keys, " ") != want {
		t.Errorf("problems reported for %v, want %s", keys, want)
	}
}

func TestStorePropsValidate(t *testing.T) {
	if err := sampleStoreProps().Validate(); err != nil {
		t.Fatal(err)
	}
	sp := sampleStoreProps()
	sp.State = ""
	sp.Compression = "LZ4"
	err := sp.Validate()
	if err == nil || !strings.Contains(err.Error(), "compression: \"LZ4\"") || !strings.Contains(err.Error(), "state: \"\"") {
		t.Errorf("Validate = %v", err)
	}
}

func BenchmarkStorePropsFrom(b *testing.B) {
	p := sampleStoreProps().ToProps()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := StorePropsFrom(p); err != nil {
			b.Fatal(err)
		}
	}
}
