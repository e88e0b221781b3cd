package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// gcParentsConfig shortens the GC thresholds and the core jobs' interval
// to their floors: anything finished over a second ago is collected within
// about a second, without force.
const gcParentsConfig = `server {
  job_gc_threshold        = "1s"
  eval_gc_threshold       = "1s"
  batch_eval_gc_threshold = "1s"
  job_gc_interval         = "1s"
}
`

// gcPeriodicJob is a periodic sysbatch parent that never launches by
// itself during a test (once a year): its children are forced.
const gcPeriodicJob = `job "gc-tick" {
  type        = "sysbatch"
  datacenters = ["*"]

  periodic {
    cron      = "0 0 1 1 *"
    time_zone = "UTC"
  }

  group "g" {
    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/true"
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// gcDispatchJob is a parameterized sysbatch parent.
const gcDispatchJob = `job "gc-greet" {
  type        = "sysbatch"
  datacenters = ["*"]

  parameterized {}

  group "g" {
    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/true"
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// With short thresholds and interval, the periodic core GC jobs (no force)
// collect the finished children of a periodic parent and of a
// parameterized one, with their evaluations and allocations, and keep both
// parents, which go only once stopped. A finished job registered after the
// children were gone is collected too: a later run saw the parents and
// kept them.
func TestGCCollectsFinishedChildren(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "-config", harness.WriteFile(t, "gc.hcl", gcParentsConfig))
	a.MustCLI("job", "run", harness.WriteFile(t, "tick.hcl", gcPeriodicJob))
	a.MustCLI("job", "run", harness.WriteFile(t, "greet.hcl", gcDispatchJob))

	var children []string
	for range 2 {
		var force struct{ EvalID string }
		a.MustWrite(http.MethodPut, "/v1/job/gc-tick/periodic/force", nil, &force)
		// The child's eval names it; it can be gone only if the machine
		// stalled for over a second (it finished and aged out): that
		// child is collected, but unnamed.
		var e struct{ JobID string }
		status, err := a.DoRetry(http.MethodGet, "/v1/evaluation/"+force.EvalID, nil, &e)
		switch {
		case err == nil && status == http.StatusOK && e.JobID != "":
			children = append(children, e.JobID)
		case err == nil && status == http.StatusNotFound:
			t.Logf("the eval %s of a forced launch was collected before it was read", force.EvalID)
		default:
			t.Fatalf("GET the forced launch's eval %s: %d %v", force.EvalID, status, err)
		}
	}
	for range 2 {
		var d harness.DispatchResponse
		a.MustWrite(http.MethodPut, "/v1/job/gc-greet/dispatch", map[string]any{}, &d)
		if d.DispatchedJobID == "" {
			t.Fatalf("dispatch answered no child: %+v", d)
		}
		children = append(children, d.DispatchedJobID)
	}
	t.Logf("children: %v", children)

	// Each child finishes and goes, with its evaluations and allocations:
	// the floor never lets a job with an unfinished allocation go, so a
	// child gone is a child that ran.
	harness.WaitFor(t, waitTimeout, "every child collected", func() (bool, string) {
		var left []string
		for _, c := range children {
			status, err := a.Do(http.MethodGet, "/v1/job/"+harness.Escape(c), nil, nil)
			if err != nil || status != http.StatusNotFound {
				left = append(left, fmt.Sprintf("%s: %d %v", c, status, err))
			}
		}
		return len(left) == 0, strings.Join(left, "; ")
	})
	var allocs []struct{ ID, JobID string }
	a.MustGet("/v1/allocations", &allocs)
	var evals []struct{ ID, JobID string }
	a.MustGet("/v1/evaluations", &evals)
	for _, c := range children {
		for _, al := range allocs {
			if al.JobID == c {
				t.Errorf("alloc %s of collected child %s is left", al.ID, c)
			}
		}
		for _, e := range evals {
			if e.JobID == c {
				t.Errorf("eval %s of collected child %s is left", e.ID, c)
			}
		}
	}

	// A later run keeps the parents: a job finished after the children
	// were gone is collected while both parents stay.
	a.MustCLI("job", "run", harness.WriteFile(t, "marker.hcl", fmt.Sprintf(harness.TrueJob, "gc-marker")))
	harness.WaitFor(t, waitTimeout, "the marker job collected", func() (bool, string) {
		status, err := a.Do(http.MethodGet, "/v1/job/gc-marker", nil, nil)
		return err == nil && status == http.StatusNotFound, fmt.Sprintf("%d %v", status, err)
	})
	for _, p := range []string{"gc-tick", "gc-greet"} {
		var j job
		if status, err := a.Do(http.MethodGet, "/v1/job/"+p, nil, &j); err != nil || status != http.StatusOK || j.Stop {
			t.Errorf("parent %s after its children were collected: %d %v %+v", p, status, err, j)
		}
	}

	// Stopped, the parents go as well.
	for _, p := range []string{"gc-tick", "gc-greet"} {
		a.MustCLI("job", "stop", "-detach", p)
	}
	harness.WaitFor(t, waitTimeout, "the stopped parents collected", func() (bool, string) {
		var left []string
		for _, p := range []string{"gc-tick", "gc-greet"} {
			if status, err := a.Do(http.MethodGet, "/v1/job/"+p, nil, nil); err != nil || status != http.StatusNotFound {
				left = append(left, fmt.Sprintf("%s: %d %v", p, status, err))
			}
		}
		return len(left) == 0, strings.Join(left, "; ")
	})
}
