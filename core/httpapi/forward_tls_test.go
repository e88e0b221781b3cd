package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// When the agents serve HTTPS, a follower forwards reads to the leader
// over HTTPS with the configured transport.
func TestLeaderReadsOverHTTPS(t *testing.T) {
	var got *http.Request
	leader := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		writeJSON(w, r, http.StatusOK, []string{"from-leader"})
	}))
	defer leader.Close()
	tr := leader.Client().Transport.(*http.Transport)
	defer tr.CloseIdleConnections()
	api, fc := newClusterAPI(t, Config{LeaderScheme: "https", LeaderTransport: tr})
	fc.setLeader(false, leader.Listener.Addr().String())
	rec := httptest.NewRecorder()
	api.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/jobs", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "from-leader") || got == nil || got.TLS == nil {
		t.Fatalf("forwarded read: %d %q (leader saw TLS: %v)", rec.Code, rec.Body.String(), got != nil && got.TLS != nil)
	}
}
