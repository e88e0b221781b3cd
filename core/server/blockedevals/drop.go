package blockedevals

// Drop forgets the blocked evals of ids (they were deleted from state),
// also from the duplicates waiting to be canceled: a cancel would write a
// deleted eval again. IDs not tracked are ignored.
func (b *BlockedEvals) Drop(ids []string) {
	if len(ids) == 0 {
		return
	}
	gone := make(map[string]bool, len(ids))
	for _, id := range ids {
		gone[id] = true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		if t := b.byID[id]; t != nil {
			b.untrackLocked(t)
		}
	}
	kept := b.duplicates[:0]
	for _, ev := range b.duplicates {
		if !gone[ev.ID] {
			kept = append(kept, ev)
		}
	}
	b.duplicates = kept
}
