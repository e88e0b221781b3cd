package agent

// Telemetry is the agent's telemetry block (Nomad's key names). Every
// agent keeps its metrics in its own registry and serves the JSON summary
// at /v1/metrics; prometheus_metrics adds ?format=prometheus.
type Telemetry struct {
	PrometheusMetrics bool `hcl:"prometheus_metrics,optional"`
}

// prometheusMetrics reports whether /v1/metrics?format=prometheus is on.
func (c *Config) prometheusMetrics() bool {
	return c.Telemetry != nil && c.Telemetry.PrometheusMetrics
}

func mergeTelemetry(a, b *Telemetry) *Telemetry {
	if a == nil && b == nil {
		return nil
	}
	r := Telemetry{}
	if a != nil {
		r = *a
	}
	if b != nil {
		r.PrometheusMetrics = r.PrometheusMetrics || b.PrometheusMetrics
	}
	return &r
}
