package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/structs"
)

// An action is a write behind a confirmation step: GET
// /ui/actions/<name>?namespace=&job= (or ?deployment=) shows what it will
// do and a form; POST to the same path does it. Both check the caller's
// ACL as the HTTP API route of the same write does; the POST also checks
// the CSRF token (csrf.go).
type actionSpec struct {
	kind       string // "job" or "deployment"
	capability string
	// verb words the capability's refusal: "stop jobs".
	verb   string
	button string
	danger bool
	// explain says what confirming does, for the confirmation page.
	explain func(t *actionTarget) string
	// check refuses a target the action cannot apply to.
	check func(t *actionTarget) error
	run   func(ctx context.Context, a Actions, t *actionTarget, form url.Values) (*doneData, error)
}

// actionTarget is what an action applies to, read from the state store.
type actionTarget struct {
	Job        *structs.Job
	Deployment *structs.Deployment
}

// maxActionBody bounds an action's form: a dispatch payload is at most
// 16 KiB (Nomad's limit), with room for its meta.
const maxActionBody = 64 << 10

var actions = map[string]actionSpec{
	"job-stop": {kind: "job", capability: acl.NamespaceCapabilitySubmitJob, verb: "stop jobs", button: "Stop job", danger: true,
		explain: func(t *actionTarget) string {
			return fmt.Sprintf("Stopping job %s stops all of its allocations. The job stays listed, as dead, until it is purged or collected.", t.Job.ID)
		},
		run: func(ctx context.Context, a Actions, t *actionTarget, _ url.Values) (*doneData, error) {
			resp, err := a.StopJob(ctx, t.Job.Namespace, t.Job.ID, false)
			if err != nil {
				return nil, err
			}
			d := &doneData{Message: fmt.Sprintf("Job %s is stopping.", t.Job.ID), Links: []link{{"Back to job " + t.Job.ID, jobURL(t.Job.Namespace, t.Job.ID)}}}
			if resp.EvalID != "" {
				d.Links = append(d.Links, link{"Evaluation " + shortID(resp.EvalID), evalURL(resp.EvalID)})
			}
			return d, nil
		}},
	"job-purge": {kind: "job", capability: acl.NamespaceCapabilitySubmitJob, verb: "purge jobs", button: "Purge job", danger: true,
		explain: func(t *actionTarget) string {
			return fmt.Sprintf("Purging job %s stops it and deletes it with its versions at once. This cannot be undone.", t.Job.ID)
		},
		run: func(ctx context.Context, a Actions, t *actionTarget, _ url.Values) (*doneData, error) {
			if _, err := a.StopJob(ctx, t.Job.Namespace, t.Job.ID, true); err != nil {
				return nil, err
			}
			return &doneData{Message: fmt.Sprintf("Job %s was purged.", t.Job.ID),
				Links: []link{{"Jobs in " + t.Job.Namespace, "/ui/jobs?namespace=" + url.QueryEscape(t.Job.Namespace)}}}, nil
		}},
	"job-periodic-force": {kind: "job", capability: acl.NamespaceCapabilitySubmitJob, verb: "force periodic launches of jobs", button: "Launch now",
		explain: func(t *actionTarget) string {
			return fmt.Sprintf("Launches an instance of periodic job %s now, outside its schedule (%s).", t.Job.ID, t.Job.Periodic.Spec)
		},
		check: func(t *actionTarget) error {
			if !t.Job.IsPeriodic() {
				return badRequest("Job %s is not periodic: there is nothing to force.", t.Job.ID)
			}
			return nil
		},
		run: func(ctx context.Context, a Actions, t *actionTarget, _ url.Values) (*doneData, error) {
			resp, err := a.ForcePeriodic(ctx, t.Job.Namespace, t.Job.ID)
			if err != nil {
				return nil, err
			}
			d := &doneData{Message: fmt.Sprintf("Launched an instance of periodic job %s.", t.Job.ID), Links: []link{{"Back to job " + t.Job.ID, jobURL(t.Job.Namespace, t.Job.ID)}}}
			if resp.EvalID != "" {
				d.Links = append(d.Links, link{"Evaluation " + shortID(resp.EvalID), evalURL(resp.EvalID)})
			}
			return d, nil
		}},
	"job-dispatch": {kind: "job", capability: acl.NamespaceCapabilityDispatchJob, verb: "dispatch jobs", button: "Dispatch",
		explain: func(t *actionTarget) string {
			return fmt.Sprintf("Dispatches an instance of parameterized job %s with the meta and payload below.", t.Job.ID)
		},
		check: func(t *actionTarget) error {
			if !t.Job.IsParameterized() {
				return badRequest("Job %s is not parameterized: it cannot be dispatched.", t.Job.ID)
			}
			return nil
		},
		run: func(ctx context.Context, a Actions, t *actionTarget, form url.Values) (*doneData, error) {
			meta, err := parseMeta(form.Get("meta"))
			if err != nil {
				return nil, err
			}
			req := &structs.JobDispatchRequest{JobID: t.Job.ID, Meta: meta}
			if p := form.Get("payload"); p != "" {
				req.Payload = []byte(p)
			}
			resp, err := a.DispatchJob(ctx, t.Job.Namespace, req)
			if err != nil {
				return nil, err
			}
			return &doneData{Message: fmt.Sprintf("Dispatched job %s.", resp.DispatchedJobID),
				Links: []link{{"Job " + resp.DispatchedJobID, jobURL(t.Job.Namespace, resp.DispatchedJobID)}, {"Back to job " + t.Job.ID, jobURL(t.Job.Namespace, t.Job.ID)}}}, nil
		}},
	"deployment-promote": {kind: "deployment", capability: acl.NamespaceCapabilitySubmitJob, verb: "promote deployments", button: "Promote",
		explain: func(t *actionTarget) string {
			return fmt.Sprintf("Promotes the canaries of every group of deployment %s (job %s version %d): the rest of the allocations are then replaced.", shortID(t.Deployment.ID), t.Deployment.JobID, t.Deployment.JobVersion)
		},
		check: activeDeployment,
		run: func(ctx context.Context, a Actions, t *actionTarget, _ url.Values) (*doneData, error) {
			if _, err := a.PromoteDeployment(ctx, t.Deployment.ID); err != nil {
				return nil, err
			}
			return &doneData{Message: fmt.Sprintf("Deployment %s was promoted.", shortID(t.Deployment.ID)),
				Links: []link{{"Back to deployment " + shortID(t.Deployment.ID), deploymentURL(t.Deployment.ID)}}}, nil
		}},
	"deployment-fail": {kind: "deployment", capability: acl.NamespaceCapabilitySubmitJob, verb: "fail deployments", button: "Mark as failed", danger: true,
		explain: func(t *actionTarget) string {
			return fmt.Sprintf("Marks deployment %s (job %s version %d) as failed; groups with auto_revert go back to the last stable version.", shortID(t.Deployment.ID), t.Deployment.JobID, t.Deployment.JobVersion)
		},
		check: activeDeployment,
		run: func(ctx context.Context, a Actions, t *actionTarget, _ url.Values) (*doneData, error) {
			if _, err := a.FailDeployment(ctx, t.Deployment.ID); err != nil {
				return nil, err
			}
			return &doneData{Message: fmt.Sprintf("Deployment %s was marked as failed.", shortID(t.Deployment.ID)),
				Links: []link{{"Back to deployment " + shortID(t.Deployment.ID), deploymentURL(t.Deployment.ID)}}}, nil
		}},
}

