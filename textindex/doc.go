// Package textindex owns a store's text index (the store's text/
// directory): the dictionary that gives every distinct string of the store
// a dense id (string ↔ id) and the trigram index that finds the strings
// containing a substring, case-insensitively.
//
// # Model
//
// Ids are dense from 1, assigned in order of first Intern: the store's
// single writer interns the strings of each chunk in a fixed order, so the
// same data file always yields the same ids. Like the metadata index, the
// text index runs without Pebble's WAL and records in each batch the
// data-file offset it is complete up to (its watermark); after a crash the
// writer re-interns the data file from there and gets the same ids back.
//
// # Keys
//
//   - 's' 0x00 string → uvarint id, for strings up to maxInlineKeyBytes;
//     's' 0x01 sha256(string) → uvarint id for longer ones;
//   - 'i' id → the string;
//   - 'g' trigram block → posting list of the ids (id & 0x3fff) in block
//     id>>14 whose lower-cased form contains the trigram (merge operator:
//     union), for strings whose lower-cased form has at most
//     maxTrigramBytes bytes;
//   - 'l' block → posting list of the longer strings, which every substring
//     search verifies directly;
//   - 'm' format; state (count, watermark, and the largest id whose
//     postings are written when that is not count), written with every
//     batch.
//
// The 'g' and 'l' postings of a block of ids are written once, when the
// block's last id is committed (or by Flush, or past 8 MiB of strings
// waiting), not as a merge operand per trigram per batch: the index keeps
// the strings of the open block in memory, a search verifies them after
// the ids the postings give, and an index opened with some of them
// unposted reads them back from their 'i' keys.
//
// docs/format/index-keys.md documents every byte.
//
// # Search
//
// A string s matches a pattern p when strings.ToLower(s) contains
// strings.ToLower(p) (byte-wise; invalid UTF-8 is mapped to U+FFFD by
// both). Patterns of at least 3 bytes (lower-cased) intersect the posting
// lists of up to maxQueryTrigrams of their trigrams block by block and
// verify each candidate against the stored string; shorter patterns scan
// the dictionary. Results are ascending ids. The join is led by the
// trigram with the smallest first list: only its lists are decoded, the
// other trigrams' lists are read only while candidates are left and only
// where the candidates are (postings.Filter), and a trigram missing from a
// block moves the lead past it.
//
// # Concurrency
//
// One writer (one Batch at a time) and any number of concurrent readers;
// readers see committed batches only.
package textindex
