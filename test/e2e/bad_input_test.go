package e2e

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// Job files that are wrong are refused before anything is written, and the
// refusal says where or which rule.
func TestBadJobFilesAreRefused(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	snapshot := func() string {
		var out strings.Builder
		for _, path := range []string{"/v1/jobs", "/v1/evaluations", "/v1/allocations"} {
			status, body, err := a.Raw(http.MethodGet, path, nil)
			if err != nil || status != http.StatusOK {
				t.Fatalf("GET %s: %d %v", path, status, err)
			}
			fmt.Fprintf(&out, "%s: %s\n", path, body)
		}
		return out.String()
	}
	before := snapshot()

	sleeper := fmt.Sprintf(sleeperJob, "e2e-bad")
	for _, tc := range []struct {
		name, file, hcl string
		want            []*regexp.Regexp
	}{{
		name: "misspelled attribute",
		file: "typo.hcl",
		// Line 3, column 3: the attribute's name.
		hcl:  strings.Replace(sleeper, "datacenters", "datacentres", 1),
		want: []*regexp.Regexp{regexp.MustCompile(`typo\.hcl:3:3\b`), regexp.MustCompile(`datacentres`)},
	}, {
		name: "system job with count 2",
		file: "count.hcl",
		hcl:  strings.Replace(sleeper, `group "sleeper" {`, "group \"sleeper\" {\n    count = 2", 1),
		want: []*regexp.Regexp{regexp.MustCompile(`count`), regexp.MustCompile(`system jobs`)},
	}, {
		name: "unknown job type",
		file: "type.hcl",
		hcl:  strings.Replace(sleeper, `"system"`, `"gpu-batch"`, 1),
		want: []*regexp.Regexp{regexp.MustCompile(`"gpu-batch"`), regexp.MustCompile(`batch, service, sysbatch, system`)},
	}} {
		// Not subtests: the agent's helpers fail the test that owns it.
		res := a.CLI("job", "run", harness.WriteFile(t, tc.file, tc.hcl))
		if res.Code == 0 {
			t.Errorf("%s: job run accepted the job:\n%s", tc.name, res)
			continue
		}
		for _, re := range tc.want {
			if !re.MatchString(res.Stderr) {
				t.Errorf("%s: error does not match %s:\n%s", tc.name, re, res)
			}
		}
	}
	if after := snapshot(); after != before {
		t.Errorf("refused jobs changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
