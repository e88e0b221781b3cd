package docker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// taskName is the task of every test job.
const taskName = "hello"

// sysbatchJob is a job that runs `/bin/sh -c 'echo hi'` once on every
// client: /bin/sh is the image's busybox.
func sysbatchJob(id string) string {
	return fmt.Sprintf(`job %q {
  type        = "sysbatch"
  datacenters = ["*"]

  group "g" {
    task %q {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo hi"]
      }
      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`, id, taskName)
}

// register submits the job through a server. While the cluster elects a
// leader a write may be refused (5xx, or a request that times out); it is
// sent again until it is accepted. A 4xx is the test's bug and fails it.
func (c *cluster) register(via *agent, id string) harness.RegisterResponse {
	c.t.Helper()
	return c.registerHCL(via, id, sysbatchJob(id))
}

// registerHCL is register for a job of the given HCL.
func (c *cluster) registerHCL(via *agent, id, hcl string) harness.RegisterResponse {
	c.t.Helper()
	var parsed json.RawMessage
	var resp harness.RegisterResponse
	harness.WaitFor(c.t, electionTimeout, "job "+id+" accepted by "+via.Name, func() (bool, string) {
		if parsed == nil {
			status, body, err := via.Raw(http.MethodPost, "/v1/jobs/parse", map[string]any{"JobHCL": hcl, "Canonicalize": true})
			switch {
			case err != nil || status/100 == 5:
				return false, fmt.Sprintf("parse: status %d, %v: %s", status, err, body)
			case status != http.StatusOK:
				c.t.Fatalf("parse job %s: status %d: %s", id, status, body)
			}
			parsed = body
		}
		status, body, err := via.Raw(http.MethodPut, "/v1/jobs", map[string]json.RawMessage{"Job": parsed})
		switch {
		case err != nil || status/100 == 5:
			return false, fmt.Sprintf("register: status %d, %v: %s", status, err, body)
		case status != http.StatusOK:
			c.t.Fatalf("register job %s: status %d: %s", id, status, body)
		}
		if err := json.Unmarshal(body, &resp); err != nil {
			c.t.Fatalf("register job %s: %v: %s", id, err, body)
		}
		return true, ""
	})
	return resp
}

// waitComplete waits until the job has exactly one allocation on each
// client, each complete, and the job is dead, as the server via (and the
// leader behind it) reports. It returns the allocations by node name.
func (c *cluster) waitComplete(via *agent, id string) map[string]harness.Alloc {
	c.t.Helper()
	nodeNames := c.clientNodeIDs()
	var byNode map[string]harness.Alloc
	harness.WaitFor(c.t, waitTimeout, "job "+id+" complete on every client", func() (bool, string) {
		var allocs []harness.Alloc
		status, err := via.Do(http.MethodGet, "/v1/job/"+harness.Escape(id)+"/allocations", nil, &allocs)
		if err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("allocations: status %d, %v", status, err)
		}
		byNode = map[string]harness.Alloc{}
		var seen []string
		for _, a := range allocs {
			seen = append(seen, fmt.Sprintf("%s on %s: %s/%s", a.ID[:8], nodeNames[a.NodeID], a.DesiredStatus, a.ClientStatus))
			name, ok := nodeNames[a.NodeID]
			if !ok {
				c.t.Fatalf("job %s has an allocation on a node that is no client: %+v", id, a)
			}
			if _, dup := byNode[name]; dup {
				c.t.Fatalf("job %s has two allocations on %s: %v", id, name, seen)
			}
			byNode[name] = a
		}
		sort.Strings(seen)
		if len(byNode) != len(c.clients) {
			return false, fmt.Sprintf("allocations %v", seen)
		}
		for _, a := range byNode {
			if a.ClientStatus != "complete" {
				return false, fmt.Sprintf("allocations %v", seen)
			}
		}
		var j harness.Job
		status, err = via.Do(http.MethodGet, "/v1/job/"+harness.Escape(id), nil, &j)
		if err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("job: status %d, %v", status, err)
		}
		return j.Status == "dead", fmt.Sprintf("job status %q, allocations %v", j.Status, seen)
	})
	return byNode
}

// allocStdout reads a task's stdout through a server, which hands the
// request to the client at the HTTP address that client advertised.
func allocStdout(via *agent, allocID string) (string, error) {
	q := url.Values{"task": {taskName}, "type": {"stdout"}, "plain": {"true"}}
	status, body, err := via.Raw(http.MethodGet, "/v1/client/fs/logs/"+allocID+"?"+q.Encode(), nil)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("status %d: %s", status, strings.TrimSpace(string(body)))
	}
	return string(body), err
}

// waitFor is harness.WaitFor with this suite's default deadline.
func (c *cluster) waitFor(what string, timeout time.Duration, cond func() (bool, string)) {
	c.t.Helper()
	harness.WaitFor(c.t, timeout, what, cond)
}
