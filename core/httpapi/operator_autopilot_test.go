package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// The autopilot configuration through Nomad's client: Nomad's defaults
// before any write, a write read back, check-and-set against the index,
// bad values refused with the field named and nothing stored, and the
// health of the (single) server.
func TestAutopilotConfigurationWithNomadClient(t *testing.T) {
	c := aclTestServer(t, false)
	op := c.Operator()
	cfg, _, err := op.AutopilotGetConfiguration(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.CleanupDeadServers || cfg.LastContactThreshold != 200*time.Millisecond || cfg.MaxTrailingLogs != 250 ||
		cfg.ServerStabilizationTime != 10*time.Second || cfg.MinQuorum != 0 || cfg.ModifyIndex != 0 {
		t.Fatalf("default configuration: %+v", cfg)
	}
	// A CAS at the index read (0: never written) succeeds once.
	cfg.MinQuorum, cfg.LastContactThreshold = 3, time.Second
	ok, _, err := op.AutopilotCASConfiguration(cfg, nil)
	if err != nil || !ok {
		t.Fatalf("CAS at the read index: %v, %v", ok, err)
	}
	ok, _, err = op.AutopilotCASConfiguration(cfg, nil)
	if err != nil || ok {
		t.Fatalf("CAS at a stale index: %v, %v; want false", ok, err)
	}
	got, _, err := op.AutopilotGetConfiguration(nil)
	if err != nil || got.MinQuorum != 3 || got.LastContactThreshold != time.Second || got.ModifyIndex == 0 {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	got.CleanupDeadServers, got.ServerStabilizationTime = false, 30*time.Second
	if _, err := op.AutopilotSetConfiguration(got, nil); err != nil {
		t.Fatal(err)
	}
	after, _, err := op.AutopilotGetConfiguration(nil)
	if err != nil || after.CleanupDeadServers || after.ServerStabilizationTime != 30*time.Second || after.ModifyIndex <= got.ModifyIndex {
		t.Fatalf("after set: %+v, %v", after, err)
	}

	for _, tc := range []struct {
		name string
		cfg  nomadapi.AutopilotConfiguration
		want string
	}{
		{"zero threshold", nomadapi.AutopilotConfiguration{ServerStabilizationTime: time.Second}, "LastContactThreshold"},
		{"negative stabilization", nomadapi.AutopilotConfiguration{LastContactThreshold: time.Second, ServerStabilizationTime: -time.Second}, "ServerStabilizationTime"},
		{"huge quorum", nomadapi.AutopilotConfiguration{LastContactThreshold: time.Second, MinQuorum: 1000}, "MinQuorum"},
	} {
		if _, err := op.AutopilotSetConfiguration(&tc.cfg, nil); err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want 400 naming %s", tc.name, err, tc.want)
		}
	}
	if again, _, _ := op.AutopilotGetConfiguration(nil); again.ModifyIndex != after.ModifyIndex {
		t.Errorf("a refused write changed the configuration: %+v", again)
	}

	h, _, err := op.AutopilotServerHealth(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Healthy || h.FailureTolerance != 0 || len(h.Servers) != 1 || !h.Servers[0].Leader || !h.Servers[0].Voter ||
		h.Servers[0].SerfStatus != "alive" || h.Leader == "" || len(h.Voters) != 1 || h.Servers[0].StableSince.IsZero() {
		t.Fatalf("health of a single server: %+v", h)
	}
}

// A body the decoder cannot read is a 400, not a write.
func TestAutopilotConfigurationBadBody(t *testing.T) {
	w := newWorld(t, false)
	status, body := w.do(callerMgmt, http.MethodPut, "/v1/operator/autopilot/configuration", map[string]any{"LastContactThreshold": "soon"})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "LastContactThreshold") {
		t.Fatalf("bad duration: %d %s", status, body)
	}
	status, _ = w.do(callerMgmt, http.MethodPut, "/v1/operator/autopilot/configuration?cas=x", map[string]any{"LastContactThreshold": "1s"})
	if status != http.StatusBadRequest {
		t.Fatalf("bad cas: %d", status)
	}
}
