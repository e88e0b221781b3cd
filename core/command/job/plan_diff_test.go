package job

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func planBaseJob() *structs.Job {
	return &structs.Job{
		ID: "web", Name: "web", Namespace: "default", Region: "global", Type: "batch", Priority: 50,
		Datacenters: []string{"dc1"},
		TaskGroups: []*structs.TaskGroup{{
			Name: "cache", Count: 1,
			RestartPolicy: &structs.RestartPolicy{Attempts: 2, Interval: 30 * time.Minute, Delay: 15 * time.Second, Mode: "fail"},
			Tasks: []*structs.Task{{
				Name: "redis", Driver: "raw_exec",
				Config:    map[string]any{"command": "/bin/sleep", "args": []any{"3600"}},
				Resources: &structs.Resources{CPU: 100, MemoryMB: 64},
			}},
		}},
	}
}

// `job plan` renders the server's diff as Nomad does; each case's output is
// testdata/plan/<name>.txt.
func TestFormatJobDiffGolden(t *testing.T) {
	cases := map[string]struct {
		old, cur func() *structs.Job
		updates  map[string]*structs.DesiredUpdates
		verbose  bool
	}{
		"added": {
			old: func() *structs.Job { return nil }, cur: planBaseJob,
			updates: map[string]*structs.DesiredUpdates{"cache": {Place: 1}},
		},
		"unchanged": {
			old: planBaseJob, cur: planBaseJob,
			updates: map[string]*structs.DesiredUpdates{"cache": {Ignore: 1}},
		},
		"config-arg": {
			old: planBaseJob,
			cur: func() *structs.Job {
				j := planBaseJob()
				j.TaskGroups[0].Tasks[0].Config["args"] = []any{"7200"}
				return j
			},
			updates: map[string]*structs.DesiredUpdates{"cache": {DestructiveUpdate: 1}},
		},
		"config-arg-verbose": {
			old: planBaseJob,
			cur: func() *structs.Job {
				j := planBaseJob()
				j.TaskGroups[0].Tasks[0].Config["args"] = []any{"7200"}
				return j
			},
			updates: map[string]*structs.DesiredUpdates{"cache": {DestructiveUpdate: 1}},
			verbose: true,
		},
		"added-verbose": {
			old: func() *structs.Job { return nil }, cur: planBaseJob,
			updates: map[string]*structs.DesiredUpdates{"cache": {Place: 1}},
			verbose: true,
		},
		"job-group-task-fields": {
			old: planBaseJob,
			cur: func() *structs.Job {
				j := planBaseJob()
				j.Priority = 60
				j.Datacenters = []string{"dc1", "dc2"}
				g := j.TaskGroups[0]
				g.Count = 3
				g.RestartPolicy.Attempts = 5
				g.Tasks[0].Resources.MemoryMB = 128
				g.Tasks[0].Env = map[string]string{"MODE": "fast"}
				g.Tasks = append(g.Tasks, &structs.Task{Name: "sidecar", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"}})
				j.TaskGroups = append(j.TaskGroups, &structs.TaskGroup{Name: "extra", Count: 1, Tasks: []*structs.Task{{Name: "x", Driver: "raw_exec"}}})
				return j
			},
			updates: map[string]*structs.DesiredUpdates{"cache": {DestructiveUpdate: 1, Place: 2}, "extra": {Place: 1}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := structs.DiffJobs(tc.old(), tc.cur(), true)
			d.Annotate(tc.updates)
			got := formatJobDiff(d, tc.updates, tc.verbose)
			path := filepath.Join("testdata", "plan", name+".txt")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal([]byte(got), want) {
				t.Errorf("rendering differs from %s (run with -update after checking):\n--- got\n%s--- want\n%s", path, got, want)
			}
		})
	}
}
