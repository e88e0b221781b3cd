package server

import (
	"context"
	"time"

	"github.com/drover-org/drover/core/server/heartbeats"
	"github.com/drover-org/drover/core/structs"
)

// heartbeater adapts the leader's heartbeat tracker (package heartbeats)
// to the server: it reads the nodes from state and marks a lapsed node
// down through setNodeStatus (the status write and its node-update evals).
type heartbeater struct{ t *heartbeats.Tracker }

func newHeartbeater(s *Server) *heartbeater {
	return &heartbeater{t: heartbeats.New(heartbeats.Config{
		MinTTL: s.cfg.HeartbeatTTL, Grace: s.cfg.HeartbeatGrace,
		MaxPerSecond: s.cfg.MaxHeartbeatsPerSecond, FailoverTTL: s.cfg.FailoverHeartbeatTTL,
		Nodes: func() ([]*structs.Node, error) { return s.State().Nodes(nil) },
		Node:  func(id string) (*structs.Node, error) { return s.State().NodeByID(nil, id) },
		MarkDown: func(n *structs.Node) error {
			return s.setNodeStatus(n, structs.NodeStatusDown, "Node heartbeat missed")
		},
		Logger: s.logger,
	})}
}

// reset restarts a node's timer and returns the TTL to give it.
func (h *heartbeater) reset(nodeID string) time.Duration { return h.t.Reset(nodeID) }

func (h *heartbeater) run(ctx context.Context) { h.t.Run(ctx) }
