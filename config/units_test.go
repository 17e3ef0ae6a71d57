package config

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want Size
	}{
		{"0", 0},
		{"100", 100},
		{"100B", 100},
		{"64KB", 64000},
		{"64kb", 64000},
		{"1KiB", 1024},
		{"512MiB", 512 << 20},
		{"1GiB", 1 << 30},
		{"1gib", 1 << 30},
		{"1.5GB", 1500000000},
		{"1.5GiB", 3 << 29},
		{"0.1KiB", 102}, // 102.4 rounds down
		{" 2 TiB ", 2 << 40},
		{"3PB", 3e15},
		{"7PiB", 7 << 50},
		{"9223372036854775807", math.MaxInt64},
		{"8191PiB", 8191 << 50},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	tests := []struct{ in, msg string }{
		{"", "want a non-negative number"},
		{"GiB", "want a non-negative number"},
		{"-1", "want a non-negative number"},
		{"-1GiB", "want a non-negative number"},
		{"1XB", `unknown unit "XB"`},
		{"1 G", `unknown unit "G"`},
		{"1.5", "a fraction of a byte"},
		{"1.5B", "a fraction of a byte"},
		{"1..5GB", "want a non-negative number"},
		{".5GB", "want a non-negative number"},
		{"5.GB", "want a non-negative number"},
		{"1e9", `unknown unit "e9"`},
		{"0x10", `unknown unit "x10"`},
		{"9223372036854775808", "larger than"},
		{"8192PiB", "larger than"},
		{"1GiB1", `unknown unit "GiB1"`},
		{strings.Repeat("9", 100), "longer than 64"},
	}
	for _, tt := range tests {
		if got, err := ParseSize(tt.in); err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ParseSize(%q) = %d, %v; want an error containing %q", tt.in, got, err, tt.msg)
		}
	}
}

func TestSizeString(t *testing.T) {
	tests := []struct {
		in   Size
		want string
	}{
		{0, "0B"}, {1, "1B"}, {100, "100B"}, {1000, "1KB"}, {1024, "1KiB"}, {1 << 20, "1MiB"},
		{64 << 20, "64MiB"}, {1 << 30, "1GiB"}, {1500000000, "1500MB"}, {3 << 29, "1536MiB"},
		{2048000, "2000KiB"}, {1 << 50, "1PiB"}, {1001, "1001B"}, {math.MaxInt64, "9223372036854775807B"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
		if back, err := ParseSize(tt.in.String()); err != nil || back != tt.in {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in.String(), back, err, int64(tt.in))
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"0s", 0},
		{"30s", 30 * time.Second},
		{"168h", 168 * time.Hour},
		{"7d", 7 * 24 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"1.5d", 36 * time.Hour},
		{"2d30m15s", 48*time.Hour + 30*time.Minute + 15*time.Second},
		{"250ms", 250 * time.Millisecond},
		{"1h30m", 90 * time.Minute},
		{"10us", 10 * time.Microsecond},
		{"10µs", 10 * time.Microsecond},
		{"5ns", 5},
		{" 1m ", time.Minute},
		{"106751d", 106751 * 24 * time.Hour},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if err != nil || got.Std() != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got.Std(), err, tt.want)
		}
	}
}

func TestParseDurationErrors(t *testing.T) {
	tests := []struct{ in, msg string }{
		{"", "empty"},
		{"30", "missing unit"},
		{"1.5", "missing unit"},
		{"-5s", "negative"},
		{"5x", "want a number with a unit"},
		{"d", "want a number with a unit"},
		{"1h2d", "days (d) must come first"},
		{"1d2d", "days (d) must come first"},
		{"1.2.3d", "bad day count"},
		{"106752d", "too long"},
		{"106751d24h", "too long"},
		{"9999999999h", "want a number with a unit"},
		{strings.Repeat("1", 70) + "s", "longer than 64"},
	}
	for _, tt := range tests {
		if got, err := ParseDuration(tt.in); err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ParseDuration(%q) = %v, %v; want an error containing %q", tt.in, got.Std(), err, tt.msg)
		}
	}
}

func TestDurationString(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"}, {24 * time.Hour, "1d"}, {168 * time.Hour, "7d"}, {36 * time.Hour, "36h"},
		{90 * time.Second, "90s"}, {2 * time.Minute, "2m"}, {1500 * time.Millisecond, "1500ms"},
		{time.Millisecond, "1ms"}, {1001 * time.Microsecond, "1001us"}, {1, "1ns"},
		{math.MaxInt64, "9223372036854775807ns"},
	}
	for _, tt := range tests {
		d := Duration(tt.in)
		if got := d.String(); got != tt.want {
			t.Errorf("Duration(%v).String() = %q, want %q", tt.in, got, tt.want)
		}
		if back, err := ParseDuration(d.String()); err != nil || back != d {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", d.String(), back.Std(), err, tt.in)
		}
	}
}

func TestParseFileMode(t *testing.T) {
	for in, want := range map[string]os.FileMode{"0660": 0o660, "660": 0o660, "0777": 0o777, "0": 0, "0000640": 0o640} {
		if got, err := ParseFileMode(in); err != nil || got != want {
			t.Errorf("ParseFileMode(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0o660", "0680", "1777", "04660", "-660", "+660", " 660", "rw-rw----", "0x1b0"} {
		if got, err := ParseFileMode(in); err == nil {
			t.Errorf("ParseFileMode(%q) = %v, want an error", in, got)
		}
	}
}

// FuzzParseSize checks that ParseSize never panics and that accepted sizes
// are non-negative and survive String → ParseSize.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "100", "1GiB", "1.5GB", "0.1KiB", "64kb", "-1", "1e9", "8192PiB", "9223372036854775807", ".", "1..2MB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("ParseSize(%q) = %d, negative", s, int64(v))
		}
		if back, err := ParseSize(v.String()); err != nil || back != v {
			t.Fatalf("ParseSize(%q) = %d, String %q parses to %d, %v", s, int64(v), v.String(), int64(back), err)
		}
	})
}

// FuzzParseDuration checks that ParseDuration never panics and that accepted
// durations are non-negative and survive String → ParseDuration.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"0", "30s", "7d", "1.5d", "1d12h", "250ms", "10µs", "-1s", "106752d", "1h2d", "d", "30"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseDuration(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("ParseDuration(%q) = %d, negative", s, int64(v))
		}
		if back, err := ParseDuration(v.String()); err != nil || back != v {
			t.Fatalf("ParseDuration(%q) = %d, String %q parses to %d, %v", s, int64(v), v.String(), int64(back), err)
		}
	})
}

func BenchmarkParseSize(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSize("1.5GiB"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseDuration(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseDuration("1d12h30m"); err != nil {
			b.Fatal(err)
		}
	}
}
