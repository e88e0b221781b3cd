package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/server/worker"
	"github.com/drover-org/drover/sdk/scheduler"
)

// workersServer is the fake server with a real (not running) worker pool.
type workersServer struct {
	*fakeServer
	pool *worker.Pool
}

func (s workersServer) SchedulerWorkers() []worker.Info { return s.pool.Info() }
func (s workersServer) SchedulerWorkerConfig() (int, []string) {
	if en := s.pool.Enabled(); en != nil {
		return s.pool.Workers(), en
	}
	return s.pool.Workers(), s.pool.ServedTypes()
}
func (s workersServer) SetSchedulerWorkerConfig(n int, enabled []string) error {
	return s.pool.Reconfigure(n, enabled)
}

type servesTypes []string

func (servesTypes) Lookup(string) (scheduler.Scheduler, int, error) { return nil, 0, nil }
func (t servesTypes) ServedTypes() []string                         { return t }

// PUT /v1/agent/schedulers/config changes the worker count (0 allowed)
// and types, answering the new configuration; what Nomad refuses is its
// bare 400 "Invalid request" with the field and rule in
// X-Drover-Error-Detail, and changes nothing.
func TestAgentSchedulerConfigSet(t *testing.T) {
	_, fake := newTestAPI(t, Config{})
	pool := worker.New(worker.Config{Workers: 2, Schedulers: servesTypes{"batch", "service", "system"}})
	api := New(Config{Server: workersServer{fake, pool}})
	h := api.Handler()
	tests := []struct {
		name, body string
		code       int
		want       string // in the body
		detail     string // in X-Drover-Error-Detail
		num        int    // the pool's count after
	}{
		{"zero workers, two types", `{"num_schedulers":0,"enabled_schedulers":["_core","system"]}`, 200, `"num_schedulers":0,"enabled_schedulers":["_core","system"]`, "", 0},
		{"negative", `{"num_schedulers":-1,"enabled_schedulers":["_core","system"]}`, 400, "Invalid request", "num_schedulers:", 0},
		{"without _core", `{"num_schedulers":3,"enabled_schedulers":["system"]}`, 400, "Invalid request", "enabled_schedulers:", 0},
		{"unserved type", `{"num_schedulers":3,"enabled_schedulers":["_core","gpu"]}`, 400, "Invalid request", `"gpu"`, 0},
		{"no list", `{"num_schedulers":3}`, 400, "Invalid request", "enabled_schedulers:", 0},
		{"malformed", `{"num_schedulers":"x"}`, 400, "Invalid request: ", "", 0},
		{"every type", `{"num_schedulers":4,"enabled_schedulers":["_core","batch","service","system"]}`, 200, `"num_schedulers":4,"enabled_schedulers":["batch","service","system","_core"]`, "", 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, h, http.MethodPut, "/v1/agent/schedulers/config", tc.body)
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("HTTP %d %s; want %d with %s", rec.Code, rec.Body, tc.code, tc.want)
			}
			if tc.code == 400 && tc.want == "Invalid request" && rec.Body.String() != "Invalid request" {
				t.Errorf("body %q; want Nomad's bare text", rec.Body)
			}
			if d := rec.Header().Get("X-Drover-Error-Detail"); !strings.Contains(d, tc.detail) {
				t.Errorf("detail %q; want it to name %s", d, tc.detail)
			}
			if pool.Workers() != tc.num {
				t.Errorf("pool runs %d workers; want %d", pool.Workers(), tc.num)
			}
		})
	}
	rec := do(t, h, http.MethodGet, "/v1/agent/schedulers/config", "")
	got := decodeJSON[schedulerWorkerConfig](t, rec)
	if got.NumSchedulers != 4 || !slices.Equal(got.EnabledSchedulers, []string{"batch", "service", "system", "_core"}) {
		t.Errorf("GET after the changes = %+v; want 4 workers of every type", got)
	}
}
