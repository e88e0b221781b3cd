package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testwait"
)

// TestAdminRoutes: eval delete, node evaluate and node purge over HTTP,
// with Nomad's bodies and statuses.
func TestAdminRoutes(t *testing.T) {
	w := newWorld(t, false)
	st := w.h.srv.State()
	evalID := w.evals["default"]
	testwait.For(t, 30*time.Second, "the job's eval to finish", func() bool {
		e, _ := st.EvalByID(nil, evalID)
		return e != nil && e.TerminalStatus()
	})
	node := &structs.Node{ID: "3f1d2a4b-0000-4000-8000-000000000001", SecretID: "3f1d2a4b-0000-4000-8000-000000000002", Name: "n1",
		Datacenter: "dc1", NodePool: "default", Status: structs.NodeStatusReady, Attributes: map[string]string{"kernel.name": "linux"}}
	if _, err := w.h.nodes.(interface {
		Register(context.Context, *structs.Node) (time.Duration, error)
	}).Register(context.Background(), node); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, method, path string
		body               any
		code               int
		want               string
	}{
		{name: "delete needs IDs or a filter", method: "DELETE", path: "/v1/evaluations", body: map[string]any{}, code: 400, want: "one is required"},
		{name: "delete bad filter", method: "DELETE", path: "/v1/evaluations", body: map[string]any{"Filter": "Status"}, code: 400, want: "Filter:"},
		{name: "delete with the broker running", method: "DELETE", path: "/v1/evaluations", body: map[string]any{"EvalIDs": []string{evalID}}, code: 400, want: "eval broker is enabled"},
		{name: "pause the broker", method: "PUT", path: "/v1/operator/scheduler/configuration", body: map[string]any{"PauseEvalBroker": true}, code: 200, want: `"Updated":true`},
		{name: "delete unknown", method: "DELETE", path: "/v1/evaluations", body: map[string]any{"EvalIDs": []string{"8e231cf4-ca48-43ff-b694-5801e69e22fa"}}, code: 404, want: "eval not found"},
		{name: "delete by ID", method: "DELETE", path: "/v1/evaluations", body: map[string]any{"EvalIDs": []string{evalID}}, code: 200, want: `"Count":1`},
		{name: "node evaluate", method: "POST", path: "/v1/node/" + node.ID + "/evaluate", code: 200, want: `"NodeModifyIndex"`},
		{name: "node evaluate missing", method: "PUT", path: "/v1/node/nope/evaluate", code: 404, want: "node not found"},
		{name: "node purge", method: "PUT", path: "/v1/node/" + node.ID + "/purge", code: 200, want: `"NodeModifyIndex"`},
		{name: "node purge again", method: "POST", path: "/v1/node/" + node.ID + "/purge", code: 404, want: "node not found"},
	}
	for _, tc := range tests {
		status, body := w.do(callerMgmt, tc.method, tc.path, tc.body)
		if status != tc.code || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: %s %s: %d %s; want %d with %q", tc.name, tc.method, tc.path, status, body, tc.code, tc.want)
		}
	}
	if e, _ := st.EvalByID(nil, evalID); e != nil {
		t.Error("deleted eval is still stored")
	}
	if n, _ := st.NodeByID(nil, node.ID); n != nil {
		t.Error("purged node is still stored")
	}
	var resp struct{ Count int }
	_, body := w.do(callerMgmt, "DELETE", "/v1/evaluations", map[string]any{"Filter": `Status == "complete"`})
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if status, _ := w.do(callerMgmt, http.MethodGet, "/v1/node/x/purge", nil); status == http.StatusOK {
		t.Error("GET purge answered 200")
	}
}
