package config

import (
	"fmt"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"time"
)

// maxUnitTextLen bounds the text of a size, duration or mode value; longer
// text is rejected before any parsing work.
const maxUnitTextLen = 64

// Size is a byte count. In TOML it is an integer (bytes) or a string: a
// non-negative decimal number with an optional unit, case-insensitive:
// B; KB, MB, GB, TB, PB (powers of 1000); KiB, MiB, GiB, TiB, PiB (powers of
// 1024). "1GiB", "512MiB", "64KB", "100", "1.5GB" are sizes. A fractional
// result is rounded down to whole bytes; a fraction without a unit is an
// error.
type Size int64

var sizeUnits = []struct {
	name string
	mult int64
}{
	{"b", 1},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12}, {"pb", 1e15},
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40}, {"pib", 1 << 50},
}

// ParseSize parses the string form of a Size.
func ParseSize(s string) (Size, error) {
	if len(s) > maxUnitTextLen {
		return 0, fmt.Errorf("invalid size %.20q...: longer than %d characters", s, maxUnitTextLen)
	}
	text := strings.TrimSpace(s)
	end := 0
	for end < len(text) && (text[end] >= '0' && text[end] <= '9' || text[end] == '.') {
		end++
	}
	num, unit := text[:end], strings.TrimSpace(text[end:])
	if num == "" || num == "." || strings.Count(num, ".") > 1 || num[0] == '.' || num[len(num)-1] == '.' {
		return 0, fmt.Errorf("invalid size %q: want a non-negative number with an optional unit (B, KB, MiB, GiB, ...)", s)
	}
	mult := int64(1)
	if unit != "" {
		found := false
		for _, u := range sizeUnits {
			if strings.EqualFold(unit, u.name) {
				mult, found = u.mult, true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("invalid size %q: unknown unit %q (want B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB or PiB)", s, unit)
		}
	}
	if strings.Contains(num, ".") && (unit == "" || mult == 1) {
		return 0, fmt.Errorf("invalid size %q: a fraction of a byte", s)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("invalid size %q: bad number %q", s, num)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	n := new(big.Int).Quo(r.Num(), r.Denom()) // r >= 0: rounds down
	if !n.IsInt64() {
		return 0, fmt.Errorf("invalid size %q: larger than %d bytes", s, int64(math.MaxInt64))
	}
	return Size(n.Int64()), nil
}

// String returns the shortest exact form: the largest binary unit (KiB..PiB)
// or else decimal unit (KB..PB) that divides the size, or bytes ("100B").
// ParseSize(s.String()) == s.
func (s Size) String() string {
	if s < 0 {
		return strconv.FormatInt(int64(s), 10) + "B" // invalid, but printable
	}
	if s == 0 {
		return "0B"
	}
	for _, group := range [][]int{{10, 9, 8, 7, 6}, {5, 4, 3, 2, 1}} {
		for _, i := range group {
			u := sizeUnits[i]
			if int64(s)%u.mult == 0 {
				return strconv.FormatInt(int64(s)/u.mult, 10) + canonicalSizeUnit[i]
			}
		}
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}

var canonicalSizeUnit = [...]string{"B", "KB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB", "PiB"}

// MarshalText implements encoding.TextMarshaler.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseSize.
func (s *Size) UnmarshalText(text []byte) error {
	v, err := ParseSize(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// UnmarshalTOML accepts a TOML integer (bytes) or string (ParseSize).
func (s *Size) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case int64:
		if v < 0 {
			return fmt.Errorf("invalid size %d: negative", v)
		}
		*s = Size(v)
		return nil
	case string:
		return s.UnmarshalText([]byte(v))
	}
	return fmt.Errorf("invalid size: want an integer or a string such as \"64MiB\", not a TOML %T", v)
}

// Duration is a time span. In TOML it is a string in time.ParseDuration syntax
// ("30s", "1h30m", "250ms") that also accepts days ("7d", "1d12h", "1.5d");
// "0" is zero. Negative durations are rejected.
type Duration time.Duration

const day = 24 * time.Hour

// ParseDuration parses the string form of a Duration.
func ParseDuration(s string) (Duration, error) {
	if len(s) > maxUnitTextLen {
		return 0, fmt.Errorf("invalid duration %.20q...: longer than %d characters", s, maxUnitTextLen)
	}
	text := strings.TrimSpace(s)
	if text == "" {
		return 0, fmt.Errorf("invalid duration %q: empty", s)
	}
	if text[0] == '-' {
		return 0, fmt.Errorf("invalid duration %q: negative", s)
	}
	if text == "0" {
		return 0, nil
	}
	// Split off a leading "<number>d" part; time.ParseDuration handles the rest.
	var days time.Duration
	end := 0
	for end < len(text) && (text[end] >= '0' && text[end] <= '9' || text[end] == '.') {
		end++
	}
	if end > 0 && end < len(text) && text[end] == 'd' {
		hours, err := time.ParseDuration(text[:end] + "h")
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: bad day count %q", s, text[:end])
		}
		if hours > math.MaxInt64/24 {
			return 0, fmt.Errorf("invalid duration %q: too long", s)
		}
		days = hours * 24
		text = text[end+1:]
		if text == "" {
			return Duration(days), nil
		}
	}
	if !strings.ContainsAny(text, "abcdefghijklmnopqrstuvwxyzµμ") {
		return 0, fmt.Errorf("invalid duration %q: missing unit (ns, us, ms, s, m, h or d)", s)
	}
	if i := strings.IndexByte(text, 'd'); i > 0 && text[i-1] >= '0' && text[i-1] <= '9' {
		return 0, fmt.Errorf("invalid duration %q: days (d) must come first", s)
	}
	rest, err := time.ParseDuration(text)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: want a number with a unit: ns, us, ms, s, m, h or d", s)
	}
	if rest < 0 {
		return 0, fmt.Errorf("invalid duration %q: negative", s)
	}
	if rest > math.MaxInt64-days {
		return 0, fmt.Errorf("invalid duration %q: too long", s)
	}
	return Duration(days + rest), nil
}

// String returns the value in the largest unit (d, h, m, s, ms, us, ns) that
// divides it exactly ("7d", "90s", "1500ms"); ParseDuration(d.String()) == d.
func (d Duration) String() string {
	if d == 0 {
		return "0s"
	}
	if d < 0 {
		return time.Duration(d).String() // invalid, but printable
	}
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{day, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}} {
		if time.Duration(d)%u.unit == 0 {
			return strconv.FormatInt(int64(time.Duration(d)/u.unit), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseDuration.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := ParseDuration(string(text))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// UnmarshalTOML accepts a TOML string (ParseDuration) or the integer 0.
func (d *Duration) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case int64:
		if v != 0 {
			return fmt.Errorf("invalid duration %d: missing unit (write a string such as \"%ds\")", v, v)
		}
		*d = 0
		return nil
	case string:
		return d.UnmarshalText([]byte(v))
	}
	return fmt.Errorf("invalid duration: want a string such as \"30s\", not a TOML %T", v)
}

// ParseFileMode parses a permission mode written as octal digits ("0660",
// "660"), at most 0777: the form of Config.SocketMode.
func ParseFileMode(s string) (os.FileMode, error) {
	if len(s) > maxUnitTextLen {
		return 0, fmt.Errorf("invalid mode %.20q...: longer than %d characters", s, maxUnitTextLen)
	}
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || s == "" || s[0] < '0' || s[0] > '7' {
		return 0, fmt.Errorf("invalid mode %q: want octal digits such as \"0660\"", s)
	}
	if n > 0o777 {
		return 0, fmt.Errorf("invalid mode %q: permission bits must be within 0777", s)
	}
	return os.FileMode(n), nil
}
