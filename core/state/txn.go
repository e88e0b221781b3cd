package state

import (
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// nsKey names a namespaced object (a job, its summary, its launch).
type nsKey struct{ ns, id string }

// writeTxn is one write: a memdb transaction at a Raft index, plus the work
// that a write defers to its end so that it is done once per job rather than
// once per object (job status derivation, summary writes, table indexes).
type writeTxn struct {
	txn   *memdb.Txn
	index uint64
	now   time.Time

	// tables written, whose "index" rows are bumped at the end.
	tables map[string]struct{}
	// summaries holds private copies of the job summaries this write
	// changes; they are stored at the end.
	summaries map[nsKey]*structs.JobSummary
	// summaryOrig holds the stored summary each copy was made from, so that
	// an unchanged summary is not written again.
	summaryOrig map[nsKey]*structs.JobSummary
	// touched lists the jobs whose status must be derived again; the value
	// records whether an eval or alloc of the job was deleted (§2.10: a
	// job whose evals were reaped is dead, not pending).
	touched map[nsKey]bool
	// reapedOnly lists the touched jobs that this write only reaped
	// terminal evals and allocs of (touchJobReaped): a dead job stays
	// dead, with no scan of what is left of it (settleJobStatus).
	reapedOnly map[nsKey]bool
	// deploys holds private copies of the deployments this write changes
	// (deployments.go); they are stored at the end.
	deploys map[string]*structs.Deployment
}

// write runs fn in a write transaction at index and commits it if fn and the
// deferred work succeed. memdb serialises writers, so writes never overlap.
func (s *StateStore) write(index uint64, fn func(t *writeTxn) error) error {
	txn := s.db.Txn(true)
	defer txn.Abort() // no-op after Commit
	if s.changes != nil {
		txn.TrackChanges()
	}
	t := &writeTxn{
		txn:   txn,
		index: index,
		now:   s.now,
		// The "index" row of the index table moves with every write, so
		// Index(TableIndex) is the last applied write even when the write
		// changed nothing else (e.g. reaping evals that were already gone).
		tables:      map[string]struct{}{TableIndex: {}},
		summaries:   map[nsKey]*structs.JobSummary{},
		summaryOrig: map[nsKey]*structs.JobSummary{},
		touched:     map[nsKey]bool{},
	}
	if err := fn(t); err != nil {
		return err
	}
	if err := t.finish(); err != nil {
		return err
	}
	changes := txn.Changes()
	txn.Commit()
	if s.changes != nil {
		s.changes(index, changes)
	}
	return nil
}

// nanos is the write's time in unix nanoseconds, or 0 when it has none.
func (t *writeTxn) nanos() int64 {
	if t.now.IsZero() {
		return 0
	}
	return t.now.UnixNano()
}

// stampNanos is the write's time in unix nanoseconds, or cur when the write
// has none (the object keeps the time it carries).
func (t *writeTxn) stampNanos(cur int64) int64 {
	if t.now.IsZero() {
		return cur
	}
	return t.now.UnixNano()
}

func (t *writeTxn) insert(table string, obj any) error {
	if err := t.txn.Insert(table, obj); err != nil {
		return fmt.Errorf("state: insert into %s: %w", table, err)
	}
	t.tables[table] = struct{}{}
	return nil
}

func (t *writeTxn) delete(table string, obj any) error {
	if err := t.txn.Delete(table, obj); err != nil {
		return fmt.Errorf("state: delete from %s: %w", table, err)
	}
	t.tables[table] = struct{}{}
	return nil
}

func (t *writeTxn) first(table, index string, args ...any) (any, error) {
	raw, err := t.txn.First(table, index, args...)
	if err != nil {
		return nil, fmt.Errorf("state: read %s: %w", table, err)
	}
	return raw, nil
}

func (t *writeTxn) job(ns, id string) (*structs.Job, error) {
	raw, err := t.first(TableJobs, "id", ns, id)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.Job), nil
}

func (t *writeTxn) alloc(id string) (*structs.Allocation, error) {
	raw, err := t.first(TableAllocs, "id", id)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.Allocation), nil
}

