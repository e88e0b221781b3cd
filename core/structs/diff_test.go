package structs

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// diffBaseJob is a small service-like job: one group, one task with a
// config, resources, meta and a constraint.
func diffBaseJob() *Job {
	return &Job{
		ID: "web", Name: "web", Namespace: "default", Region: "global", Type: "batch", Priority: 50,
		Datacenters: []string{"dc1"}, Meta: map[string]string{"owner": "ops"},
		Status: "running", Version: 3, CreateIndex: 10, ModifyIndex: 20, JobModifyIndex: 20, SubmitTime: 1,
		TaskGroups: []*TaskGroup{{
			Name: "g", Count: 2,
			RestartPolicy: &RestartPolicy{Attempts: 2, Interval: 30 * time.Minute, Delay: 15 * time.Second, Mode: "fail"},
			Tasks: []*Task{{
				Name: "t", Driver: "raw_exec",
				Config:      map[string]any{"command": "/bin/sleep", "args": []any{"3600"}},
				Env:         map[string]string{"A": "1"},
				Resources:   &Resources{CPU: 100, MemoryMB: 64},
				Constraints: []*Constraint{{LTarget: "${attr.kernel.name}", RTarget: "linux", Operand: "="}},
				KillTimeout: 5 * time.Second,
			}},
		}},
	}
}

// diffCases are the job pairs whose diffs are checked against
// testdata/diff/<name>.json.
func diffCases() map[string]func() (old, cur *Job) {
	return map[string]func() (*Job, *Job){
		"added": func() (*Job, *Job) { return nil, diffBaseJob() },
		"deleted": func() (*Job, *Job) {
			return diffBaseJob(), nil
		},
		"unchanged": func() (*Job, *Job) {
			cur := diffBaseJob()
			cur.Version, cur.ModifyIndex, cur.Status = 9, 99, "pending" // bookkeeping is no change
			return diffBaseJob(), cur
		},
		"task-config-arg": func() (*Job, *Job) {
			cur := diffBaseJob()
			cur.TaskGroups[0].Tasks[0].Config["args"] = []any{"7200"}
			return diffBaseJob(), cur
		},
		"job-fields": func() (*Job, *Job) {
			cur := diffBaseJob()
			cur.Priority = 60
			cur.Datacenters = []string{"dc1", "dc2"}
			cur.Meta = map[string]string{"team": "web"}
			cur.Periodic = &PeriodicConfig{Enabled: true, Spec: "*/5 * * * *", SpecType: "cron"}
			return diffBaseJob(), cur
		},
		"group-and-tasks": func() (*Job, *Job) {
			old := diffBaseJob()
			old.TaskGroups[0].Tasks = append(old.TaskGroups[0].Tasks, &Task{Name: "gone", Driver: "raw_exec"})
			cur := diffBaseJob()
			g := cur.TaskGroups[0]
			g.Count = 3
			g.RestartPolicy.Attempts = 5
			g.Tasks[0].Resources.MemoryMB = 128
			g.Tasks[0].Constraints = nil
			g.Tasks[0].Env["B"] = "2"
			g.Tasks = append(g.Tasks, &Task{Name: "new", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"}})
			cur.TaskGroups = append(cur.TaskGroups, &TaskGroup{Name: "extra", Count: 1, Tasks: []*Task{{Name: "x", Driver: "raw_exec"}}})
			return old, cur
		},
	}
}

func TestDiffJobsGolden(t *testing.T) {
	for name, mk := range diffCases() {
		t.Run(name, func(t *testing.T) {
			old, cur := mk()
			d := DiffJobs(old, cur, true)
			d.Annotate(map[string]*DesiredUpdates{"g": {DestructiveUpdate: 2, Place: 1}, "extra": {Place: 1}})
			got, err := json.MarshalIndent(d, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "diff", name+".json"), append(got, '\n'))
		})
	}
}

// A diff is computed on copies' values only: neither job is changed.
func TestDiffJobsLeavesJobsAlone(t *testing.T) {
	old, cur := diffBaseJob(), diffBaseJob()
	cur.TaskGroups[0].Tasks[0].Config["args"] = []any{"7200"}
	before, _ := json.Marshal([]*Job{old, cur})
	DiffJobs(old, cur, true)
	after, _ := json.Marshal([]*Job{old, cur})
	if !bytes.Equal(before, after) {
		t.Fatalf("DiffJobs changed its inputs")
	}
	if d := DiffJobs(nil, nil, true); d != nil {
		t.Fatalf("DiffJobs(nil, nil) = %+v; want nil", d)
	}
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update after checking):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// The job's, groups' and tasks' own primitive fields are diffed
// non-contextually, as Nomad's: a plan lists only those that changed, while
// an edited block (a task's Config) keeps its unchanged fields as context.
func TestDiffJobsTopLevelFieldsNonContextual(t *testing.T) {
	old, cur := diffBaseJob(), diffBaseJob()
	cur.Priority = 70
	cur.TaskGroups[0].Count = 4
	cur.TaskGroups[0].Tasks[0].Config["args"] = []any{"7200"}
	d := DiffJobs(old, cur, true)
	onlyChanged := func(level string, fs []*FieldDiff, want string) {
		t.Helper()
		if len(fs) != 1 || fs[0].Name != want || fs[0].Type != DiffTypeEdited {
			for _, f := range fs {
				t.Logf("%s field %s %s", level, f.Type, f.Name)
			}
			t.Errorf("%s fields: want only the edited %s", level, want)
		}
	}
	onlyChanged("job", d.Fields, "Priority")
	onlyChanged("group", d.TaskGroups[0].Fields, "Count")
	task := d.TaskGroups[0].Tasks[0]
	if len(task.Fields) != 0 {
		t.Errorf("task fields %v; want none (only Config changed)", task.Fields)
	}
	if len(task.Objects) != 1 || task.Objects[0].Name != "Config" || len(task.Objects[0].Fields) != 2 {
		t.Fatalf("task objects %+v; want Config with the edited arg and the unchanged command", task.Objects)
	}
}
