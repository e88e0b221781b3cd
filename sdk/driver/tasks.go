package driver

import (
	"fmt"
	"sync"
)

// Tasks is a driver's table of the tasks it tracks, by task ID, and of the
// IDs that a StartTask or RecoverTask in flight has reserved, so that two
// concurrent calls for one ID cannot both start it. It is safe for
// concurrent use; the zero value is ready.
type Tasks[T comparable] struct {
	mu       sync.Mutex
	tasks    map[string]T
	starting map[string]struct{}
}

// Get returns the tracked task id, or an error wrapping ErrTaskNotFound.
func (ts *Tasks[T]) Get(id string) (T, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.tasks[id]
	if !ok {
		return t, fmt.Errorf("%w: %q", ErrTaskNotFound, id)
	}
	return t, nil
}

// Reserve claims id for a start or recovery in flight. tracked reports
// that the task is tracked already (nothing to do, no claim taken); an ID
// another call has reserved is an error wrapping ErrTaskExists. Otherwise
// release must be called once the call ends, after Add if it succeeded.
func (ts *Tasks[T]) Reserve(id string) (tracked bool, release func(), err error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if _, ok := ts.tasks[id]; ok {
		return true, nil, nil
	}
	if _, ok := ts.starting[id]; ok {
		return false, nil, fmt.Errorf("%w: %q is being started or recovered", ErrTaskExists, id)
	}
	if ts.starting == nil {
		ts.starting = map[string]struct{}{}
	}
	ts.starting[id] = struct{}{}
	return false, func() {
		ts.mu.Lock()
		delete(ts.starting, id)
		ts.mu.Unlock()
	}, nil
}

// Add tracks t under id.
func (ts *Tasks[T]) Add(id string, t T) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.tasks == nil {
		ts.tasks = map[string]T{}
	}
	ts.tasks[id] = t
}

// Remove stops tracking id if it is still t, and reports whether it did:
// of two concurrent destroys of one task, one removes it.
func (ts *Tasks[T]) Remove(id string, t T) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if cur, ok := ts.tasks[id]; !ok || cur != t {
		return false
	}
	delete(ts.tasks, id)
	return true
}
