package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
)

// nomadJSONServer is a real dev server with one raw_exec node behind the
// HTTP API: its URL, the official client and the server.
func nomadJSONServer(t *testing.T) (string, *nomadapi.Client, *server.Server) {
	t.Helper()
	srv := devServer(t, false)
	node := &structs.Node{
		ID: uuid.NewString(), SecretID: uuid.NewString(), Name: "n1", Datacenter: "dc1",
		Attributes: map[string]string{"kernel.name": "linux", "unique.hostname": "n1"},
		NodeResources: &structs.NodeResources{
			Cpu: structs.NodeCpuResources{CpuShares: 4000}, Memory: structs.NodeMemoryResources{MemoryMB: 8192},
			Disk: structs.NodeDiskResources{DiskMB: 100000},
		},
		Drivers: map[string]*structs.DriverInfo{"raw_exec": {Detected: true, Healthy: true}},
	}
	if _, err := srv.Nodes().Register(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(New(serverConfig(srv, Config{})).Handler())
	t.Cleanup(ts.Close)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	return ts.URL, c, srv
}

// cliJob is a job as Nomad's CLI sends it: an api.Job holding only what
// the job file writes, every other field null.
func cliJob(id, typ string) *nomadapi.Job {
	task := &nomadapi.Task{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/sleep", "args": []string{"60"}}}
	return &nomadapi.Job{
		ID: ptr(id), Type: ptr(typ), Datacenters: []string{"dc1"},
		TaskGroups: []*nomadapi.TaskGroup{{Name: ptr("g"), Tasks: []*nomadapi.Task{task}}},
	}
}

// The JSON Nomad's CLI posts (nulls everywhere) is stored as Nomad stores
// it: each null field takes Nomad's documented default, an explicit zero
// stays, and a group's update block takes what it leaves null from the
// job's.
func TestRegisterNomadCLIJSONCanonical(t *testing.T) {
	url, _, srv := nomadJSONServer(t)
	defUpdate := structs.UpdateStrategy{
		Stagger: 30 * time.Second, MaxParallel: 1, HealthCheck: "checks",
		MinHealthyTime: 10 * time.Second, HealthyDeadline: 5 * time.Minute, ProgressDeadline: 10 * time.Minute,
	}
	withUpdate := func(u structs.UpdateStrategy, f func(*structs.UpdateStrategy)) structs.UpdateStrategy {
		f(&u)
		return u
	}
	cases := []struct {
		name  string
		job   func() *nomadapi.Job
		check func(t *testing.T, j *structs.Job)
	}{
		{"service without update block", func() *nomadapi.Job { return cliJob("svc", "service") }, func(t *testing.T, j *structs.Job) {
			eq(t, "Name", j.Name, "svc")
			eq(t, "Namespace", j.Namespace, "default")
			eq(t, "Region", j.Region, "global")
			eq(t, "Priority", j.Priority, 50)
			eq(t, "NodePool", j.NodePool, "default")
			eq(t, "Update", deref(j.Update), defUpdate)
			tg := j.TaskGroups[0]
			eq(t, "group Count", tg.Count, 1)
			eq(t, "group Update", deref(tg.Update), defUpdate)
			eq(t, "group EphemeralDisk", deref(tg.EphemeralDisk), structs.EphemeralDisk{SizeMB: 300})
			eq(t, "group RestartPolicy", deref(tg.RestartPolicy), structs.RestartPolicy{Attempts: 2, Interval: 30 * time.Minute, Delay: 15 * time.Second, Mode: "fail"})
			eq(t, "group ReschedulePolicy", deref(tg.ReschedulePolicy), structs.ReschedulePolicy{Delay: 30 * time.Second, DelayFunction: "exponential", MaxDelay: time.Hour, Unlimited: true})
			eq(t, "group Migrate", deref(tg.Migrate), structs.MigrateStrategy{MaxParallel: 1, HealthCheck: "checks", MinHealthyTime: 10 * time.Second, HealthyDeadline: 5 * time.Minute})
			task := tg.Tasks[0]
			eq(t, "task CPU", task.Resources.CPU, 100)
			eq(t, "task MemoryMB", task.Resources.MemoryMB, 300)
			eq(t, "task KillTimeout", task.KillTimeout, 5*time.Second)
			eq(t, "task LogConfig", [2]int{task.LogConfig.MaxFiles, task.LogConfig.MaxFileSizeMB}, [2]int{10, 10})
		}},
		{"service update blocks all null", func() *nomadapi.Job {
			j := cliJob("svc-null-update", "service")
			j.Update = &nomadapi.UpdateStrategy{}
			j.TaskGroups[0].Update = &nomadapi.UpdateStrategy{}
			return j
		}, func(t *testing.T, j *structs.Job) {
			eq(t, "Update", deref(j.Update), defUpdate)
			eq(t, "group Update", deref(j.TaskGroups[0].Update), defUpdate)
		}},
		{"group update merged over job's", func() *nomadapi.Job {
			j := cliJob("svc-merge", "service")
			j.Update = &nomadapi.UpdateStrategy{MaxParallel: ptr(3), AutoRevert: ptr(true)}
			j.TaskGroups[0].Update = &nomadapi.UpdateStrategy{Canary: ptr(1), Stagger: ptr(time.Minute)}
			return j
		}, func(t *testing.T, j *structs.Job) {
			eq(t, "Update", deref(j.Update), withUpdate(defUpdate, func(u *structs.UpdateStrategy) { u.MaxParallel, u.AutoRevert = 3, true }))
			eq(t, "group Update", deref(j.TaskGroups[0].Update), withUpdate(defUpdate, func(u *structs.UpdateStrategy) {
				u.MaxParallel, u.AutoRevert, u.Canary, u.Stagger = 3, true, 1, time.Minute
			}))
		}},
		{"explicit zero max_parallel kept", func() *nomadapi.Job {
			j := cliJob("svc-zero", "service")
			j.Update = &nomadapi.UpdateStrategy{MaxParallel: ptr(0)}
			return j
		}, func(t *testing.T, j *structs.Job) {
			eq(t, "Update", deref(j.Update), withUpdate(defUpdate, func(u *structs.UpdateStrategy) { u.MaxParallel = 0 }))
			eq(t, "group Update", deref(j.TaskGroups[0].Update), withUpdate(defUpdate, func(u *structs.UpdateStrategy) { u.MaxParallel = 0 }))
		}},
		{"periodic enabled null", func() *nomadapi.Job {
			j := cliJob("cron-null", "batch")
			j.Periodic = &nomadapi.PeriodicConfig{Spec: ptr("*/5 * * * *")}
			return j
		}, func(t *testing.T, j *structs.Job) {
			p := deref(j.Periodic)
			eq(t, "Periodic", [4]any{p.Enabled, p.Spec, p.SpecType, p.TimeZone}, [4]any{true, "*/5 * * * *", "cron", "UTC"})
			eq(t, "Update", j.Update, (*structs.UpdateStrategy)(nil))
			eq(t, "group Update", j.TaskGroups[0].Update, (*structs.UpdateStrategy)(nil))
			eq(t, "group RestartPolicy", deref(j.TaskGroups[0].RestartPolicy), structs.RestartPolicy{Attempts: 3, Interval: 24 * time.Hour, Delay: 15 * time.Second, Mode: "fail"})
			eq(t, "group ReschedulePolicy", deref(j.TaskGroups[0].ReschedulePolicy), structs.ReschedulePolicy{Attempts: 1, Interval: 24 * time.Hour, Delay: 5 * time.Second, DelayFunction: "constant"})
		}},
		{"periodic enabled false kept", func() *nomadapi.Job {
			j := cliJob("cron-off", "batch")
			j.Periodic = &nomadapi.PeriodicConfig{Spec: ptr("*/5 * * * *"), Enabled: ptr(false)}
			return j
		}, func(t *testing.T, j *structs.Job) {
			eq(t, "Periodic.Enabled", j.Periodic.Enabled, false)
		}},
		{"restart and reschedule merged over the type's", func() *nomadapi.Job {
			j := cliJob("batch-policies", "batch")
			j.TaskGroups[0].RestartPolicy = &nomadapi.RestartPolicy{Attempts: ptr(0), Mode: ptr("fail")}
			j.TaskGroups[0].ReschedulePolicy = &nomadapi.ReschedulePolicy{Attempts: ptr(4)}
			j.TaskGroups[0].Tasks[0].RestartPolicy = &nomadapi.RestartPolicy{Delay: ptr(time.Second)}
			return j
		}, func(t *testing.T, j *structs.Job) {
			tg := j.TaskGroups[0]
			eq(t, "group RestartPolicy", deref(tg.RestartPolicy), structs.RestartPolicy{Attempts: 0, Interval: 24 * time.Hour, Delay: 15 * time.Second, Mode: "fail"})
			eq(t, "group ReschedulePolicy", deref(tg.ReschedulePolicy), structs.ReschedulePolicy{Attempts: 4, Interval: 24 * time.Hour, Delay: 5 * time.Second, DelayFunction: "constant"})
			eq(t, "task RestartPolicy", deref(tg.Tasks[0].RestartPolicy), structs.RestartPolicy{Attempts: 0, Interval: 24 * time.Hour, Delay: time.Second, Mode: "fail"})
		}},
		{"affinity weight and disk size null", func() *nomadapi.Job {
			j := cliJob("svc-blocks", "service")
			j.Affinities = []*nomadapi.Affinity{{LTarget: "${node.class}", RTarget: "a", Operand: "="}}
			j.TaskGroups[0].EphemeralDisk = &nomadapi.EphemeralDisk{Sticky: ptr(true)}
			return j
		}, func(t *testing.T, j *structs.Job) {
			eq(t, "affinity Weight", j.Affinities[0].Weight, int8(50))
			eq(t, "group EphemeralDisk", deref(j.TaskGroups[0].EphemeralDisk), structs.EphemeralDisk{Sticky: true, SizeMB: 300})
		}},
		{"spread weight null", func() *nomadapi.Job {
			j := cliJob("svc-spread", "service")
			j.Spreads = []*nomadapi.Spread{{Attribute: "${node.datacenter}"}}
			j.TaskGroups[0].Spreads = []*nomadapi.Spread{{Attribute: "${node.class}", Weight: ptr(int8(20))}}
			return j
		}, func(t *testing.T, j *structs.Job) {
			eq(t, "job spread Weight", j.Spreads[0].Weight, int8(50))
			eq(t, "group spread Weight", j.TaskGroups[0].Spreads[0].Weight, int8(20))
		}},
		{"check_restart grace null", func() *nomadapi.Job {
			j := cliJob("svc-checks", "service")
			tg := j.TaskGroups[0]
			tg.Networks = []*nomadapi.NetworkResource{{DynamicPorts: []nomadapi.Port{{Label: "http"}}}}
			check := func(name string, r *nomadapi.CheckRestart) nomadapi.ServiceCheck {
				return nomadapi.ServiceCheck{Name: name, Type: "tcp", Interval: 10 * time.Second, Timeout: 2 * time.Second, CheckRestart: r}
			}
			tg.Services = []*nomadapi.Service{
				// The service's grace reaches a check that leaves it null.
				{Name: "inherits", PortLabel: "http", Provider: "nomad", CheckRestart: &nomadapi.CheckRestart{Limit: 3, Grace: ptr(5 * time.Second)},
					Checks: []nomadapi.ServiceCheck{check("own-limit", &nomadapi.CheckRestart{Limit: 2})}},
				// Null everywhere: Nomad's 1s.
				{Name: "defaults", PortLabel: "http", Provider: "nomad",
					Checks: []nomadapi.ServiceCheck{check("bare", &nomadapi.CheckRestart{Limit: 2})}},
			}
			return j
		}, func(t *testing.T, j *structs.Job) {
			byName := map[string]*structs.CheckRestart{}
			for _, sv := range j.TaskGroups[0].Services {
				for _, c := range sv.Checks {
					byName[c.Name] = c.CheckRestart
				}
			}
			eq(t, "inherited check_restart", deref(byName["own-limit"]), structs.CheckRestart{Limit: 2, Grace: 5 * time.Second})
			eq(t, "default check_restart", deref(byName["bare"]), structs.CheckRestart{Limit: 2, Grace: time.Second})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := tc.job()
			body, err := json.Marshal(map[string]any{"Job": job})
			if err != nil {
				t.Fatal(err)
			}
			req, err := http.NewRequest(http.MethodPut, url+"/v1/jobs", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("register: status %d", resp.StatusCode)
			}
			stored, err := srv.State().JobByID(nil, "default", *job.ID)
			if err != nil || stored == nil {
				t.Fatalf("stored job: %v, %v", stored, err)
			}
			tc.check(t, stored)
		})
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %+v; want %+v", what, got, want)
	}
}

// A periodic job whose Enabled the CLI leaves null is enabled, as in
// Nomad: the periodic dispatcher launches its children on schedule (every
// second here, with a seconds-first seven-field cron).
func TestPeriodicNullEnabledLaunches(t *testing.T) {
	_, c, srv := nomadJSONServer(t)
	job := cliJob("cron", "batch")
	job.Periodic = &nomadapi.PeriodicConfig{Spec: ptr("* * * * * * *")}
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		jobs, err := srv.State().JobList(nil, "default", "cron/periodic-")
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) > 0 {
			if jobs[0].ParentID != "cron" {
				t.Fatalf("child %q has parent %q", jobs[0].ID, jobs[0].ParentID)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the periodic job launched no child in 30s")
		}
		<-tick.C
	}
}

// A service job without an update block, and one whose update block the
// CLI sends with every field null (`update {}`), get Nomad's default
// update strategy and so a deployment, and the register eval names that
// deployment, which `nomad job run` follows. A batch job gets neither.
func TestServiceJobRegisterEvalDeployment(t *testing.T) {
	_, c, _ := nomadJSONServer(t)
	tests := []struct {
		name, id, typ string
		update        *nomadapi.UpdateStrategy
		want          bool
	}{
		{"service without update block", "web", "service", nil, true},
		{"service with update {}", "web2", "service", &nomadapi.UpdateStrategy{}, true},
		{"batch", "work", "batch", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := cliJob(tc.id, tc.typ)
			job.Update = tc.update
			resp, _, err := c.Jobs().Register(job, nil)
			if err != nil {
				t.Fatal(err)
			}
			ev := waitEval(t, c, "default", resp.EvalID)
			if !tc.want {
				if ev.DeploymentID != "" {
					t.Fatalf("register eval %s names deployment %s; a %s job has none", ev.ID, ev.DeploymentID, tc.typ)
				}
				return
			}
			if ev.DeploymentID == "" {
				t.Fatalf("register eval %s names no deployment", ev.ID)
			}
			d, _, err := c.Deployments().Info(ev.DeploymentID, nil)
			if err != nil {
				t.Fatalf("deployment %s: %v", ev.DeploymentID, err)
			}
			if d.JobID != tc.id || d.TaskGroups["g"] == nil || d.TaskGroups["g"].DesiredTotal != 1 {
				t.Fatalf("deployment = %+v", d)
			}
		})
	}
}

