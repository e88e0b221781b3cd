package server

import "github.com/drover-org/drover/core/events"

// initEvents makes the FSM feed this server's event buffer. Every server
// has one: followers apply the same log, so each serves its own stream.
func (s *Server) initEvents() {
	s.events = events.NewBuffer(s.cfg.EventBufferSize, 0)
	s.fsm.SetEventBuffer(s.events)
}

// Events is the server's event buffer, which /v1/event/stream reads.
func (s *Server) Events() *events.Buffer { return s.events }