func activeDeployment(t *actionTarget) error {
	if !t.Deployment.Active() {
		return &pageError{status: http.StatusConflict, msg: fmt.Sprintf("Deployment %s is %s, no longer active: it cannot be changed.", shortID(t.Deployment.ID), t.Deployment.Status)}
	}
	return nil
}

// parseMeta reads dispatch meta, one key=value a line.
func parseMeta(text string) (map[string]string, error) {
	var meta map[string]string
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if k = strings.TrimSpace(k); !ok || k == "" {
			return nil, badRequest("Meta line %d: write key=value.", i+1)
		}
		if meta == nil {
			meta = map[string]string{}
		}
		meta[k] = strings.TrimSpace(v)
	}
	return meta, nil
}

type link struct{ Text, URL string }

type confirmData struct {
	Action, Title, Explain, Button string
	Danger                         bool
	Namespace, JobID, Deployment   string
	CSRF                           string
	Dispatch                       bool
	Meta, Payload                  string
	Error                          string
	Back                           link
}

type doneData struct {
	Message string
	Links   []link
}

// resolveAction finds the action, its target and checks the caller's ACL
// and the action's preconditions.
func (u *UI) resolveAction(q *request, params url.Values) (actionSpec, *actionTarget, error) {
	spec, ok := actions[q.PathValue("action")]
	if !ok {
		return spec, nil, notFound("No action %s.", q.PathValue("action"))
	}
	t := &actionTarget{}
	switch spec.kind {
	case "job":
		ns, id := params.Get("namespace"), params.Get("job")
		if ns == "" {
			ns = structs.DefaultNamespace
		}
		if id == "" {
			return spec, nil, badRequest("Name the job: the job parameter is missing.")
		}
		if !q.allowNS(ns, spec.capability) {
			return spec, nil, forbidden("Your token may not %s in namespace %s (it needs %s).", spec.verb, ns, spec.capability)
		}
		j, err := q.st.JobByID(nil, ns, id)
		if err != nil {
			return spec, nil, err
		}
		if j == nil {
			return spec, nil, notFound("No job %s in namespace %s.", id, ns)
		}
		t.Job = j
	case "deployment":
		id := params.Get("deployment")
		if id == "" {
			return spec, nil, badRequest("Name the deployment: the deployment parameter is missing.")
		}
		d, err := q.st.DeploymentByID(nil, id)
		if err != nil {
			return spec, nil, err
		}
		if d == nil {
			return spec, nil, notFound("No deployment %s.", id)
		}
		if !q.allowNS(d.Namespace, spec.capability) {
			return spec, nil, forbidden("Your token may not %s in namespace %s (it needs %s).", spec.verb, d.Namespace, spec.capability)
		}
		t.Deployment = d
	}
	if spec.check != nil {
		if err := spec.check(t); err != nil {
			return spec, nil, err
		}
	}
	return spec, t, nil
}

