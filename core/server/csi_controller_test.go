package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testtier"
)

// The controller call goes to the first ready node with a healthy
// controller; a node that does not take it in time passes it to the next.
func TestControllerCallTriesNextNode(t *testing.T) {
	s := testServer(t, nil)
	s.csi.Queue().SetPickup(200 * time.Millisecond)
	ctx := context.Background()
	var nodes []*structs.Node
	for _, name := range []string{"a", "b"} {
		n := csiNode(name, "hp", true)
		n.CSIControllerPlugins = map[string]*structs.CSIInfo{"hp": {PluginID: "hp", Healthy: true,
			ControllerInfo: &structs.CSIControllerInfo{SupportsAttachDetach: true}}}
		if _, err := s.Nodes().Register(ctx, n); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	order, err := s.csi.ControllerNodes("hp")
	if err != nil || len(order) != 2 {
		t.Fatalf("controllerNodes = %v, %v", order, err)
	}
	// Only the second in order answers.
	second := nodes[0]
	if second.ID != order[1] {
		second = nodes[1]
	}
	startFakeController(t, s, second, func(*structs.CSIControllerOp) *structs.CSIControllerOpResult {
		return &structs.CSIControllerOpResult{PublishContext: map[string]string{"ok": "1"}}
	})
	r, by, err := s.csi.ControllerCall(ctx, &structs.CSIControllerOp{Kind: structs.CSIControllerOpPublish, PluginID: "hp"})
	if err != nil || by != second.ID || r.PublishContext["ok"] != "1" {
		t.Fatalf("controllerCall = %+v by %s, %v", r, by, err)
	}
}

// A call its caller gives up on while a controller client runs it keeps
// the plugin's calls serialized: the next call, which would go to another
// controller client, waits until the first client reports its result.
func TestControllerAbandonedCallKeepsPluginLocked(t *testing.T) {
	testtier.Slow(t, "waits five pickup times (1 s) to see that a call does not run")
	// Full tier, and only waits: beside the other waiting tests.
	t.Parallel()
	s := testServer(t, nil)
	s.csi.Queue().SetPickup(200 * time.Millisecond)
	ctx := context.Background()
	byID := map[string]*structs.Node{}
	for _, name := range []string{"a", "b"} {
		n := csiNode(name, "hp", true)
		n.CSIControllerPlugins = map[string]*structs.CSIInfo{"hp": {PluginID: "hp", Healthy: true,
			ControllerInfo: &structs.CSIControllerInfo{SupportsAttachDetach: true}}}
		if _, err := s.Nodes().Register(ctx, n); err != nil {
			t.Fatal(err)
		}
		byID[n.ID] = n
	}
	order, err := s.csi.ControllerNodes("hp")
	if err != nil || len(order) != 2 {
		t.Fatalf("controllerNodes = %v, %v", order, err)
	}
	slow, fast := byID[order[0]], byID[order[1]]

	// The first call is taken by the slow client, which does not answer
	// before the caller gives up.
	taken := make(chan *structs.CSIControllerOp, 1)
	go func() {
		r, err := s.CSI().ControllerOps(ctx, &structs.CSIControllerPollArgs{NodeID: slow.ID, SecretID: slow.SecretID, MaxWait: int64(5 * time.Second)})
		if err == nil && len(r.Ops) == 1 {
			taken <- r.Ops[0]
		}
		close(taken)
	}()
	cctx, cancel := context.WithCancel(ctx)
	firstDone := make(chan error, 1)
	go func() {
		_, _, err := s.csi.ControllerCall(cctx, &structs.CSIControllerOp{Kind: structs.CSIControllerOpPublish, PluginID: "hp"})
		firstDone <- err
	}()
	op, ok := <-taken
	if !ok {
		t.Fatal("the slow client got no call")
	}
	cancel()
	if err := <-firstDone; !errors.Is(err, structs.ErrUnavailable) {
		t.Fatalf("abandoned call: %v", err)
	}

	fc := startFakeController(t, s, fast, func(*structs.CSIControllerOp) *structs.CSIControllerOpResult {
		return &structs.CSIControllerOpResult{}
	})
	secondDone := make(chan error, 1)
	go func() {
		_, _, err := s.csi.ControllerCall(ctx, &structs.CSIControllerOp{Kind: structs.CSIControllerOpUnpublish, PluginID: "hp"})
		secondDone <- err
	}()
	// Unserialized, the second call would reach the fast client after one
	// pickup time; it must still be waiting well past that.
	select {
	case err := <-secondDone:
		t.Fatalf("the second call ran while the first was running on its client: %v (fast client calls %d)", err, len(fc.calls()))
	case <-time.After(5 * s.csi.Queue().Pickup()):
	}
	if n := len(fc.calls()); n != 0 {
		t.Fatalf("the fast client got %d calls while the plugin was busy", n)
	}
	// The slow client answers at last: the plugin is free.
	if err := s.CSI().ControllerDone(ctx, &structs.CSIControllerDoneArgs{NodeID: slow.ID, SecretID: slow.SecretID,
		Results: []*structs.CSIControllerOpResult{{ID: op.ID}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-secondDone:
		if err != nil {
			t.Fatalf("second call: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second call never ran after the first ended")
	}
}