// A job as Nomad stores and returns it (the reference sample of a
// sysbatch job, every field explicit), posted back as `nomad job inspect
// | nomad job run -json` would, keeps its explicit values: the all-zero
// update block stays zero, nothing null is invented.
func TestRegisterNomadStoredJobJSON(t *testing.T) {
	url, _, srv := nomadJSONServer(t)
	sample, err := os.ReadFile("/work/shared/reference/nomad-json-samples/sysbatch_job.json")
	if err != nil {
		t.Skipf("no reference sample: %v", err)
	}
	var job map[string]any
	if err := json.Unmarshal(sample, &job); err != nil {
		t.Fatal(err)
	}
	// Nomad writes an all-zero reschedule block out on sysbatch groups and
	// takes it back: so does drover.
	for _, g := range job["TaskGroups"].([]any) {
		if rp, _ := g.(map[string]any)["ReschedulePolicy"].(map[string]any); rp == nil || rp["Attempts"] != 0.0 || rp["Unlimited"] != false {
			t.Fatalf("the sample's group ReschedulePolicy = %v, want Nomad's all-zero one", rp)
		}
	}
	body, err := json.Marshal(map[string]any{"Job": job})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPut, url+"/v1/jobs", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("register: status %d: %s", resp.StatusCode, msg)
	}
	j, err := srv.State().JobByID(nil, "default", "sb-true-1")
	if err != nil || j == nil {
		t.Fatalf("stored job: %v, %v", j, err)
	}
	eq(t, "Update", deref(j.Update), structs.UpdateStrategy{})
	eq(t, "Periodic", j.Periodic, (*structs.PeriodicConfig)(nil))
	tg := j.TaskGroups[0]
	eq(t, "group Count", tg.Count, 1)
	eq(t, "group Update", tg.Update, (*structs.UpdateStrategy)(nil))
	eq(t, "group RestartPolicy", deref(tg.RestartPolicy), structs.RestartPolicy{Attempts: 3, Interval: 24 * time.Hour, Delay: 15 * time.Second, Mode: "fail"})
	eq(t, "group ReschedulePolicy", tg.ReschedulePolicy, (*structs.ReschedulePolicy)(nil))
	eq(t, "group EphemeralDisk", deref(tg.EphemeralDisk), structs.EphemeralDisk{SizeMB: 300})
}

