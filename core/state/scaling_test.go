package state

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

func scaledJob(id string) *structs.Job {
	j := &structs.Job{ID: id, Type: "batch", TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1}, {Name: "h", Count: 1}}}
	j.Canonicalize()
	return j
}

// addEvents records n events on group g of job id, one write each, from
// index start; event i carries message "e<i>".
func addEvents(t *testing.T, s *StateStore, id, group string, start uint64, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		c := int64(i)
		must(t, s.At(time.Unix(100+int64(i), 0)).WriteTxn(start+uint64(i), func(tx *Txn) error {
			return tx.AddScalingEvent(structs.DefaultNamespace, id, group, &structs.ScalingEvent{Count: &c, Message: fmt.Sprintf("e%d", i)})
		}))
	}
}

// A group keeps its latest 20 events, newest first, each stamped with its
// write's index and time; groups are kept apart.
func TestScalingEventsBounded(t *testing.T) {
	s := testStore(t)
	must(t, s.UpsertJob(10, scaledJob("web")))
	addEvents(t, s, "web", "g", 11, 25)
	addEvents(t, s, "web", "h", 100, 2)

	row, err := s.ScalingEventsByJob(nil, structs.DefaultNamespace, "web")
	must(t, err)
	if row == nil {
		t.Fatal("no events stored")
	}
	tests := []struct {
		group   string
		want    int
		newest  string
		oldest  string
		newestI uint64
	}{
		{"g", structs.MaxScalingEventsPerGroup, "e24", "e5", 35},
		{"h", 2, "e1", "e0", 101},
	}
	for _, tc := range tests {
		l := row.ScalingEvents[tc.group]
		if len(l) != tc.want {
			t.Fatalf("group %s: %d events, want %d", tc.group, len(l), tc.want)
		}
		if l[0].Message != tc.newest || l[len(l)-1].Message != tc.oldest {
			t.Errorf("group %s: events %q..%q, want %q..%q", tc.group, l[0].Message, l[len(l)-1].Message, tc.newest, tc.oldest)
		}
		if l[0].CreateIndex != tc.newestI || l[0].Time == 0 {
			t.Errorf("group %s: newest event index %d time %d, want index %d and a time", tc.group, l[0].CreateIndex, l[0].Time, tc.newestI)
		}
	}
	if got := s.Index(TableScalingEvents); got != 101 {
		t.Errorf("scaling events table index %d, want 101", got)
	}
}

// Events survive a snapshot round trip and are deleted with the job.
func TestScalingEventsSnapshotAndDelete(t *testing.T) {
	s := testStore(t)
	must(t, s.UpsertJob(10, scaledJob("web")))
	addEvents(t, s, "web", "g", 11, 3)
	meta := map[string]any{"reason": "load", "n": 1.5}
	must(t, s.WriteTxn(20, func(tx *Txn) error {
		id := "eval-1"
		return tx.AddScalingEvent(structs.DefaultNamespace, "web", "h", &structs.ScalingEvent{Error: true, Message: "boom", Meta: meta, EvalID: &id, Time: 7})
	}))
	before, err := s.ScalingEventsByJob(nil, structs.DefaultNamespace, "web")
	must(t, err)

	restored := roundTrip(t, s)
	after, err := restored.ScalingEventsByJob(nil, structs.DefaultNamespace, "web")
	must(t, err)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("restored events differ:\nbefore %+v\nafter  %+v", before, after)
	}
	if restored.Index(TableScalingEvents) != 20 {
		t.Errorf("restored table index %d, want 20", restored.Index(TableScalingEvents))
	}

	must(t, restored.DeleteJob(30, structs.DefaultNamespace, "web"))
	gone, err := restored.ScalingEventsByJob(nil, structs.DefaultNamespace, "web")
	must(t, err)
	if gone != nil {
		t.Fatalf("events outlived their job: %+v", gone)
	}
	// A job registered again under the ID starts without the old events.
	must(t, restored.UpsertJob(31, scaledJob("web")))
	if again, _ := restored.ScalingEventsByJob(nil, structs.DefaultNamespace, "web"); again != nil {
		t.Fatalf("new job inherited events: %+v", again)
	}
}

func TestAddScalingEventRefusals(t *testing.T) {
	s := testStore(t)
	for _, tc := range []struct {
		name       string
		job, group string
		ev         *structs.ScalingEvent
	}{
		{"no event", "web", "g", nil},
		{"no job", "", "g", &structs.ScalingEvent{}},
		{"no group", "web", "", &structs.ScalingEvent{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.WriteTxn(5, func(tx *Txn) error { return tx.AddScalingEvent("default", tc.job, tc.group, tc.ev) })
			if !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if s.Index(TableScalingEvents) != 0 {
				t.Fatal("a refused event was written")
			}
		})
	}
}
