// Package version names the build of ztsd and ztsctl: the version the
// linker set (-X main.version=...), else the module version, plus the VCS
// revision Go recorded at build time.
package version

import (
	"runtime"
	"runtime/debug"
)

// String returns "NAME VERSION (REVISION[, modified], GO VERSION)" for a
// binary whose linker-set version is linkerVersion ("dev" when unset).
func String(name, linkerVersion string) string {
	v := linkerVersion
	rev, modified := "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if (v == "" || v == "dev") && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	detail := ""
	if rev != "" {
		detail = rev[:min(12, len(rev))]
		if modified {
			detail += ", modified"
		}
		detail += ", "
	}
	return name + " " + v + " (" + detail + runtime.Version() + ")"
}
