package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestJobBoundsAtTheEdge: a job over a field's bound is a 400 naming the
// field and the bound before it costs a call to the server (a forward to
// the leader), on every path that submits a job; nothing is stored, and
// the answer does not echo the value.
func TestJobBoundsAtTheEdge(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	tests := []struct {
		name, method, target, body, want string
	}{
		{"register a 1 MiB job ID", "PUT", "/v1/jobs", `{"Job":{"ID":"` + huge + `","TaskGroups":[{"Name":"g"}]}}`,
			"Job.ID: 1048576 bytes; exceeds limit MaxIdentifierBytes (128)"},
		{"register by URL", "POST", "/v1/job/web", `{"Job":{"ID":"web","Meta":{"k":"` + huge + `"}}}`,
			`Job.Meta["k"]: 1048576 bytes; exceeds limit MaxTextBytes (8192)`},
		{"namespace from the query", "PUT", "/v1/jobs?namespace=" + strings.Repeat("n", 200), `{"Job":{"ID":"web"}}`,
			"Job.Namespace: 200 bytes; exceeds limit MaxIdentifierBytes (128)"},
		{"plan", "PUT", "/v1/job/web/plan", `{"Job":{"ID":"web","TaskGroups":[{"Name":"` + huge + `"}]}}`,
			"Job.TaskGroups[0].Name: 1048576 bytes; exceeds limit MaxIdentifierBytes (128)"},
		{"dispatch meta", "PUT", "/v1/job/web/dispatch", `{"Meta":{"k":"` + huge + `"}}`,
			`Dispatch.Meta["k"]: 1048576 bytes; exceeds limit MaxTextBytes (8192)`},
		{"dispatch token", "PUT", "/v1/job/web/dispatch?idempotency_token=" + strings.Repeat("t", 200), `{}`,
			"Dispatch.IdempotencyToken: 200 bytes; exceeds limit MaxIdentifierBytes (128)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api, fake := newTestAPI(t, Config{})
			rec := do(t, api.Handler(), tc.method, tc.target, tc.body)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("%d %.300q, want 400 containing %q", rec.Code, rec.Body.String(), tc.want)
			}
			if rec.Body.Len() > 1024 {
				t.Errorf("the answer is %d bytes: it echoes the value", rec.Body.Len())
			}
			if n := fake.numCalls(); n != 0 {
				t.Errorf("the server was called %d times: %+v", n, fake.lastCall(t).Method)
			}
			if jobs, _ := fake.store.Jobs(nil); len(jobs) != 0 {
				t.Errorf("%d jobs stored", len(jobs))
			}
		})
	}
}
