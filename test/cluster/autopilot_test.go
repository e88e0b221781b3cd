package cluster

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// autopilotHealth is GET /v1/operator/autopilot/health (200 healthy, 429
// not, with the same body).
type autopilotHealth struct {
	Healthy          bool
	FailureTolerance int
	Leader           string
	Servers          []struct {
		ID, Name, SerfStatus, LastContact string
		Leader, Healthy, Voter            bool
		StableSince                       time.Time
	}
}

func readHealth(a *agent) (*autopilotHealth, error) {
	status, body, err := a.Raw(http.MethodGet, "/v1/operator/autopilot/health", nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK && status != http.StatusTooManyRequests {
		return nil, fmt.Errorf("health from %s: %d %s", a, status, strings.TrimSpace(string(body)))
	}
	var h autopilotHealth
	if err := json.Unmarshal(body, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

func setAutopilot(t *testing.T, a *agent, cfg map[string]any) {
	t.Helper()
	var ok bool
	if status, err := a.DoRetry(http.MethodPut, "/v1/operator/autopilot/configuration", cfg, &ok); err != nil || status != http.StatusOK || !ok {
		t.Fatalf("autopilot set-config on %s: %d %v %v", a, status, ok, err)
	}
}

// The cluster starts from the agents' autopilot block. A follower's machine
// dies. Autopilot reports it failed; while MinQuorum asks for three voters
// it stays in the Raft configuration however long it is gone; once
// MinQuorum allows (set through the API), the leader removes it (it has
// been gone longer than ServerStabilizationTime and the two left are a
// quorum), logs the removal, and the health shows two healthy servers.
func TestAutopilotRemovesDeadServer(t *testing.T) {
	const stabilization = 2 * time.Second
	c := newCluster(t, options{agentExtra: `
autopilot {
  cleanup_dead_servers      = true
  last_contact_threshold    = "5s"
  max_trailing_logs         = 1000
  min_quorum                = 3
  server_stabilization_time = "2s"
}
`})
	l := c.leader()
	cfg := map[string]any{"CleanupDeadServers": true, "LastContactThreshold": "5s", "MaxTrailingLogs": 1000,
		"MinQuorum": 3, "ServerStabilizationTime": stabilization.String()}

	// Every server reads the configuration of the block, which the leader
	// wrote through Raft.
	for _, s := range c.servers {
		harness.WaitFor(t, waitTimeout, s.Name+"'s autopilot configuration", func() (bool, string) {
			var got struct {
				MinQuorum               int
				ServerStabilizationTime string
			}
			status, err := s.Do(http.MethodGet, "/v1/operator/autopilot/configuration?stale", nil, &got)
			return err == nil && status == http.StatusOK && got.MinQuorum == 3 && got.ServerStabilizationTime == "2s",
				fmt.Sprintf("%d %+v %v", status, got, err)
		})
	}
	harness.WaitFor(t, waitTimeout, "three healthy servers", func() (bool, string) {
		h, err := readHealth(l)
		return err == nil && h.Healthy && len(h.Servers) == 3 && h.FailureTolerance == 1, fmt.Sprintf("%+v %v", h, err)
	})

	dead := c.followers(l)[0]
	dead.crash()
	l = c.leader()
	// Failed, and failed for longer than the stabilization time, yet kept:
	// removing it would leave fewer voters than MinQuorum.
	harness.WaitFor(t, waitTimeout, dead.Name+" failed past the stabilization time", func() (bool, string) {
		h, err := readHealth(l)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range h.Servers {
			if s.ID == dead.Name {
				return s.SerfStatus == "failed" && !s.Healthy && time.Since(s.StableSince) > 3*stabilization,
					fmt.Sprintf("%+v", s)
			}
		}
		return false, fmt.Sprintf("%s not in %+v", dead, h)
	})
	peers, err := raftPeers(l)
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) != 3 {
		t.Fatalf("with MinQuorum 3 the dead server was removed: %+v", peers)
	}
	if h, err := readHealth(l); err != nil || h.Healthy || h.FailureTolerance != 0 {
		t.Errorf("health with a dead server: %+v, %v; want unhealthy, tolerance 0", h, err)
	}

	cfg["MinQuorum"] = 0
	setAutopilot(t, l, cfg)
	harness.WaitFor(t, waitTimeout, dead.Name+" removed from the Raft configuration", func() (bool, string) {
		l := c.leader()
		peers, err := raftPeers(l)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range peers {
			if p.ID == dead.Name {
				return false, fmt.Sprintf("%+v", peers)
			}
		}
		return len(peers) == 2, fmt.Sprintf("%+v", peers)
	})
	if !c.logsContain("autopilot: removed dead server") {
		t.Error("no server logged the removal")
	}
	harness.WaitFor(t, waitTimeout, "two healthy servers", func() (bool, string) {
		h, err := readHealth(c.leader())
		return err == nil && h.Healthy && len(h.Servers) == 2 && h.FailureTolerance == 0, fmt.Sprintf("%+v %v", h, err)
	})
	// The two left still take writes.
	register(c.leader(), fmt.Sprintf(trueJob, "after-cleanup"))
}