// touchJob schedules the job's status to be derived again at the end of the
// write.
func (t *writeTxn) touchJob(ns, id string, deleted bool) {
	if id == "" {
		return
	}
	k := nsKey{ns, id}
	t.touched[k] = t.touched[k] || deleted
	delete(t.reapedOnly, k)
}

// touchJobReaped is touchJob for the reap of a terminal eval or alloc of
// the job (GCReap): unless the write changes the job's children otherwise,
// a job that is dead stays dead without its remaining evals and allocs
// being read again. Deriving the status reads all of them, and a large
// job's backlog is reaped in many entries, each touching the job: the
// reads of a job of n children would grow as n squared.
func (t *writeTxn) touchJobReaped(ns, id string) {
	if id == "" {
		return
	}
	k := nsKey{ns, id}
	if _, seen := t.touched[k]; !seen {
		if t.reapedOnly == nil {
			t.reapedOnly = map[nsKey]bool{}
		}
		t.reapedOnly[k] = true
	}
	t.touched[k] = true
}

// summary returns the write's private copy of a job summary, or nil when the
// job has none. Changes to it are stored by finish.
func (t *writeTxn) summary(ns, id string) (*structs.JobSummary, error) {
	k := nsKey{ns, id}
	if s, ok := t.summaries[k]; ok {
		return s, nil
	}
	raw, err := t.first(TableJobSummary, "id", ns, id)
	if raw == nil || err != nil {
		return nil, err
	}
	orig := raw.(*structs.JobSummary)
	c := copySummary(orig)
	t.summaries[k] = c
	t.summaryOrig[k] = orig
	return c, nil
}

// setSummary replaces the summary of a job for the rest of the write.
func (t *writeTxn) setSummary(s *structs.JobSummary) {
	k := nsKey{s.Namespace, s.JobID}
	t.summaries[k] = s
	delete(t.summaryOrig, k)
}

// deleteSummary removes a job's summary now and forgets any pending change.
func (t *writeTxn) deleteSummary(ns, id string) error {
	delete(t.summaries, nsKey{ns, id})
	delete(t.summaryOrig, nsKey{ns, id})
	raw, err := t.first(TableJobSummary, "id", ns, id)
	if raw == nil || err != nil {
		return err
	}
	return t.delete(TableJobSummary, raw)
}

// finish does the deferred work: job statuses (which may change parents'
// children counts), then summaries, then the table indexes.
func (t *writeTxn) finish() error {
	keys := make([]nsKey, 0, len(t.touched))
	for k := range t.touched {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].ns != keys[j].ns {
			return keys[i].ns < keys[j].ns
		}
		return keys[i].id < keys[j].id
	})
	for _, k := range keys {
		if err := t.settleJobStatus(k, t.touched[k]); err != nil {
			return err
		}
	}
	if err := t.flushDeployments(); err != nil {
		return err
	}
	for k, s := range t.summaries {
		if orig := t.summaryOrig[k]; orig != nil && sameCounts(orig, s) {
			continue
		}
		s.ModifyIndex = t.index
		if err := t.insert(TableJobSummary, s); err != nil {
			return err
		}
	}
	for table := range t.tables {
		if err := t.txn.Insert(TableIndex, &IndexEntry{Key: table, Value: t.index}); err != nil {
			return fmt.Errorf("state: bump index of %s: %w", table, err)
		}
	}
	return nil
}

func copySummary(s *structs.JobSummary) *structs.JobSummary {
	c := *s
	c.Summary = make(map[string]structs.TaskGroupSummary, len(s.Summary))
	for k, v := range s.Summary {
		c.Summary[k] = v
	}
	if s.Children != nil {
		ch := *s.Children
		c.Children = &ch
	}
	return &c
}

// sameCounts reports whether two summaries of one job hold the same counts.
func sameCounts(a, b *structs.JobSummary) bool {
	if len(a.Summary) != len(b.Summary) {
		return false
	}
	for k, v := range a.Summary {
		if w, ok := b.Summary[k]; !ok || v != w {
			return false
		}
	}
	switch {
	case a.Children == nil && b.Children == nil:
		return true
	case a.Children == nil || b.Children == nil:
		return false
	}
	return *a.Children == *b.Children
}
