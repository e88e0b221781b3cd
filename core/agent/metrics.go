package agent

import "github.com/drover-org/drover/core/metrics"

// registerPluginMetrics reports each plugin's restarts, read from the
// plugin host at scrape time. Plugin names are the configured plugins: a
// bounded set.
func (a *Agent) registerPluginMetrics() {
	a.metrics.Register(metrics.NewGauges(metrics.Gauge{
		Name: "plugin_restarts_total", Help: "Restarts of a plugin's process after it exited or failed its health check.",
		Labels: []string{"plugin"}, Counter: true,
		Read: func() []metrics.Sample {
			sts := a.host.Status()
			out := make([]metrics.Sample, 0, len(sts))
			for _, st := range sts {
				out = append(out, metrics.Sample{Value: float64(st.Restarts), Labels: []string{st.Name}})
			}
			return out
		},
	}))
}
