package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/server"
)

func TestSchedulerLimitsConfig(t *testing.T) {
	src := `data_dir = "/x"
server {
  enabled                = true
  scheduler_call_timeout = "2s"
  max_allocs_per_job     = 5000
  max_allocs_per_eval    = 500
}
`
	c, err := ParseConfig("agent.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var sc server.Config
	c.Server.applySchedulerLimits(&sc)
	if sc.SchedulerCallTimeout != 2*time.Second || sc.MaxAllocsPerJob != 5000 || sc.MaxAllocsPerEval != 500 {
		t.Fatalf("server config = timeout %s, per job %d, per eval %d", sc.SchedulerCallTimeout, sc.MaxAllocsPerJob, sc.MaxAllocsPerEval)
	}
	for _, tc := range []struct{ setting, want string }{
		{`scheduler_call_timeout = "soon"`, "server.scheduler_call_timeout"},
		{`scheduler_call_timeout = "-1s"`, "server.scheduler_call_timeout: must be positive"},
		{`max_allocs_per_job = -1`, "server.max_allocs_per_job: must be between 0 and 10000000 (got -1)"},
		{`max_allocs_per_eval = -1`, "server.max_allocs_per_eval: must be between 0 and 10000000 (got -1)"},
	} {
		_, err := ParseConfig("agent.hcl", []byte("data_dir = \"/x\"\nserver {\n enabled = true\n "+tc.setting+"\n}\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.setting, err, tc.want)
		}
	}
}
