package httpapi

import (
	"strings"
	"testing"
)

// RejectJobRegistration refuses job register, dispatch and scale with
// Nomad's 403 to every caller but a management token (with ACLs off, to
// every caller); reads go on; clearing it lets the same caller register.
func TestRejectJobRegistration(t *testing.T) {
	job := func() map[string]any {
		return map[string]any{"Job": map[string]any{
			"ID": "web", "Namespace": "team", "Type": "sysbatch", "Datacenters": []string{"dc1"},
			"TaskGroups": []map[string]any{{"Name": "g", "Count": 1, "Tasks": []map[string]any{{
				"Name": "t", "Driver": "raw_exec", "Config": map[string]any{"command": "/bin/true"},
				"Resources": map[string]any{"CPU": 100, "MemoryMB": 64}}}}},
		}}
	}
	scale := map[string]any{"Count": 2, "Target": map[string]string{"Group": "g"}}
	const refusal = "Job registration, dispatch, and scale are disabled by the scheduler configuration"
	set := func(w *aclWorld, on bool) {
		t.Helper()
		if status, body := w.do(callerMgmt, "PUT", "/v1/operator/scheduler/configuration", map[string]any{"RejectJobRegistration": on}); status != 200 {
			t.Fatalf("set RejectJobRegistration=%v: %d %s", on, status, body)
		}
	}
	for _, tc := range []struct {
		name      string
		acl       bool
		caller    int
		mayWrite  bool // a management token passes
		wantWrite int  // status of a write without the switch
	}{
		{"ACLs on, namespace token", true, callerOtherNS, false, 200},
		{"ACLs on, management", true, callerMgmt, true, 200},
		{"ACLs off, anonymous", false, callerNone, false, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.acl)
			set(w, true)
			for _, req := range []struct {
				method, path string
				body         any
			}{
				{"PUT", "/v1/jobs?namespace=team", job()},
				{"PUT", "/v1/job/web/scale?namespace=team", scale},
				{"PUT", "/v1/job/web/dispatch?namespace=team", map[string]any{}},
			} {
				status, body := w.do(tc.caller, req.method, req.path, req.body)
				refused := status == 403 && strings.Contains(string(body), refusal)
				if refused == tc.mayWrite {
					t.Errorf("%s %s as %s with the switch on: %d %s; want refused: %v", req.method, req.path, callerNames[tc.caller], status, body, !tc.mayWrite)
				}
			}
			if status, body := w.do(tc.caller, "GET", "/v1/job/web?namespace=team", nil); status != 200 {
				t.Errorf("read with the switch on: %d %s", status, body)
			}
			set(w, false)
			if status, body := w.do(tc.caller, "PUT", "/v1/jobs?namespace=team", job()); status != tc.wantWrite {
				t.Errorf("register with the switch off: %d %s; want %d", status, body, tc.wantWrite)
			}
		})
	}
}
