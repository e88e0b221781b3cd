package agent

import (
	"strings"
	"testing"
)

func TestTelemetryConfig(t *testing.T) {
	tests := []struct {
		name, src string
		want      bool
		err       string
	}{
		{"absent", `data_dir = "/tmp/x"`, false, ""},
		{"on", "telemetry {\n  prometheus_metrics = true\n}", true, ""},
		{"off", "telemetry {\n  prometheus_metrics = false\n}", false, ""},
		// A Nomad key drover does not serve is accepted with a warning
		// (TestNomadConfigWarnings); a key of neither is refused.
		{"nomad key accepted", "telemetry {\n  statsd_address = \"x\"\n}", false, ""},
		{"unknown key refused", "telemetry {\n  statsd_adress = \"x\"\n}", false, "agent.hcl:2:3: telemetry.statsd_adress: not a key"},
		{"wrong type refused", "telemetry {\n  prometheus_metrics = \"maybe\"\n}", false, "agent.hcl:2:25: telemetry.prometheus_metrics: Unsuitable value type"},
	}
	for _, tt := range tests {
		cfg, err := parseConfigFragment("agent.hcl", []byte(tt.src))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err = %v, want one naming %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got := cfg.prometheusMetrics(); got != tt.want {
			t.Errorf("%s: prometheus_metrics = %v, want %v", tt.name, got, tt.want)
		}
	}
	// A later file turns it on; an earlier one's setting survives a file
	// without the block.
	on, _ := parseConfigFragment("a.hcl", []byte("telemetry {\n  prometheus_metrics = true\n}"))
	none, _ := parseConfigFragment("b.hcl", []byte(`data_dir = "/tmp/x"`))
	if !on.Merge(none).prometheusMetrics() || !none.Merge(on).prometheusMetrics() {
		t.Error("merge lost telemetry.prometheus_metrics")
	}
}
