package client

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func mustOpenLog(t *testing.T, dir string) *allocLog {
	t.Helper()
	l, err := openAllocLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.close() })
	return l
}

func wantLive(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	got := mustOpenLog(t, dir).live()
	if len(got) != len(want) {
		t.Fatalf("reopened log holds %d allocs, want %d: %q", len(got), len(want), got)
	}
	for id, w := range want {
		if string(got[id]) != w {
			t.Fatalf("alloc %s = %q, want %q", id, got[id], w)
		}
	}
}

// TestAllocLogLastRecordWins writes, overwrites and deletes states and
// reads back, from disk, only each alloc's last one.
func TestAllocLogLastRecordWins(t *testing.T) {
	dir := t.TempDir()
	l := mustOpenLog(t, dir)
	for _, w := range []struct{ id, state string }{
		{"a", `{"v":1}`}, {"b", `{"v":1}`}, {"a", `{"v":2}`}, {"c", `{"v":1}`}, {"c", ""},
	} {
		var st []byte
		if w.state != "" {
			st = []byte(w.state)
		}
		if err := l.put(w.id, st); err != nil {
			t.Fatal(err)
		}
	}
	wantLive(t, dir, map[string]string{"a": `{"v":2}`, "b": `{"v":1}`})
}

// TestAllocLogDropsTornTail cuts the log in the middle of its last record,
// as a crash during an append would, and reads the records before it; the
// next write rewrites the log so that nothing follows the torn bytes.
func TestAllocLogDropsTornTail(t *testing.T) {
	dir := t.TempDir()
	l := mustOpenLog(t, dir)
	for i, s := range []string{`{"v":1}`, `{"v":2}`} {
		if err := l.put(fmt.Sprint("a", i), []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	_ = l.close()
	path := filepath.Join(dir, allocLogFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int64{1, 5, 9} {
		t.Run(fmt.Sprint("cut=", cut), func(t *testing.T) {
			d := t.TempDir()
			data, _ := os.ReadFile(path)
			if err := os.WriteFile(filepath.Join(d, allocLogFile), data[:fi.Size()-cut], 0o600); err != nil {
				t.Fatal(err)
			}
			wantLive(t, d, map[string]string{"a0": `{"v":1}`})
			l2 := mustOpenLog(t, d)
			if err := l2.put("b", []byte(`{"v":3}`)); err != nil {
				t.Fatal(err)
			}
			wantLive(t, d, map[string]string{"a0": `{"v":1}`, "b": `{"v":3}`})
		})
	}
	// A flipped byte inside a record fails its CRC: it and what follows
	// are dropped, never read as a state.
	data, _ := os.ReadFile(path)
	data[len(data)-2] ^= 0xff
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, allocLogFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	wantLive(t, d, map[string]string{"a0": `{"v":1}`})
}

// TestAllocLogGroupCommit has many writers put at once: every put returns
// with its record on disk, and the log holds each writer's last state.
func TestAllocLogGroupCommit(t *testing.T) {
	dir := t.TempDir()
	l := mustOpenLog(t, dir)
	const writers, puts = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < puts; i++ {
				if err := l.put(fmt.Sprint("w", w), []byte(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := map[string]string{}
	for w := 0; w < writers; w++ {
		want[fmt.Sprint("w", w)] = fmt.Sprintf(`{"i":%d}`, puts-1)
	}
	wantLive(t, dir, want)
}

// TestAllocLogCompacts writes past the compaction threshold: the log is
// rewritten to about its live states and still reads back whole.
func TestAllocLogCompacts(t *testing.T) {
	dir := t.TempDir()
	l := mustOpenLog(t, dir)
	state := []byte(fmt.Sprintf(`{"pad":%q}`, make([]byte, 4096)))
	for i := 0; i < 2*compactMinBytes/len(state); i++ {
		if err := l.put(fmt.Sprint("a", i%3), state); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, allocLogFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > compactMinBytes+int64(4*len(state)) {
		t.Fatalf("log is %d bytes after compaction, over %d", fi.Size(), compactMinBytes+4*len(state))
	}
	wantLive(t, dir, map[string]string{"a0": string(state), "a1": string(state), "a2": string(state)})
}

// TestStateStoreMigratesAllocFiles opens a state dir an older client
// wrote (one JSON file per alloc): the allocs restore, and once the log
// holds them the old directory is gone.
func TestStateStoreMigratesAllocFiles(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, allocsDir)
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "x1.json"), []byte(`{"Alloc":{"ID":"x1"},"Tasks":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := openStateStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	got, errs := s.allocs()
	if len(errs) != 0 || len(got) != 1 || got[0].Alloc.ID != "x1" {
		t.Fatalf("allocs = %v, %v; want x1", got, errs)
	}
	if err := s.putAlloc(&persistedAlloc{Alloc: &structs.Allocation{ID: "x2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatalf("old alloc dir after the first write: %v; want it gone", err)
	}
	s2, err := openStateStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.close()
	got, errs = s2.allocs()
	if len(errs) != 0 || len(got) != 2 {
		t.Fatalf("allocs after migration = %d, %v; want x1 and x2", len(got), errs)
	}
}

// TestAllocLogSkipsUnchangedState puts an alloc's state again unchanged:
// the log does not grow, and a changed state is written.
func TestAllocLogSkipsUnchangedState(t *testing.T) {
	dir := t.TempDir()
	l := mustOpenLog(t, dir)
	size := func() int64 {
		fi, err := os.Stat(filepath.Join(dir, allocLogFile))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	for _, s := range []string{`{"v":1}`, `{"v":1}`} {
		if err := l.put("a", []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	before := size()
	if err := l.put("a", []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if got := size(); got != before {
		t.Fatalf("log grew from %d to %d bytes on an unchanged state", before, got)
	}
	if err := l.put("a", []byte(`{"v":2}`)); err != nil {
		t.Fatal(err)
	}
	if got := size(); got <= before {
		t.Fatalf("log did not grow (%d bytes) on a changed state", got)
	}
	wantLive(t, dir, map[string]string{"a": `{"v":2}`})
}

// TestStateStorePutAllocRoundTrips writes an alloc's state, with its
// encoded alloc reused across writes, and reads back the last one whole.
func TestStateStorePutAllocRoundTrips(t *testing.T) {
	dir := t.TempDir()
	s, err := openStateStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	a := &structs.Allocation{ID: "r1", JobID: "j", TaskGroup: "g"}
	for _, st := range []string{structs.TaskStatePending, structs.TaskStateRunning, structs.TaskStateDead} {
		p := &persistedAlloc{Alloc: a, Tasks: map[string]*persistedTask{"main": {State: &structs.TaskState{State: st}, Handle: []byte{1, 2}}}}
		if err := s.putAlloc(p); err != nil {
			t.Fatal(err)
		}
	}
	s2, err := openStateStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.close()
	got, errs := s2.allocs()
	if len(errs) != 0 || len(got) != 1 {
		t.Fatalf("allocs = %d, %v; want r1", len(got), errs)
	}
	g := got[0]
	if g.Alloc.ID != "r1" || g.Alloc.JobID != "j" || g.Tasks["main"] == nil || g.Tasks["main"].State.State != structs.TaskStateDead || len(g.Tasks["main"].Handle) != 2 {
		t.Fatalf("restored state = %+v (main %+v); want r1 with main dead and its handle", g.Alloc, g.Tasks["main"])
	}
}

// TestStateStoreWritesAllocOncePerVersion: the alloc, most of a state's
// bytes, is written once per server version, apart from the task states
// written at every change; the state reads back whole, a new version
// replaces the old, and deleting the alloc removes both records.
func TestStateStoreWritesAllocOncePerVersion(t *testing.T) {
	dir := t.TempDir()
	s, err := openStateStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	a := &structs.Allocation{ID: "v1", JobID: "j", TaskGroup: "g", Job: &structs.Job{ID: "j", Meta: map[string]string{"pad": strings.Repeat("x", 4096)}}}
	logSize := func() int64 {
		fi, err := os.Stat(filepath.Join(dir, allocLogFile))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	put := func(a *structs.Allocation, state string) {
		t.Helper()
		p := &persistedAlloc{Alloc: a, Tasks: map[string]*persistedTask{"main": {State: &structs.TaskState{State: state}}}}
		if err := s.putAlloc(p); err != nil {
			t.Fatal(err)
		}
	}
	put(a, structs.TaskStatePending)
	first := logSize()
	put(a, structs.TaskStateRunning)
	if grew := logSize() - first; grew <= 0 || grew >= 4096 {
		t.Fatalf("a task state change grew the log by %d bytes; want the task states alone, not the 4 KiB alloc again", grew)
	}
	a2 := *a
	a2.DesiredStatus = structs.AllocDesiredStatusStop
	before := logSize()
	put(&a2, structs.TaskStateDead)
	if grew := logSize() - before; grew < 4096 {
		t.Fatalf("a new alloc version grew the log by %d bytes; want the alloc written", grew)
	}
	s2, err := openStateStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, errs := s2.allocs()
	s2.close()
	if len(errs) != 0 || len(got) != 1 {
		t.Fatalf("allocs = %d, %v; want v1", len(got), errs)
	}
	if g := got[0]; g.Alloc.ID != "v1" || g.Alloc.DesiredStatus != structs.AllocDesiredStatusStop || g.Alloc.Job == nil || g.Tasks["main"].State.State != structs.TaskStateDead {
		t.Fatalf("restored %+v with main %+v; want the stopped version, main dead", g.Alloc, g.Tasks["main"].State)
	}
	if err := s.deleteAlloc("v1"); err != nil {
		t.Fatal(err)
	}
	s.close()
	wantLive(t, dir, map[string]string{})
}

// TestStateStoreReadsWholeAndTornRecords: a record holding the alloc
// itself (an older client's) restores, and an alloc record left without
// its task states (a write torn between the two) is dropped, not restored
// and not an error.
func TestStateStoreReadsWholeAndTornRecords(t *testing.T) {
	dir := t.TempDir()
	l := mustOpenLog(t, dir)
	if err := l.put("old", []byte(`{"Alloc":{"ID":"old"},"Tasks":{}}`)); err != nil {
		t.Fatal(err)
	}
	if err := l.put(allocKey("torn"), []byte(`{"ID":"torn"}`)); err != nil {
		t.Fatal(err)
	}
	_ = l.close()
	s, err := openStateStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, errs := s.allocs()
	s.close()
	if len(errs) != 0 || len(got) != 1 || got[0].Alloc.ID != "old" {
		t.Fatalf("allocs = %v, %v; want old alone", got, errs)
	}
	wantLive(t, dir, map[string]string{"old": `{"Alloc":{"ID":"old"},"Tasks":{}}`})
}
