package deploywatcher

// Scripted tests of Decide and RevertTarget (testdata/*.txt, run with
// github.com/cockroachdb/datadriven; `go test -run TestDataDriven -rewrite`
// regenerates the expected output, which must then be read and checked).
//
// A script builds one deployment and its job step by step and asks Decide
// what the watcher must do. Times are offsets from t0 (watcher_test.go).
// Each script starts with job version 3 (CreateIndex 7) and a running
// deployment of it without groups, at +0s.
//
// Commands:
//
//	job [version=N] [create-index=N] [stop] | job purged
//	    the job's current version as the watcher reads it
//	deployment [version=N] [job-create-index=N] [status=S] [description=KEY]
//	    replace the deployment's own fields (groups are kept); KEY is one of
//	    none, running, needs-promotion, auto-promotion
//	group name=G [desired=N] [canaries=N] [placed-canaries=N] [promoted]
//	      [auto-promote] [auto-revert] [healthy=N] [unhealthy=N] [progress-by=D]
//	    define (or redefine) a group's deployment state
//	health group=G [healthy=N] [unhealthy=N] [placed-canaries=N] [progress-by=D]
//	    update a group's allocation health, keeping the rest
//	promote [group=G]
//	    an operator's promotion of one group (all without group)
//	now D
//	    the clock is at +D
//	decide [changed]
//	    Decide(deployment, job, now, changed): the action, its description,
//	    whether a failure reverts, and the next deadline
//	show
//	    the deployment and job as built
//	revert-target failed=N versions=(V[:stable],...)
//	    RevertTarget over the listed job versions

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/drover-org/drover/core/structs"
)

var ddDescriptions = map[string]string{
	"none":            "",
	"running":         structs.DeploymentStatusDescriptionRunning,
	"needs-promotion": structs.DeploymentStatusDescriptionRunningNeedsPromotion,
	"auto-promotion":  structs.DeploymentStatusDescriptionRunningAutoPromotion,
}

func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := &ddDeploy{
			job: &structs.Job{ID: "web", Namespace: structs.DefaultNamespace, Version: 3, CreateIndex: 7},
			d: &structs.Deployment{ID: "d1", Namespace: structs.DefaultNamespace, JobID: "web", JobVersion: 3,
				JobCreateIndex: 7, Status: structs.DeploymentStatusRunning, TaskGroups: map[string]*structs.DeploymentState{}},
			now: t0,
		}
		datadriven.RunTest(t, path, s.run)
	})
}

type ddDeploy struct {
	job *structs.Job // nil: purged
	d   *structs.Deployment
	now time.Time
}

func rel(at time.Time) string {
	if at.IsZero() {
		return "none"
	}
	return "+" + at.Sub(t0).String()
}

