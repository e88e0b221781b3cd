package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// The API's JSON as the tests read it; the harness declares it so that
// every suite pins the same wire format.
type (
	jobStub          = harness.JobStub
	job              = harness.Job
	alloc            = harness.Alloc
	evaluation       = harness.Evaluation
	nodeStub         = harness.NodeStub
	node             = harness.Node
	registerResponse = harness.RegisterResponse
)

// waitJobDead waits until the job is dead and has at least one allocation,
// every one of them complete, and returns the allocations.
func (a *testAgent) waitJobDead(jobID string) []alloc {
	a.t.Helper()
	var allocs []alloc
	harness.WaitFor(a.t, waitTimeout, "job "+jobID+" dead with complete allocs", func() (bool, string) {
		var j job
		if status, err := a.Do(http.MethodGet, "/v1/job/"+harness.Escape(jobID), nil, &j); err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("GET job: %d %v", status, err)
		}
		allocs = a.AllocsOf(jobID)
		if j.Status != "dead" || len(allocs) == 0 {
			return false, fmt.Sprintf("status %s, %d allocs", j.Status, len(allocs))
		}
		for _, al := range allocs {
			if al.ClientStatus != "complete" {
				return false, fmt.Sprintf("alloc %s is %s", al.ID, al.ClientStatus)
			}
		}
		return true, ""
	})
	return allocs
}

// exampleJob is the path of examples/jobs/<name>.
func exampleJob(name string) string { return filepath.Join(repoRoot, "examples", "jobs", name) }

// kvField reads `Key = value` from the CLI's key/value output.
func kvField(out, key string) (string, bool) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `\s+= (.*)$`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		return "", false
	}
	return strings.TrimSpace(m[1]), true
}

// section returns the lines of the CLI output's section titled title (up to
// the next blank line), without the title.
func section(out, title string) []string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if l != title {
			continue
		}
		var body []string
		for _, l := range lines[i+1:] {
			if strings.TrimSpace(l) == "" {
				break
			}
			body = append(body, l)
		}
		return body
	}
	return nil
}

// mustJSON fails the test unless s parses as JSON, and decodes it into out.
func mustJSON(t *testing.T, what, s string, out any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), out); err != nil {
		t.Fatalf("%s: output is not JSON: %v\n%s", what, err, s)
	}
}
