package client

import (
	"github.com/drover-org/drover/core/metrics"
	"github.com/drover-org/drover/core/structs"
)

// allocStatuses are the client statuses the allocs gauge always reports,
// so that a status with no alloc reads 0 rather than vanishing.
var allocStatuses = []string{
	structs.AllocClientStatusPending, structs.AllocClientStatusRunning, structs.AllocClientStatusComplete,
	structs.AllocClientStatusFailed, structs.AllocClientStatusLost,
}

// RegisterMetrics adds the client's scrape-time gauges to m: its allocs
// by client status. Task restarts are counted as they happen.
func (c *Client) RegisterMetrics(m *metrics.Metrics) {
	m.Register(metrics.NewGauges(metrics.Gauge{
		Name: "client_allocs", Help: "Allocations on this client's node, by client status.",
		Labels: []string{"status"},
		Read: func() []metrics.Sample {
			counts := c.allocCounts()
			out := make([]metrics.Sample, 0, len(counts))
			for _, st := range allocStatuses {
				out = append(out, metrics.Sample{Value: float64(counts[st]), Labels: []string{st}})
				delete(counts, st)
			}
			for st, n := range counts {
				out = append(out, metrics.Sample{Value: float64(n), Labels: []string{st}})
			}
			return out
		},
	}))
}

func (c *Client) allocCounts() map[string]int {
	c.mu.Lock()
	runners := make([]*allocRunner, 0, len(c.runners))
	for _, r := range c.runners {
		runners = append(runners, r)
	}
	c.mu.Unlock()
	counts := make(map[string]int, len(allocStatuses))
	for _, r := range runners {
		r.mu.Lock()
		counts[r.status]++
		r.mu.Unlock()
	}
	return counts
}
