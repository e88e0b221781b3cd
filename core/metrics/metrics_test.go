package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestStatusClass(t *testing.T) {
	for status, want := range map[int]string{200: "2xx", 204: "2xx", 301: "3xx", 404: "4xx", 429: "4xx", 500: "5xx", 503: "5xx", 101: "1xx", 0: "0", 700: "700"} {
		if got := statusClass(status); got != want {
			t.Errorf("statusClass(%d) = %q, want %q", status, got, want)
		}
	}
}

// A nil *Metrics observes nothing and does not panic: servers and clients
// built without metrics call the same seams.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.RaftApplied(time.Millisecond)
	m.LeaderChanged()
	m.SchedulerCall("p", "batch", time.Millisecond, true)
	m.PlanApplied(time.Millisecond, 2)
	m.HTTPRequest("GET /v1/jobs", 200, time.Millisecond)
	m.GCReaped("evals", 3)
	m.GCRun("evals", time.Millisecond)
	m.TaskRestarted()
	m.Register(NewGauges())
}

func TestInstrumentsMove(t *testing.T) {
	m := New()
	m.HTTPRequest("GET /v1/jobs", 200, time.Millisecond)
	m.HTTPRequest("GET /v1/jobs", 201, time.Millisecond)
	m.HTTPRequest("GET /v1/jobs", 404, time.Millisecond)
	m.PlanApplied(time.Millisecond, 0)
	m.PlanApplied(time.Millisecond, 3)
	m.SchedulerCall("sysbatch-plugin", "sysbatch", time.Millisecond, false)
	m.SchedulerCall("sysbatch-plugin", "sysbatch", time.Millisecond, true)
	m.GCReaped("evals", 0) // nothing reaped: no series
	m.GCReaped("allocs", 4)
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"http 2xx", counterValue(t, m.httpRequests.WithLabelValues("GET /v1/jobs", "2xx")), 2},
		{"http 4xx", counterValue(t, m.httpRequests.WithLabelValues("GET /v1/jobs", "4xx")), 1},
		{"plan nodes rejected", counterValue(t, m.planNodesRejected), 3},
		{"scheduler errors", counterValue(t, m.schedErrors.WithLabelValues("sysbatch-plugin", "sysbatch")), 1},
		{"gc allocs", counterValue(t, m.gcReaped.WithLabelValues("allocs")), 4},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	ch := make(chan prometheus.Metric, 8)
	m.gcReaped.Collect(ch)
	close(ch)
	if n := len(ch); n != 1 {
		t.Errorf("gc series = %d, want 1 (a zero reap adds none)", n)
	}
}

func counterValue(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetCounter().GetValue()
}

func TestGauges(t *testing.T) {
	m := New()
	n := 0.0
	m.Register(NewGauges(
		Gauge{Name: "things", Help: "h", Labels: []string{"state"}, Read: func() []Sample {
			return []Sample{{Value: n, Labels: []string{"a"}}, {Value: 2 * n, Labels: []string{"b"}}}
		}},
		Gauge{Name: "things_total", Help: "h", Counter: true, Read: func() []Sample { return One(n) }},
	))
	n = 5
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		found[f.GetName()] = f
	}
	g := found["drover_things"]
	if g == nil || g.GetType() != dto.MetricType_GAUGE || len(g.GetMetric()) != 2 || g.GetMetric()[1].GetGauge().GetValue() != 10 {
		t.Fatalf("drover_things = %v", g)
	}
	c := found["drover_things_total"]
	if c == nil || c.GetType() != dto.MetricType_COUNTER || c.GetMetric()[0].GetCounter().GetValue() != 5 {
		t.Fatalf("drover_things_total = %v", c)
	}
	for name := range found {
		if !strings.HasPrefix(name, "drover_") && !strings.HasPrefix(name, "go_") {
			t.Errorf("metric %s lacks the drover_ prefix", name)
		}
	}
}