func (s *ddDeploy) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "job":
		if d.HasArg("purged") {
			s.job = nil
			return "job purged\n"
		}
		if s.job == nil {
			s.job = &structs.Job{ID: "web", Namespace: structs.DefaultNamespace}
		}
		d.MaybeScanArgs(t, "version", &s.job.Version)
		d.MaybeScanArgs(t, "create-index", &s.job.CreateIndex)
		s.job.Stop = d.HasArg("stop")
		return s.show()
	case "deployment":
		d.MaybeScanArgs(t, "version", &s.d.JobVersion)
		d.MaybeScanArgs(t, "job-create-index", &s.d.JobCreateIndex)
		d.MaybeScanArgs(t, "status", &s.d.Status)
		var key string
		if d.MaybeScanArgs(t, "description", &key) {
			desc, ok := ddDescriptions[key]
			if !ok {
				d.Fatalf(t, "unknown description %q", key)
			}
			s.d.StatusDescription = desc
		}
		return s.show()
	case "group":
		var name string
		d.ScanArgs(t, "name", &name)
		st := &structs.DeploymentState{}
		d.MaybeScanArgs(t, "desired", &st.DesiredTotal)
		d.MaybeScanArgs(t, "canaries", &st.DesiredCanaries)
		st.Promoted = d.HasArg("promoted")
		st.AutoPromote = d.HasArg("auto-promote")
		st.AutoRevert = d.HasArg("auto-revert")
		s.d.TaskGroups[name] = st
		s.health(t, d, st)
		return s.show()
	case "health":
		var name string
		d.ScanArgs(t, "group", &name)
		st := s.d.TaskGroups[name]
		if st == nil {
			d.Fatalf(t, "no group %q", name)
		}
		s.health(t, d, st)
		return s.show()
	case "promote":
		var name string
		d.MaybeScanArgs(t, "group", &name)
		for g, st := range s.d.TaskGroups {
			if name == "" || g == name {
				st.Promoted = true
			}
		}
		return s.show()
	case "now":
		if len(d.CmdArgs) != 1 {
			d.Fatalf(t, "usage: now <duration>")
		}
		dur, err := time.ParseDuration(d.CmdArgs[0].Key)
		if err != nil {
			d.Fatalf(t, "now: %v", err)
		}
		s.now = t0.Add(dur)
		return "clock " + rel(s.now) + "\n"
	case "decide":
		dec := Decide(s.d, s.job, s.now, d.HasArg("changed"))
		out := dec.Action.String()
		if dec.Description != "" {
			out += fmt.Sprintf(" %q", dec.Description)
		}
		if dec.AutoRevert {
			out += " auto-revert"
		}
		return out + " next=" + rel(dec.Next) + "\n"
	case "show":
		return s.show()
	case "revert-target":
		var failed uint64
		var versions []string
		d.ScanArgs(t, "failed", &failed)
		d.ScanArgs(t, "versions", &versions)
		var jobs []*structs.Job
		for _, v := range versions {
			num, stable := strings.CutSuffix(v, ":stable")
			n, err := strconv.ParseUint(num, 10, 64)
			if err != nil {
				d.Fatalf(t, "version %q: %v", v, err)
			}
			jobs = append(jobs, &structs.Job{ID: "web", Version: n, Stable: stable})
		}
		if j := RevertTarget(jobs, failed); j != nil {
			return fmt.Sprintf("revert to version %d\n", j.Version)
		}
		return "no stable version to revert to\n"
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// health applies the health arguments of a group or health command.
func (s *ddDeploy) health(t *testing.T, d *datadriven.TestData, st *structs.DeploymentState) {
	d.MaybeScanArgs(t, "healthy", &st.HealthyAllocs)
	d.MaybeScanArgs(t, "unhealthy", &st.UnhealthyAllocs)
	var n int
	if d.MaybeScanArgs(t, "placed-canaries", &n) {
		st.PlacedCanaries = nil
		for i := range n {
			st.PlacedCanaries = append(st.PlacedCanaries, fmt.Sprintf("canary-%d", i))
		}
	}
	var by time.Duration
	if d.MaybeScanArgs(t, "progress-by", &by) {
		st.RequireProgressBy = t0.Add(by)
	}
}

func (s *ddDeploy) show() string {
	var out strings.Builder
	if s.job == nil {
		out.WriteString("job: purged\n")
	} else {
		fmt.Fprintf(&out, "job: version=%d create-index=%d", s.job.Version, s.job.CreateIndex)
		if s.job.Stop {
			out.WriteString(" stopped")
		}
		out.WriteString("\n")
	}
	fmt.Fprintf(&out, "deployment: version=%d job-create-index=%d status=%s", s.d.JobVersion, s.d.JobCreateIndex, s.d.Status)
	if s.d.StatusDescription != "" {
		fmt.Fprintf(&out, " description=%q", s.d.StatusDescription)
	}
	out.WriteString("\n")
	names := make([]string, 0, len(s.d.TaskGroups))
	for n := range s.d.TaskGroups {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		st := s.d.TaskGroups[n]
		fmt.Fprintf(&out, "  %s: healthy=%d/%d unhealthy=%d", n, st.HealthyAllocs, st.DesiredTotal, st.UnhealthyAllocs)
		if st.DesiredCanaries > 0 {
			fmt.Fprintf(&out, " canaries=%d/%d", len(st.PlacedCanaries), st.DesiredCanaries)
			if st.Promoted {
				out.WriteString(" promoted")
			}
		}
		if st.AutoPromote {
			out.WriteString(" auto-promote")
		}
		if st.AutoRevert {
			out.WriteString(" auto-revert")
		}
		if !st.RequireProgressBy.IsZero() {
			fmt.Fprintf(&out, " progress-by=%s", rel(st.RequireProgressBy))
		}
		out.WriteString("\n")
	}
	return out.String()
}
