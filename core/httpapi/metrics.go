package httpapi

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// metricsHandlers serves /v1/metrics. Its handlers reach the server through
// the embedded pointer.
type metricsHandlers struct{ *HTTPServer }

// metricsGet serves GET /v1/metrics: a JSON summary as Nomad's (Gauges,
// Counters, Samples), or with ?format=prometheus the Prometheus text
// format, which, as in Nomad, needs telemetry { prometheus_metrics = true }
// (400 otherwise).
func (s metricsHandlers) metricsGet(w http.ResponseWriter, r *http.Request) {
	if s.metrics == nil {
		http.Error(w, "metrics are not collected by this agent", http.StatusNotImplemented)
		return
	}
	switch f := r.URL.Query().Get("format"); f {
	case "":
	case "prometheus":
		if !s.prometheus {
			s.writeError(w, badRequest("Prometheus is not enabled: set telemetry { prometheus_metrics = true } in the agent configuration"))
			return
		}
		promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{ErrorLog: nil}).ServeHTTP(w, r)
		return
	default:
		s.writeError(w, badRequest("Invalid format query parameter %q: expected \"prometheus\" or none", f))
		return
	}
	families, err := s.metrics.Registry.Gather()
	if err != nil {
		s.logger.Warn("gathering metrics", "error", err)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(summarize(families, time.Now()))
}

// metricsSummary is Nomad's /v1/metrics body (go-metrics' in-memory sink
// summary): gauges, counters and samples (here: histograms and summaries,
// by count, sum and mean).
type metricsSummary struct {
	Timestamp string
	Gauges    []gaugeValue
	Points    []any
	Counters  []sampledValue
	Samples   []sampledValue
}

type gaugeValue struct {
	Name   string
	Value  float64
	Labels map[string]string
}

type sampledValue struct {
	Name   string
	Count  int
	Rate   float64
	Sum    float64
	Min    float64
	Max    float64
	Mean   float64
	Stddev float64
	Labels map[string]string
}

func summarize(families []*dto.MetricFamily, now time.Time) metricsSummary {
	out := metricsSummary{Timestamp: now.UTC().Format("2006-01-02 15:04:05 -0700 MST"),
		Gauges: []gaugeValue{}, Points: []any{}, Counters: []sampledValue{}, Samples: []sampledValue{}}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetType() {
			case dto.MetricType_GAUGE:
				out.Gauges = append(out.Gauges, gaugeValue{f.GetName(), finite(m.GetGauge().GetValue()), labels})
			case dto.MetricType_COUNTER:
				v := finite(m.GetCounter().GetValue())
				out.Counters = append(out.Counters, sampledValue{Name: f.GetName(), Count: int(v), Sum: v, Labels: labels})
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				sv := sampledValue{Name: f.GetName(), Count: int(h.GetSampleCount()), Sum: finite(h.GetSampleSum()), Labels: labels}
				if sv.Count > 0 {
					sv.Mean = sv.Sum / float64(sv.Count)
				}
				out.Samples = append(out.Samples, sv)
			case dto.MetricType_SUMMARY:
				sm := m.GetSummary()
				sv := sampledValue{Name: f.GetName(), Count: int(sm.GetSampleCount()), Sum: finite(sm.GetSampleSum()), Labels: labels}
				if sv.Count > 0 {
					sv.Mean = sv.Sum / float64(sv.Count)
				}
				out.Samples = append(out.Samples, sv)
			}
		}
	}
	sort.SliceStable(out.Gauges, func(i, j int) bool { return out.Gauges[i].Name < out.Gauges[j].Name })
	return out
}

// finite maps NaN and infinities (which JSON cannot carry) to 0.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// routeKey carries, in a request's context, where the route table writes
// the pattern that served it, for the request metrics.
type routeKey struct{}

// withRoute readies r to learn its route pattern.
func withRoute(r *http.Request) (*http.Request, *string) {
	route := new(string)
	return r.WithContext(context.WithValue(r.Context(), routeKey{}, route)), route
}

// setRoute records pattern as the route of the request, if it is asked.
func setRoute(r *http.Request, pattern string) {
	if p, ok := r.Context().Value(routeKey{}).(*string); ok {
		*p = pattern
	}
}
