package allochealth

import (
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

func TestDecideHealth(t *testing.T) {
	start := time.Date(2026, 12, 4, 21, 0, 0, 0, time.UTC)
	upd := &structs.UpdateStrategy{MaxParallel: 1, HealthCheck: structs.UpdateHealthCheckTaskStates,
		MinHealthyTime: 10 * time.Second, HealthyDeadline: time.Minute}
	running := func(since time.Duration) *structs.TaskState {
		return &structs.TaskState{State: structs.TaskStateRunning, StartedAt: start.Add(since)}
	}
	main := func(st *structs.TaskState) Task { return Task{State: st, Tracked: true} }
	tests := []struct {
		name     string
		upd      *structs.UpdateStrategy
		tasks    []Task
		at       time.Duration // after start
		want     Verdict
		wantNext time.Duration // -1: none
	}{
		{"running, not long enough", upd, []Task{main(running(time.Second))}, 5 * time.Second, Pending, 11 * time.Second},
		{"running for min_healthy_time", upd, []Task{main(running(time.Second))}, 11 * time.Second, Healthy, -1},
		{"the last task to start decides", upd, []Task{main(running(time.Second)), main(running(20 * time.Second))}, 25 * time.Second, Pending, 30 * time.Second},
		{"pending task waits for the deadline", upd, []Task{main(&structs.TaskState{State: structs.TaskStatePending})}, 5 * time.Second, Pending, time.Minute},
		{"deadline passes first", upd, []Task{main(&structs.TaskState{State: structs.TaskStatePending})}, time.Minute, Unhealthy, -1},
		{"healthy only after the deadline", upd, []Task{main(running(55 * time.Second))}, 70 * time.Second, Unhealthy, -1},
		{"restart", upd, []Task{main(&structs.TaskState{State: structs.TaskStateRunning, Restarts: 1, StartedAt: start})}, 30 * time.Second, Unhealthy, -1},
		{"failed", upd, []Task{main(&structs.TaskState{State: structs.TaskStateDead, Failed: true})}, time.Second, Unhealthy, -1},
		{"main task exited", upd, []Task{main(&structs.TaskState{State: structs.TaskStateDead})}, time.Second, Unhealthy, -1},
		{"finished prestart task does not count", upd, []Task{{State: &structs.TaskState{State: structs.TaskStateDead}}, main(running(0))}, 10 * time.Second, Healthy, -1},
		{"checks behaves as task_states", &structs.UpdateStrategy{MaxParallel: 1, HealthCheck: structs.UpdateHealthCheckChecks, MinHealthyTime: time.Second},
			[]Task{main(running(0))}, 2 * time.Second, Healthy, -1},
		{"manual reports nothing", &structs.UpdateStrategy{MaxParallel: 1, HealthCheck: structs.UpdateHealthCheckManual, HealthyDeadline: time.Second},
			[]Task{main(&structs.TaskState{State: structs.TaskStateDead, Failed: true})}, time.Hour, Pending, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, next := Decide(tt.upd, tt.tasks, start, start.Add(tt.at))
			if got != tt.want {
				t.Errorf("verdict %d, want %d", got, tt.want)
			}
			switch {
			case tt.wantNext < 0 && !next.IsZero():
				t.Errorf("next check at %s, want none", next.Sub(start))
			case tt.wantNext >= 0 && !next.Equal(start.Add(tt.wantNext)):
				t.Errorf("next check at %s, want %s", next.Sub(start), tt.wantNext)
			}
		})
	}
}

func TestDecideChecksHealth(t *testing.T) {
	start := time.Unix(1000, 0)
	u := &structs.UpdateStrategy{MinHealthyTime: 10 * time.Second, HealthyDeadline: time.Minute}
	tests := []struct {
		name      string
		since, at time.Duration // since < 0: not passing
		want      Verdict
		next      time.Duration // -1: none
	}{
		{"not passing", -1, 5 * time.Second, Pending, time.Minute},
		{"passing, not long enough", 2 * time.Second, 5 * time.Second, Pending, 12 * time.Second},
		{"passing long enough", 2 * time.Second, 12 * time.Second, Healthy, -1},
		{"passing before tracking counts from its start", -30 * time.Second, 10 * time.Second, Healthy, -1},
		{"deadline passes", -1, time.Minute, Unhealthy, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var since time.Time
			if tt.since >= 0 || tt.since < -time.Second {
				since = start.Add(tt.since)
			}
			got, next := DecideChecks(u, start, since, start.Add(tt.at))
			if got != tt.want {
				t.Errorf("verdict %d, want %d", got, tt.want)
			}
			if tt.next < 0 && !next.IsZero() || tt.next >= 0 && !next.Equal(start.Add(tt.next)) {
				t.Errorf("next %v, want %v", next.Sub(start), tt.next)
			}
		})
	}
}
