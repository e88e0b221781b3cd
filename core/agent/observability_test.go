package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	nomad "github.com/hashicorp/nomad/api"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/drover-org/drover/internal/testtier"
)

// startDevAgentWith is startDevAgent with the config adjusted by edit.
func startDevAgentWith(t *testing.T, edit func(*Config)) *Agent {
	t.Helper()
	testtier.Agent(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DevConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ports.HTTP = ln.Addr().(*net.TCPAddr).Port
	cfg.Ports.RPC = freePort(t)
	edit(cfg)
	logs := &lockedBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Name: "agent", Level: hclog.Debug, Output: logs})
	a, err := New(cfg, Options{Logger: logger, HTTPListener: ln, PluginEnv: []string{testPluginEnv + "=1"}, SelfExe: os.Args[0]})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	var once sync.Once
	t.Cleanup(func() {
		once.Do(a.Shutdown)
		if t.Failed() {
			t.Logf("--- agent log ---\n%s", logs)
		}
	})
	return a
}

// scrape reads the agent's Prometheus metrics and parses them with the
// Prometheus text parser.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/metrics?format=prometheus")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %d %s", resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return fams
}

// value sums a family's samples whose labels include want (histograms:
// their sample count).
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	var sum float64
	found := false
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		found = true
		switch {
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum, found
}

var idLike = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// A dev agent end to end: the event stream shows a job's registration, its
// placement and the client's updates through the official client, and the
// Prometheus metrics move with the same work and carry no IDs in labels.
func TestEventStreamAndMetricsEndToEnd(t *testing.T) {
	a := startDevAgentWith(t, func(c *Config) { c.Telemetry = &Telemetry{PrometheusMetrics: true} })
	c := nomadClient(t, a.HTTPAddr())
	waitFor(t, "a ready node", func() (bool, string) {
		nodes, _, err := c.Nodes().List(nil)
		if err != nil {
			return false, err.Error()
		}
		return len(nodes) == 1 && nodes[0].Status == "ready", fmt.Sprintf("%+v", nodes)
	})
	before := scrape(t, a.HTTPAddr())
	plansBefore, _ := value(before, "drover_plan_apply_duration_seconds", nil)

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	stream, err := c.EventStream().Stream(ctx, map[nomad.Topic][]string{
		nomad.TopicJob: {"obs"}, nomad.TopicAllocation: {"obs"},
	}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Register(sysbatchJob("obs"), nil); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for !(seen["JobRegistered"] && seen["PlanResult"] && seen["AllocationUpdated"]) {
		var evs *nomad.Events
		select {
		case evs = <-stream:
		case <-ctx.Done():
			t.Fatalf("timed out; saw %v", seen)
		}
		if evs == nil || evs.Err != nil {
			t.Fatalf("stream ended: %+v", evs)
		}
		for _, e := range evs.Events {
			seen[e.Type] = true
			switch e.Topic {
			case nomad.TopicJob:
				j, err := e.Job()
				if err != nil || *j.ID != "obs" || *j.Type != "sysbatch" {
					t.Fatalf("job payload: %+v %v", j, err)
				}
			case nomad.TopicAllocation:
				al, err := e.Allocation()
				if err != nil || al.JobID != "obs" {
					t.Fatalf("alloc payload: %+v %v", al, err)
				}
			}
		}
	}
	cancel()

	waitFor(t, "the alloc to complete", func() (bool, string) {
		allocs, _, err := c.Jobs().Allocations("obs", true, nil)
		if err != nil {
			return false, err.Error()
		}
		return len(allocs) == 1 && allocs[0].ClientStatus == "complete", fmt.Sprintf("%+v", allocs)
	})
	var after map[string]*dto.MetricFamily
	waitFor(t, "the client's complete alloc in its metrics", func() (bool, string) {
		after = scrape(t, a.HTTPAddr())
		v, _ := value(after, "drover_client_allocs", map[string]string{"status": "complete"})
		return v >= 1, fmt.Sprint(v)
	})

	plans, _ := value(after, "drover_plan_apply_duration_seconds", nil)
	if plans <= plansBefore {
		t.Errorf("plan applies: %v before the job, %v after; want more", plansBefore, plans)
	}
	checks := []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"drover_raft_apply_duration_seconds", nil, 1},
		{"drover_raft_applied_index", nil, 1},
		{"drover_raft_commit_index", nil, 1},
		{"drover_raft_is_leader", nil, 1},
		{"drover_raft_leader_changes_total", nil, 1},
		{"drover_scheduler_call_duration_seconds", map[string]string{"job_type": "sysbatch"}, 1},
		{"drover_http_requests_total", map[string]string{"route": "PUT /v1/jobs", "code": "2xx"}, 1},
		{"drover_http_request_duration_seconds", map[string]string{"route": "GET /v1/event/stream"}, 1},
		{"drover_event_stream_events_total", nil, 3},
		{"drover_plan_queue_depth", nil, 0},
		{"drover_broker_evals_waiting", map[string]string{"reason": "blocked"}, 0},
		{"drover_blocked_evals", nil, 0},
		{"drover_csi_claims", map[string]string{"state": "taken"}, 0},
		{"drover_plugin_restarts_total", nil, 0},
		{"drover_client_task_restarts_total", nil, 0},
		{"drover_plan_nodes_rejected_total", nil, 0},
	}
	for _, c := range checks {
		v, ok := value(after, c.name, c.labels)
		if !ok || v < c.min {
			t.Errorf("%s%v = %v (present %v); want at least %v", c.name, c.labels, v, ok, c.min)
		}
	}
	for name, f := range after {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if idLike.MatchString(l.GetValue()) {
					t.Errorf("%s label %s=%q carries an ID", name, l.GetName(), l.GetValue())
				}
			}
		}
		if strings.HasPrefix(name, "drover_") && f.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total") {
			t.Errorf("counter %s does not end in _total", name)
		}
	}
}

// The dev agent serves the Prometheus format, as Nomad's does.
func TestMetricsPrometheusDev(t *testing.T) {
	a := startDevAgentWith(t, func(*Config) {})
	resp, err := http.Get("http://" + a.HTTPAddr() + "/v1/metrics?format=prometheus")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") || !strings.Contains(string(b), "# TYPE ") {
		t.Fatalf("dev agent, format=prometheus: %d %q %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}

// Without telemetry.prometheus_metrics the Prometheus format is refused
// with 400 (as Nomad); the JSON summary is always served.
func TestMetricsPrometheusOff(t *testing.T) {
	a := startDevAgentWith(t, func(c *Config) { c.Telemetry = nil })
	resp, err := http.Get("http://" + a.HTTPAddr() + "/v1/metrics?format=prometheus")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "prometheus_metrics") {
		t.Fatalf("format=prometheus without telemetry: %d %s", resp.StatusCode, b)
	}
	c := nomadClient(t, a.HTTPAddr())
	var summary struct {
		Gauges   []struct{ Name string }
		Counters []struct{ Name string }
		Samples  []struct {
			Name  string
			Count int
		}
	}
	waitFor(t, "gauges and samples in the JSON summary", func() (bool, string) {
		if _, err := c.Raw().Query("/v1/metrics", &summary, nil); err != nil {
			return false, err.Error()
		}
		return len(summary.Gauges) > 0 && len(summary.Samples) > 0, fmt.Sprintf("%+v", summary)
	})
	hasGauge := false
	for _, g := range summary.Gauges {
		hasGauge = hasGauge || g.Name == "drover_raft_is_leader"
	}
	if !hasGauge {
		t.Fatalf("JSON summary lacks drover_raft_is_leader: %+v", summary.Gauges)
	}
}
