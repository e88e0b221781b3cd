package client

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
	main := func(st *structs.TaskState) healthTask { return healthTask{state: st, tracked: true} }
	tests := []struct {
		name     string
		upd      *structs.UpdateStrategy
		tasks    []healthTask
		at       time.Duration // after start
		want     healthVerdict
		wantNext time.Duration // -1: none
	}{
		{"running, not long enough", upd, []healthTask{main(running(time.Second))}, 5 * time.Second, healthPending, 11 * time.Second},
		{"running for min_healthy_time", upd, []healthTask{main(running(time.Second))}, 11 * time.Second, healthHealthy, -1},
		{"the last task to start decides", upd, []healthTask{main(running(time.Second)), main(running(20 * time.Second))}, 25 * time.Second, healthPending, 30 * time.Second},
		{"pending task waits for the deadline", upd, []healthTask{main(&structs.TaskState{State: structs.TaskStatePending})}, 5 * time.Second, healthPending, time.Minute},
		{"deadline passes first", upd, []healthTask{main(&structs.TaskState{State: structs.TaskStatePending})}, time.Minute, healthUnhealthy, -1},
		{"healthy only after the deadline", upd, []healthTask{main(running(55 * time.Second))}, 70 * time.Second, healthUnhealthy, -1},
		{"restart", upd, []healthTask{main(&structs.TaskState{State: structs.TaskStateRunning, Restarts: 1, StartedAt: start})}, 30 * time.Second, healthUnhealthy, -1},
		{"failed", upd, []healthTask{main(&structs.TaskState{State: structs.TaskStateDead, Failed: true})}, time.Second, healthUnhealthy, -1},
		{"main task exited", upd, []healthTask{main(&structs.TaskState{State: structs.TaskStateDead})}, time.Second, healthUnhealthy, -1},
		{"finished prestart task does not count", upd, []healthTask{{state: &structs.TaskState{State: structs.TaskStateDead}}, main(running(0))}, 10 * time.Second, healthHealthy, -1},
		{"checks behaves as task_states", &structs.UpdateStrategy{MaxParallel: 1, HealthCheck: structs.UpdateHealthCheckChecks, MinHealthyTime: time.Second},
			[]healthTask{main(running(0))}, 2 * time.Second, healthHealthy, -1},
		{"manual reports nothing", &structs.UpdateStrategy{MaxParallel: 1, HealthCheck: structs.UpdateHealthCheckManual, HealthyDeadline: time.Second},
			[]healthTask{main(&structs.TaskState{State: structs.TaskStateDead, Failed: true})}, time.Hour, healthPending, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, next := decideHealth(tt.upd, tt.tasks, start, start.Add(tt.at))
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

// TestRawExecDeploymentHealth runs real tasks in a deployment and waits for
// the health the client reports with the alloc's updates.
func TestRawExecDeploymentHealth(t *testing.T) {
	srv := newFakeServer()
	c := newRawExecClient(t, srv, t.TempDir())
	defer c.Shutdown()
	select {
	case <-c.Registered():
	case <-time.After(testTimeout):
		t.Fatal("client did not register")
	}
	tests := []struct {
		id      string
		task    *structs.Task
		minTime time.Duration
		healthy bool
	}{
		{"healthy-1", rawTask("web", "/bin/sleep", "30"), 200 * time.Millisecond, true},
		// Long enough that the exit comes first however slowly the
		// shim starts on a loaded machine.
		{"unhealthy-1", rawTask("web", "/bin/sh", "-c", "exit 3"), 20 * time.Second, false},
	}
	for _, tt := range tests {
		job := testJob("service", tt.task)
		job.TaskGroups[0].Update = &structs.UpdateStrategy{MaxParallel: 1, HealthCheck: structs.UpdateHealthCheckTaskStates,
			MinHealthyTime: tt.minTime, HealthyDeadline: time.Minute}
		a := testAlloc(tt.id, c.NodeID(), job)
		a.DeploymentID = "dep-1"
		srv.upsert(a)
	}
	for _, tt := range tests {
		waitFor(t, tt.id+" health", func() bool { return srv.alloc(tt.id).DeploymentStatus.HasHealth() })
		st := srv.alloc(tt.id).DeploymentStatus
		if st.IsHealthy() != tt.healthy || st.Timestamp.IsZero() {
			t.Errorf("%s: reported %+v, want healthy=%v with a time", tt.id, st, tt.healthy)
		}
	}
	// Outside a deployment, a group with a migrate block has its allocs'
	// health judged by that block (a drain waits for it).
	migJob := testJob("service", rawTask("web", "/bin/sleep", "30"))
	migJob.TaskGroups[0].Migrate = &structs.MigrateStrategy{MaxParallel: 1, HealthCheck: structs.UpdateHealthCheckTaskStates,
		MinHealthyTime: 200 * time.Millisecond, HealthyDeadline: time.Minute}
	srv.upsert(testAlloc("migrating-1", c.NodeID(), migJob))
	waitFor(t, "migrating-1 health", func() bool { return srv.alloc("migrating-1").DeploymentStatus.HasHealth() })
	if st := srv.alloc("migrating-1").DeploymentStatus; !st.IsHealthy() || st.Timestamp.IsZero() {
		t.Errorf("alloc with a migrate block reported %+v, want healthy with a time", st)
	}
	// An alloc outside a deployment and without a migrate block reports
	// no health.
	plain := testAlloc("plain-1", c.NodeID(), testJob("service", rawTask("web", "/bin/sleep", "30")))
	srv.upsert(plain)
	waitFor(t, "plain alloc running", func() bool { return srv.clientStatus("plain-1") == structs.AllocClientStatusRunning })
	if st := srv.alloc("plain-1").DeploymentStatus; st != nil {
		t.Errorf("alloc outside a deployment reported %+v", st)
	}
	// Stop the long-running tasks: the client's shutdown leaves tasks
	// running, by design.
	long := []string{"healthy-1", "migrating-1", "plain-1"}
	for _, id := range long {
		srv.setDesired(id, structs.AllocDesiredStatusStop)
	}
	for _, id := range long {
		waitFor(t, id+" stopped", func() bool { return srv.clientStatus(id) == structs.AllocClientStatusComplete })
	}
	// A stopped alloc keeps the health it reported.
	if !srv.alloc("healthy-1").DeploymentStatus.IsHealthy() {
		t.Errorf("health lost on stop: %+v", srv.alloc("healthy-1").DeploymentStatus)
	}
}

// An alloc that joins a deployment by an in-place update is judged for it
// afresh, without waiting for a task change.
func TestRawExecHealthAfterJoiningDeployment(t *testing.T) {
	srv := newFakeServer()
	c := newRawExecClient(t, srv, t.TempDir())
	defer c.Shutdown()
	select {
	case <-c.Registered():
	case <-time.After(testTimeout):
		t.Fatal("client did not register")
	}
	job := testJob("service", rawTask("web", "/bin/sleep", "30"))
	job.TaskGroups[0].Update = &structs.UpdateStrategy{MaxParallel: 1, MinHealthyTime: 100 * time.Millisecond, HealthyDeadline: time.Minute}
	srv.upsert(testAlloc("join-1", c.NodeID(), job))
	waitFor(t, "running", func() bool { return srv.clientStatus("join-1") == structs.AllocClientStatusRunning })
	if st := srv.alloc("join-1").DeploymentStatus; st != nil {
		t.Fatalf("health reported outside a deployment: %+v", st)
	}
	a := srv.alloc("join-1")
	a.DeploymentID = "dep-2"
	srv.upsert(a)
	waitFor(t, "health in the new deployment", func() bool { return srv.alloc("join-1").DeploymentStatus.IsHealthy() })
	srv.setDesired("join-1", structs.AllocDesiredStatusStop)
	waitFor(t, "stopped", func() bool { return srv.clientStatus("join-1") == structs.AllocClientStatusComplete })
}
