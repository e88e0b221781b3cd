package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// jsonJob is a one-task sysbatch job as JSON, with the group and task
// fields given spliced in.
func jsonJob(id, groupFields, taskFields string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"Job":{"ID":%q,"Type":"sysbatch","Datacenters":["*"],"TaskGroups":[{"Name":"g"%s,`+
		`"Tasks":[{"Name":"t","Driver":"raw_exec","Config":{"command":"/bin/true"}%s}]}]}}`, id, groupFields, taskFields))
}

// stateSnapshot is what a refused request must leave as it was.
func stateSnapshot(t *testing.T, a *testAgent) string {
	t.Helper()
	var out strings.Builder
	for _, path := range []string{"/v1/jobs", "/v1/evaluations", "/v1/allocations"} {
		status, body, err := a.RawRetry(http.MethodGet, path, nil)
		if err != nil || status != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, status, err)
		}
		fmt.Fprintf(&out, "%s: %s\n", path, body)
	}
	return out.String()
}

// Input an attacker sends next to the reproductions, on the built
// binary: each is refused with the right status and a message naming the
// field or limit, the agent stays up, and nothing is written.
func TestHardeningRefusals(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	before := stateSnapshot(t, a)

	// A unary operator chain: a few MB of it, under the body limit, used
	// to overflow the HCL parser's stack, a fatal error that killed the
	// agent behind /v1/jobs/parse.
	chain := fmt.Sprintf("job \"chain\" {\n  type = \"sysbatch\"\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n"+
		"      kill_signal = %s1\n    }\n  }\n}\n", strings.Repeat("-", 900_000))
	for _, tc := range []struct {
		name, path string
		body       any
		status     int
		want       []string
	}{{
		name: "the issue's 1,100 levels of [ in task config", path: "/v1/jobs",
		body: json.RawMessage(`{"Job":{"ID":"deep","Type":"sysbatch","Datacenters":["*"],"TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Driver":"raw_exec",` +
			`"Config":{"x":` + strings.Repeat("[", 1100) + strings.Repeat("]", 1100) + `}}]}]}}`),
		status: http.StatusBadRequest, want: []string{"Job.TaskGroups[0].Tasks[0].Config.x", "MaxNestingDepth"},
	}, {
		// MaxInt + 1 wrapped to a negative total, under every limit.
		name: "counts whose sum wraps around", path: "/v1/jobs",
		body: json.RawMessage(fmt.Sprintf(`{"Job":{"ID":"wrap","Type":"sysbatch","Datacenters":["*"],"TaskGroups":[`+
			`{"Name":"g","Count":%d,"Tasks":[{"Name":"t","Driver":"raw_exec","Config":{"command":"/bin/true"}}]},`+
			`{"Name":"h","Count":1,"Tasks":[{"Name":"t","Driver":"raw_exec","Config":{"command":"/bin/true"}}]}]}}`, math.MaxInt64)),
		status: http.StatusBadRequest, want: []string{"max_allocs_per_job"},
	}, {
		name: "negative log rotation", path: "/v1/jobs",
		body:   jsonJob("logs", "", `,"LogConfig":{"MaxFiles":-1,"MaxFileSizeMB":1}`),
		status: http.StatusBadRequest, want: []string{`task "t": logs: max_files must be between 1`},
	}, {
		name: "log rotation overflowing bytes", path: "/v1/jobs",
		body:   jsonJob("logs2", "", fmt.Sprintf(`,"LogConfig":{"MaxFiles":2,"MaxFileSizeMB":%d}`, math.MaxInt64)),
		status: http.StatusBadRequest, want: []string{"max_file_size must be between 1"},
	}, {
		name: "a task name that is a path", path: "/v1/jobs",
		body:   json.RawMessage(`{"Job":{"ID":"path","Type":"sysbatch","Datacenters":["*"],"TaskGroups":[{"Name":"g","Tasks":[{"Name":"../../etc","Driver":"raw_exec","Config":{"command":"/bin/true"}}]}]}}`),
		status: http.StatusBadRequest, want: []string{`task "../../etc": name must not contain slashes`},
	}, {
		// 100 KB that builds 20 MB; the same shape within the body limit
		// builds terabytes.
		name: "a for expression that multiplies its input", path: "/v1/jobs/parse",
		body: map[string]any{"JobHCL": "job \"amp\" {\n  type = \"sysbatch\"\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n" +
			"      config {\n        args = [\"%{for a in [" + strings.Repeat(`"`+strings.Repeat("x", 1000)+`",`, 100) + "]}" +
			strings.Repeat("${a}", 200) + "%{endfor}\"]\n      }\n    }\n  }\n}\n"},
		status: http.StatusBadRequest, want: []string{"job.hcl:7:", "For expression too large"},
	}, {
		// Parsed, 6 MB of empty task blocks took the agent 1.2 GB.
		name: "megabytes of blocks", path: "/v1/jobs/parse",
		body: map[string]any{"JobHCL": "job \"blocks\" {\n  group \"g\" {\n" +
			strings.Repeat("    task \"t\" {}\n", 400_000) + "  }\n}\n"},
		status: http.StatusBadRequest, want: []string{"job.hcl:1:1: File too large", "at most 1048576"},
	}, {
		// Last: without the bound it kills the agent.
		name: "operator chain through /v1/jobs/parse", path: "/v1/jobs/parse",
		body:   map[string]any{"JobHCL": chain, "Canonicalize": true},
		status: http.StatusBadRequest, want: []string{"job.hcl:6:", "Too many operators"},
	}} {
		status, body, err := a.Raw(http.MethodPut, tc.path, tc.body)
		if err != nil {
			t.Errorf("%s: %v (agent alive: %v)", tc.name, err, a.Alive())
			continue
		}
		if status != tc.status {
			t.Errorf("%s: status %d, want %d: %.300s", tc.name, status, tc.status, body)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(body), w) {
				t.Errorf("%s: answer lacks %q: %.300s", tc.name, w, body)
			}
		}
	}

	// The same chain through `drover job run`, which parses locally.
	res := a.CLI("job", "run", harness.WriteFile(t, "chain.hcl", chain))
	if res.Code == 0 || !strings.Contains(res.Stderr, "chain.hcl:6:") || !strings.Contains(res.Stderr, "Too many operators") {
		t.Errorf("job run of an operator chain: want a file:line:col error naming the limit:\n%.500s", res)
	}

	if !a.Alive() {
		t.Fatal("the agent died")
	}
	if after := stateSnapshot(t, a); after != before {
		t.Errorf("refused requests changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// The limits an operator sets in a config file apply: every file is
// merged onto an empty config, and the merge used to drop
// http_max_body_bytes and the server's allocation limits.
func TestHardeningConfiguredLimits(t *testing.T) {
	t.Parallel()
	cfg := harness.WriteFile(t, "limits.hcl", "http_max_body_bytes = 4096\n\nserver {\n  max_allocs_per_job = 2\n}\n")
	a := startAgent(t, "-config", cfg)
	before := stateSnapshot(t, a)

	status, body, err := a.Raw(http.MethodPut, "/v1/jobs", jsonJob("big", "", fmt.Sprintf(`,"Meta":{"a":%q}`, strings.Repeat("x", 5000))))
	if err != nil || status != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "http_max_body_bytes (4096 bytes)") {
		t.Errorf("5000-byte body with http_max_body_bytes = 4096: %d %v %.300s", status, err, body)
	}
	status, body, err = a.Raw(http.MethodPut, "/v1/jobs", jsonJob("three", `,"Count":3`, ""))
	if err != nil || status != http.StatusBadRequest || !strings.Contains(string(body), "max_allocs_per_job = 2") {
		t.Errorf("count 3 with max_allocs_per_job = 2: %d %v %.300s", status, err, body)
	}
	if after := stateSnapshot(t, a); after != before {
		t.Errorf("refused requests changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
