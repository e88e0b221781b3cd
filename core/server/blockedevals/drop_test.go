package blockedevals

import (
	"slices"
	"testing"
)

// Drop forgets deleted blocked evals (captured, escaped, pinned) and the
// duplicates waiting to be canceled, so no unblock releases them and no
// cancel writes them again; the others stay tracked.
func TestDrop(t *testing.T) {
	b, r := newTracker(t)
	b.Block(blockedEval("old", "j", 1))
	b.Block(blockedEval("new", "j", 2)) // "old" becomes a duplicate
	b.Block(blockedEval("esc", "k", 3, escaped()))
	b.Block(blockedEval("pin", "l", 4, pinned("node1")))
	b.Block(blockedEval("keep", "m", 5))
	b.Drop([]string{"old", "new", "esc", "pin", "nosuch"})
	st := b.Stats()
	if st.TotalBlocked != 1 || st.TotalEscaped != 0 || st.TotalPinned != 0 || st.TotalDuplicates != 0 {
		t.Fatalf("stats after Drop: %+v; want only keep tracked, no duplicates", st)
	}
	b.UnblockAll(100)
	if got := r.take(); !slices.Equal(got, []string{"keep"}) {
		t.Fatalf("released %v; want only keep", got)
	}
}
