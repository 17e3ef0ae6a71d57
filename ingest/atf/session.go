package atf

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Names of the files of a thread directory and of a session.
const (
	IndexFileName    = "index.atf"
	DetailFileName   = "detail.atf"
	ManifestFileName = "manifest.json"
)

// maxDiscoverDepth bounds how deep below the given directory thread
// directories are searched (a capture bundle nests them as
// <bundle>/trace/session_*/pid_*/thread_*).
const maxDiscoverDepth = 5

// pathInfo is what a file's path says about its origin.
type pathInfo struct {
	// Key identifies the file stably across machines and working
	// directories: the file name preceded by whichever of the thread, pid
	// and session directories are present, e.g.
	// "session_20250101_120000/pid_4242/thread_0/index.atf".
	Key     string
	Thread  string // "thread_N" when the parent directory is one
	PID     int64  // -1 when no pid_N directory
	Session string // "session_YYYYMMDD_HHMMSS" when present
	// SessionStart is the wall time in the session directory's name
	// (written in the recording machine's local time, read here in
	// time.UTC); zero when unknown.
	SessionStart time.Time
}

// identify reads pathInfo from a path (absolute or not, either separator).
func identify(p string) pathInfo {
	parts := strings.FieldsFunc(filepath.ToSlash(p), func(r rune) bool { return r == '/' })
	info := pathInfo{PID: -1}
	if len(parts) == 0 {
		info.Key = p
		return info
	}
	key := []string{parts[len(parts)-1]}
	i := len(parts) - 2
	if i >= 0 && isThreadDir(parts[i]) {
		info.Thread = parts[i]
		key = append(key, parts[i])
		i--
	} else if i >= 0 {
		// Not the standard layout: keep the directory name for identity.
		key = append(key, parts[i])
		i = -1
	}
	if i >= 0 && strings.HasPrefix(parts[i], "pid_") {
		if n, err := strconv.ParseInt(parts[i][4:], 10, 64); err == nil {
			info.PID = n
			key = append(key, parts[i])
			i--
		}
	}
	if i >= 0 && strings.HasPrefix(parts[i], "session_") {
		info.Session = parts[i]
		key = append(key, parts[i])
		if len(parts[i]) >= len("session_20060102_150405") {
			if t, err := time.ParseInLocation("20060102_150405", parts[i][8:8+15], time.UTC); err == nil {
				info.SessionStart = t
			}
		}
	}
	for l, r := 0, len(key)-1; l < r; l, r = l+1, r-1 {
		key[l], key[r] = key[r], key[l]
	}
	info.Key = strings.Join(key, "/")
	return info
}

// threadNumber parses N of "thread_N", -1 when it is not one.
func threadNumber(name string) int64 {
	if !strings.HasPrefix(name, "thread_") {
		return -1
	}
	n, err := strconv.ParseInt(name[len("thread_"):], 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

func isThreadDir(name string) bool { return threadNumber(name) >= 0 }

// threadSource is one thread's files on disk.
type threadSource struct {
	IndexPath  string
	DetailPath string // "" when the thread has no detail.atf
	// Group is the directory holding the session's manifest.json (the
	// pid_N directory), or the thread directory when it is not a thread_N.
	Group string
	Info  pathInfo
}

// discover finds the thread files under root: root may be an index file, a
// thread directory, a pid_N (session) directory or any directory above one.
func discover(root string) ([]threadSource, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("atf: %s: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("atf: %w", err)
	}
	if !fi.IsDir() {
		return []threadSource{newThreadSource(abs)}, nil
	}
	if isRegular(filepath.Join(abs, IndexFileName)) {
		return []threadSource{newThreadSource(filepath.Join(abs, IndexFileName))}, nil
	}
	var out []threadSource
	base := strings.Count(abs, string(filepath.Separator))
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == abs {
				return err
			}
			return nil // unreadable sub-directory: skip it
		}
		if !d.IsDir() {
			return nil
		}
		if strings.Count(p, string(filepath.Separator))-base > maxDiscoverDepth {
			return filepath.SkipDir
		}
		if isThreadDir(d.Name()) {
			if idx := filepath.Join(p, IndexFileName); isRegular(idx) {
				out = append(out, newThreadSource(idx))
			}
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("atf: walking %s: %w", root, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("atf: %s: no %s and no thread_*/%s found (searched %d levels deep)",
			root, IndexFileName, IndexFileName, maxDiscoverDepth)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		na, nb := threadNumber(a.Info.Thread), threadNumber(b.Info.Thread)
		if na != nb {
			return na < nb
		}
		return a.IndexPath < b.IndexPath
	})
	return out, nil
}

func newThreadSource(indexPath string) threadSource {
	dir := filepath.Dir(indexPath)
	s := threadSource{IndexPath: indexPath, Group: dir, Info: identify(indexPath)}
	if s.Info.Thread != "" {
		s.Group = filepath.Dir(dir)
	}
	if det := filepath.Join(dir, DetailFileName); det != indexPath && isRegular(det) {
		s.DetailPath = det
	}
	return s
}

func isRegular(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// SniffPath reports whether path looks like ATF v2 input: an index file
// (magic "ATI2"), a thread directory holding index.atf, or a directory with
// thread_*/index.atf below it.
func SniffPath(path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	if !fi.IsDir() {
		f, err := os.Open(path)
		if err != nil {
			return false
		}
		defer f.Close()
		var head [4]byte
		if _, err := io.ReadFull(f, head[:]); err != nil {
			return false
		}
		return Sniff(head[:])
	}
	srcs, err := discover(path)
	if err != nil || len(srcs) == 0 {
		return false
	}
	f, err := os.Open(srcs[0].IndexPath)
	if err != nil {
		return false
	}
	defer f.Close()
	var head [4]byte
	_, err = io.ReadFull(f, head[:])
	return err == nil && Sniff(head[:])
}

// sessionThreads lists every thread_*/index.atf directly in group (the
// session directory of srcs), or srcs when that fails.
func sessionThreads(group string, srcs []threadSource) []threadSource {
	if srcs[0].Info.Thread == "" {
		return srcs
	}
	entries, err := os.ReadDir(group)
	if err != nil {
		return srcs
	}
	var out []threadSource
	for _, e := range entries {
		if e.IsDir() && isThreadDir(e.Name()) {
			if idx := filepath.Join(group, e.Name(), IndexFileName); isRegular(idx) {
				out = append(out, newThreadSource(idx))
			}
		}
	}
	if len(out) == 0 {
		return srcs
	}
	return out
}

// readManifest loads group/manifest.json when present. A missing manifest
// is (nil, nil).
func readManifest(group string) (*Manifest, error) {
	p := filepath.Join(group, ManifestFileName)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return m, nil
}