// A sysbatch (or system) job as `nomad job inspect` prints it — its
// groups' ReschedulePolicy all zero, as Nomad writes it for types without
// rescheduling — is accepted when posted back, as Nomad accepts it, and
// stored without a reschedule policy; a reschedule block with any value
// set is still refused for these types.
func TestRegisterZeroReschedulePolicyWithoutRescheduling(t *testing.T) {
	url, _, srv := nomadJSONServer(t)
	const zero = `{"Attempts":0,"Interval":0,"Delay":0,"DelayFunction":"","MaxDelay":0,"Unlimited":false}`
	body := func(id, typ, resched string) string {
		return `{"Job":{"ID":"` + id + `","Name":"` + id + `","Type":"` + typ + `","Datacenters":["dc1"],
			"Update":{"Stagger":0,"MaxParallel":0,"HealthCheck":"","MinHealthyTime":0,"HealthyDeadline":0,
				"ProgressDeadline":0,"AutoRevert":false,"AutoPromote":false,"Canary":0},
			"TaskGroups":[{"Name":"g","Count":1,"ReschedulePolicy":` + resched + `,
				"Tasks":[{"Name":"t","Driver":"raw_exec","Config":{"command":"/bin/true"}}]}]}}`
	}
	tests := []struct {
		id, typ, resched string
		status           int
	}{
		{"sb-zero", "sysbatch", zero, http.StatusOK},
		{"sys-zero", "system", zero, http.StatusOK},
		{"sb-set", "sysbatch", `{"Attempts":1,"Interval":3600000000000}`, http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPut, url+"/v1/jobs", bytes.NewReader([]byte(body(tc.id, tc.typ, tc.resched))))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			msg, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("register: status %d, want %d: %s", resp.StatusCode, tc.status, msg)
			}
			if tc.status != http.StatusOK {
				if !strings.Contains(string(msg), "should not have a reschedule policy") {
					t.Fatalf("refusal %q does not name the reschedule rule", msg)
				}
				return
			}
			j, err := srv.State().JobByID(nil, "default", tc.id)
			if err != nil || j == nil {
				t.Fatalf("stored job: %v, %v", j, err)
			}
			eq(t, "group ReschedulePolicy", j.TaskGroups[0].ReschedulePolicy, (*structs.ReschedulePolicy)(nil))
		})
	}
}
