package client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// slowStopDriver holds every StopTask until release is closed, so that a
// Destroy is still running when the server places a new alloc.
type slowStopDriver struct {
	*fakeDriver
	release  chan struct{}
	stopping chan struct{} // closed at the first StopTask
	once     sync.Once
}

func (d *slowStopDriver) StopTask(ctx context.Context, id string, timeout time.Duration, signal string) error {
	d.once.Do(func() { close(d.stopping) })
	<-d.release
	return d.fakeDriver.StopTask(ctx, id, timeout, signal)
}

// watchedServer records the index of every blocking alloc query: a query
// past index n means the watcher has reconciled what n brought.
type watchedServer struct {
	*fakeServer
	mu   sync.Mutex
	seen uint64
}

func (s *watchedServer) Allocs(ctx context.Context, nodeID, region string, minIndex uint64, maxWait time.Duration) ([]*structs.Allocation, uint64, error) {
	s.mu.Lock()
	s.seen = max(s.seen, minIndex)
	s.mu.Unlock()
	return s.fakeServer.Allocs(ctx, nodeID, region, minIndex, maxWait)
}

func (s *watchedServer) queried(index uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen >= index
}

// The dev agent's Destroy kills every task; an alloc the server places
// meanwhile (the replacement of one the kill stopped, as the dev agent's
// own server does) is never started: its task would outlive the agent.
func TestClientDestroyStartsNoNewAlloc(t *testing.T) {
	srv := &watchedServer{fakeServer: newFakeServer()}
	world := newFakeWorld()
	drv := &slowStopDriver{fakeDriver: newFakeDriver(world), release: make(chan struct{}), stopping: make(chan struct{})}
	c, err := New(Config{
		StateDir: t.TempDir(), Server: srv, Drivers: fakeProvider{"fake": drv},
		UpdateBatchInterval: 5 * time.Millisecond, RetryInterval: 5 * time.Millisecond, MaxRetryInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	srv.upsert(testAlloc("svc-1", c.NodeID(), testJob("service", fakeTaskSpec("main", `{}`))))
	waitFor(t, "svc-1 running", func() bool { return srv.clientStatus("svc-1") == structs.AllocClientStatusRunning })

	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		c.Destroy(ctx)
	}()
	select {
	case <-drv.stopping: // Destroy is killing svc-1
	case <-time.After(testTimeout):
		t.Fatal("Destroy did not stop svc-1's task")
	}
	repl := testAlloc("repl-1", c.NodeID(), testJob("service", fakeTaskSpec("repl", `{}`)))
	srv.upsert(repl)
	waitFor(t, "the watcher to have seen repl-1", func() bool { return srv.queried(repl.AllocModifyIndex) })
	if c.runner("repl-1") != nil {
		t.Error("an alloc placed during Destroy got a runner")
	}
	close(drv.release)
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatal("Destroy did not return")
	}
	if n := world.startCount("repl"); n != 0 || world.running("repl-1/repl") {
		t.Errorf("the alloc placed during Destroy was started (%d starts); its task outlives the client", n)
	}
	if world.running("svc-1/main") {
		t.Error("Destroy left svc-1's task running")
	}
}
