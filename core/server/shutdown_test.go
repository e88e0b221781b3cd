package server

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Shutdown in the middle of scheduling must return: loops waiting on Raft
// applies are stopped before Raft is (see Shutdown). The hang this guards
// against needs Raft to shut down with a committed entry still queued for
// the FSM, which this test provokes only rarely; it was found as a
// ten-minute hang of a -count=3 run.
func TestShutdownWhileScheduling(t *testing.T) {
	for round := 0; round < 3; round++ {
		s := testServer(t, nil)
		registerNodes(t, s, testNode("a"), testNode("b"))
		for i := 0; i < 10; i++ {
			if _, err := s.Jobs().Register(context.Background(), testJob(fmt.Sprintf("j%d", i), "sysbatch"), false, 0); err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan error, 1)
		go func() { done <- s.Shutdown() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: Shutdown hung", round)
		}
		if s.IsLeader() {
			t.Fatal("still leading after Shutdown")
		}
	}
}