func (u *UI) confirmData(q *request, spec actionSpec, t *actionTarget) *confirmData {
	d := &confirmData{Action: q.PathValue("action"), Explain: spec.explain(t), Button: spec.button, Danger: spec.danger,
		CSRF: csrfToken(q.w, q.Request), Dispatch: q.PathValue("action") == "job-dispatch"}
	if t.Job != nil {
		d.Namespace, d.JobID = t.Job.Namespace, t.Job.ID
		d.Title = spec.button + ": job " + t.Job.ID
		d.Back = link{"Back to job " + t.Job.ID, jobURL(t.Job.Namespace, t.Job.ID)}
	} else {
		d.Deployment = t.Deployment.ID
		d.Title = spec.button + ": deployment " + shortID(t.Deployment.ID)
		d.Back = link{"Back to deployment " + shortID(t.Deployment.ID), deploymentURL(t.Deployment.ID)}
	}
	return d
}

// confirmAction is GET /ui/actions/<name>: the confirmation step.
func (u *UI) confirmAction(q *request) (*view, error) {
	spec, t, err := u.resolveAction(q, q.URL.Query())
	if err != nil {
		return nil, err
	}
	d := u.confirmData(q, spec, t)
	return &view{tmpl: "confirm", title: d.Title, data: d}, nil
}

// doAction is POST /ui/actions/<name>: the write, once the form's CSRF
// token matches and the caller's ACL allows it.
func (u *UI) doAction(q *request) (*view, error) {
	q.Body = http.MaxBytesReader(q.w, q.Body, maxActionBody)
	if err := q.ParseForm(); err != nil {
		return nil, badRequest("The form could not be read (at most %d KiB).", maxActionBody>>10)
	}
	if why := checkCSRF(q.Request); why != "" {
		return nil, forbidden("%s", why)
	}
	spec, t, err := u.resolveAction(q, q.PostForm)
	if err != nil {
		return nil, err
	}
	if u.cfg.Actions == nil {
		return nil, &pageError{status: http.StatusNotImplemented, msg: "This agent cannot make changes from the UI."}
	}
	ctx, cancel := context.WithTimeout(q.Context(), 30*time.Second)
	defer cancel()
	done, err := spec.run(ctx, u.cfg.Actions, t, q.PostForm)
	if err != nil {
		if q.PathValue("action") == "job-dispatch" && errStatus(err) == http.StatusBadRequest {
			// Show the form again with what was typed and why it failed.
			d := u.confirmData(q, spec, t)
			d.Meta, d.Payload, d.Error = q.PostForm.Get("meta"), q.PostForm.Get("payload"), err.Error()
			return &view{tmpl: "confirm", title: d.Title, data: d, status: http.StatusBadRequest}, nil
		}
		return nil, err
	}
	return &view{tmpl: "done", title: "Done", data: done}, nil
}
