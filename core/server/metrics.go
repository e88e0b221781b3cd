package server

import (
	"github.com/drover-org/drover/core/metrics"
	"github.com/drover-org/drover/core/structs"
)

// gauges are the server's scrape-time gauges.
type gauges struct{ s *Server }

// register adds the server's scrape-time gauges: Raft indexes and
// leadership, the eval broker's queues per eval type (bounded by the
// loaded scheduler plugins), blocked evals, the plan queue, the event
// stream and CSI claims by state. They read counts the components keep
// anyway, so nothing is paid between scrapes.
func (g gauges) register(m *metrics.Metrics) {
	s := g.s
	if m == nil {
		return
	}
	one := metrics.One
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	m.Register(metrics.NewGauges(
		metrics.Gauge{Name: "raft_commit_index", Help: "Index of the last Raft entry committed, as this server knows it.",
			Read: func() []metrics.Sample { return one(float64(s.raft.CommitIndex())) }},
		metrics.Gauge{Name: "raft_applied_index", Help: "Index of the last Raft entry this server's FSM applied.",
			Read: func() []metrics.Sample { return one(float64(s.raft.AppliedIndex())) }},
		metrics.Gauge{Name: "raft_is_leader", Help: "1 while this server is the Raft leader.",
			Read: func() []metrics.Sample { return one(b2f(s.IsLeader())) }},
		metrics.Gauge{Name: "broker_evals", Help: "Evals in the leader's eval broker, by eval type and state (ready, unacked).",
			Labels: []string{"eval_type", "state"}, Read: g.brokerSamples},
		metrics.Gauge{Name: "broker_evals_waiting", Help: "Evals in the broker by wait reason: blocked (on their job's outstanding eval), delayed (WaitUntil), waiting (any delay).",
			Labels: []string{"reason"}, Read: func() []metrics.Sample {
				st := s.broker.Stats()
				return []metrics.Sample{
					{Value: float64(st.TotalBlocked), Labels: []string{"blocked"}},
					{Value: float64(st.TotalDelayed), Labels: []string{"delayed"}},
					{Value: float64(st.TotalWaiting), Labels: []string{"waiting"}},
				}
			}},
		metrics.Gauge{Name: "blocked_evals", Help: "Evals blocked for want of capacity (the blocked-evals tracker).",
			Read: func() []metrics.Sample { return one(float64(s.blocked.Stats().TotalBlocked)) }},
		metrics.Gauge{Name: "plan_queue_depth", Help: "Plans waiting for the plan applier.",
			Read: func() []metrics.Sample { return one(float64(s.planQueue.Stats().Depth)) }},
		metrics.Gauge{Name: "event_stream_subscribers", Help: "Open /v1/event/stream subscriptions on this server.",
			Read: func() []metrics.Sample { return one(float64(s.events.Stats().Subscribers)) }},
		metrics.Gauge{Name: "event_stream_events_total", Counter: true, Help: "Events published to this server's event buffer.",
			Read: func() []metrics.Sample { return one(float64(s.events.Stats().Published)) }},
		metrics.Gauge{Name: "event_stream_subscribers_dropped_total", Counter: true, Help: "Subscriptions ended because they fell a whole buffer behind.",
			Read: func() []metrics.Sample { return one(float64(s.events.Stats().Dropped)) }},
		metrics.Gauge{Name: "csi_claims", Help: "CSI volume claims by state (taken, node-detached, ..., past).",
			Labels: []string{"state"}, Read: g.csiClaimSamples},
	))
}

func (g gauges) brokerSamples() []metrics.Sample {
	s := g.s
	st := s.broker.Stats()
	out := make([]metrics.Sample, 0, 2*len(st.ByType))
	for typ, ts := range st.ByType {
		out = append(out,
			metrics.Sample{Value: float64(ts.Ready), Labels: []string{typ, "ready"}},
			metrics.Sample{Value: float64(ts.Unacked), Labels: []string{typ, "unacked"}})
	}
	return out
}

// csiClaimSamples counts claims of every volume by state: live claims by
// their state, released ones as "past".
func (g gauges) csiClaimSamples() []metrics.Sample {
	s := g.s
	vols, err := s.State().CSIVolumes(nil, "", "", "")
	if err != nil {
		return nil
	}
	counts := map[string]int{structs.CSIVolumeClaimStateTaken.String(): 0}
	for _, v := range vols {
		for _, claims := range []map[string]*structs.CSIVolumeClaim{v.ReadClaims, v.WriteClaims} {
			for _, c := range claims {
				counts[c.State.String()]++
			}
		}
		counts["past"] += len(v.PastClaims)
	}
	out := make([]metrics.Sample, 0, len(counts))
	for st, n := range counts {
		out = append(out, metrics.Sample{Value: float64(n), Labels: []string{st}})
	}
	return out
}
