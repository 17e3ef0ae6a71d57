package index

import (
	"github.com/cockroachdb/pebble"
	"github.com/ztsd/ztsd/index/kv"
	"github.com/ztsd/ztsd/index/postings"
)

// mergerName is persisted by Pebble: a store created with one merge operator
// cannot be opened with another.
const mergerName = "ztsd.index.v1"

// newMerger returns the merge operator of the metadata index. Every merged
// key is append-only:
//   - 'a' and 'w' posting lists are sets; operands are unioned and
//     re-encoded as one operand (postings.Compact);
//   - 't', 'q' and 'c' values are concatenations of self-delimiting
//     operands (re-encoding them would cost every read, since Pebble also
//     merges when reading, and save only an operand header per batch).
//
// The operator never fails: if operands do not decode it falls back to plain
// concatenation, so that the reader reports the corruption with context
// instead of compactions stalling.
//
// Offsets are bounded by the largest supported block size, not the store's
// own, because Pebble may merge before the store's format record is read.
func newMerger() *pebble.Merger {
	return kv.NewMerger(mergerName, func(prefix byte, all []byte, _ int) ([]byte, bool) {
		if prefix != prefixAttr && prefix != prefixText {
			return nil, false
		}
		out, err := postings.Compact(nil, all, 1<<MaxBlockShift)
		return out, err == nil
	})
}
