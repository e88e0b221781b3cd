package client

import (
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

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
