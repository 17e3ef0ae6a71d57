// Package config owns ztsd's two configuration files: the daemon's TOML
// configuration (/etc/ztsd/ztsd.toml, see Config) and each store directory's
// config.props (Java properties text, see Props and StoreProps).
//
// The daemon configuration is Default() overlaid with a TOML file. Decoding is
// strict: a key the Config type does not define (including a key that differs
// only in case) is an error naming the key and its line, and Parse validates
// the result, so a Config obtained from Load or Parse always satisfies
// Validate. Sizes ("64MiB", "1.5GB") and durations ("30s", "7d") have their
// own types, Size and Duration, whose String forms parse back to the same
// value.
//
// config.props follows java.util.Properties syntax (key=value or key: value,
// '#' and '!' comments, backslash escapes including \uXXXX, line
// continuations). Props keeps keys in first-appearance order so that a file
// written by WritePropsFileAtomic is deterministic, and WritePropsFileAtomic
// replaces the file atomically (temporary file in the same directory, fsync,
// rename, fsync of the directory): after a crash the path holds either the
// old or the new content, never a mixture. StoreProps is the typed view of a
// store's config.props; StorePropsFrom rejects a missing, unknown or invalid
// key with an error naming it.
//
// The package holds no mutable global state; every value it returns is a
// fresh copy owned by the caller.
package config
