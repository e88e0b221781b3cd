package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/metrics"
)

func TestMetricsEndpoint(t *testing.T) {
	m := metrics.New()
	on, _ := newTestAPI(t, Config{Metrics: m, Prometheus: true})
	off, _ := newTestAPI(t, Config{Metrics: m})
	none, _ := newTestAPI(t, Config{})
	tests := []struct {
		name   string
		h      *HTTPServer
		target string
		status int
		want   string
	}{
		{"json summary", off, "/v1/metrics", http.StatusOK, `"Gauges":[`},
		{"prometheus on", on, "/v1/metrics?format=prometheus", http.StatusOK, "# TYPE drover_raft_apply_duration_seconds histogram"},
		{"prometheus off", off, "/v1/metrics?format=prometheus", http.StatusBadRequest, "Prometheus is not enabled"},
		{"bad format", on, "/v1/metrics?format=xml", http.StatusBadRequest, "Invalid format query parameter"},
		{"no registry", none, "/v1/metrics", http.StatusNotImplemented, "not collected"},
	}
	for _, tt := range tests {
		rec := do(t, tt.h.Handler(), "GET", tt.target, "")
		if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
			t.Errorf("%s: %d %.300s; want %d with %q", tt.name, rec.Code, rec.Body.String(), tt.status, tt.want)
		}
	}
	// Requests are counted by route pattern, never by path.
	do(t, on.Handler(), "GET", "/v1/job/some-job-id", "")
	rec := do(t, on.Handler(), "GET", "/v1/metrics?format=prometheus", "")
	body := rec.Body.String()
	if !strings.Contains(body, `drover_http_requests_total{code="4xx",route="/v1/job/"}`) &&
		!strings.Contains(body, `drover_http_requests_total{code="2xx",route="/v1/job/"}`) {
		t.Errorf("no request series for the /v1/job/ pattern:\n%s", grepLines(body, "drover_http_requests_total"))
	}
	if strings.Contains(body, "some-job-id") {
		t.Error("a request path leaked into a label")
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
