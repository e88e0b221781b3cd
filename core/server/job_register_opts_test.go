package server

import (
	"context"
	"errors"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// Register and deregister options Nomad's client sends: EvalPriority sets
// the created eval's priority (out of range refused, nothing written);
// PreserveCounts keeps the stored count of groups the job has already.
func TestRegisterOptions(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()

	for _, p := range []int{-1, 101} {
		before := s.State().LatestIndex()
		_, err := s.Jobs().RegisterOpts(ctx, testJob("bad", "batch"), structs.JobRegisterOptions{EvalPriority: p})
		if !errors.Is(err, structs.ErrInvalid) {
			t.Errorf("EvalPriority %d: %v; want ErrInvalid", p, err)
		}
		if _, err := s.Jobs().DeregisterOpts(ctx, "default", "bad", structs.JobDeregisterOptions{EvalPriority: p}); !errors.Is(err, structs.ErrInvalid) {
			t.Errorf("deregister EvalPriority %d: %v; want ErrInvalid", p, err)
		}
		if s.State().LatestIndex() != before {
			t.Errorf("a refused priority %d wrote to state", p)
		}
	}

	job := testJob("j", "batch")
	job.TaskGroups[0].Count = 3
	reg, err := s.Jobs().RegisterOpts(ctx, job, structs.JobRegisterOptions{EvalPriority: 80})
	if err != nil {
		t.Fatal(err)
	}
	if ev, _ := s.State().EvalByID(nil, reg.EvalID); ev == nil || ev.Priority != 80 {
		t.Fatalf("register eval %+v; want priority 80", ev)
	}

	for _, tc := range []struct {
		name     string
		preserve bool
		want     int
	}{
		{"preserved", true, 3},
		{"not preserved", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The stored count is 3 again before each case.
			if tc.preserve {
				cur, _ := s.State().JobByID(nil, "default", "j")
				if cur.TaskGroups[0].Count != 3 {
					t.Fatalf("stored count %d, want 3", cur.TaskGroups[0].Count)
				}
			}
			upd := testJob("j", "batch")
			upd.TaskGroups[0].Count = 1
			g2 := testJob("j", "batch").TaskGroups[0]
			g2.Name, g2.Count = "g2", 2
			upd.TaskGroups = append(upd.TaskGroups, g2)
			if _, err := s.Jobs().RegisterOpts(ctx, upd, structs.JobRegisterOptions{PreserveCounts: tc.preserve}); err != nil {
				t.Fatal(err)
			}
			got, _ := s.State().JobByID(nil, "default", "j")
			counts := map[string]int{}
			for _, tg := range got.TaskGroups {
				counts[tg.Name] = tg.Count
			}
			if counts["g"] != tc.want || counts["g2"] != 2 {
				t.Errorf("counts %v; want g %d and the new g2 2", counts, tc.want)
			}
		})
	}

	dereg, err := s.Jobs().DeregisterOpts(ctx, "default", "j", structs.JobDeregisterOptions{EvalPriority: 7})
	if err != nil {
		t.Fatal(err)
	}
	if ev, _ := s.State().EvalByID(nil, dereg.EvalID); ev == nil || ev.Priority != 7 || ev.TriggeredBy != structs.EvalTriggerJobDeregister {
		t.Fatalf("deregister eval %+v; want priority 7", ev)
	}
}
