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
// /ui/actions/<name>?namespace=&job= (or ?deployment=, ?node=) shows what
// it will do and a form; POST to the same path does it. Both check the
// caller's ACL as the HTTP API route of the same write does; the POST
// also checks the CSRF token (csrf.go).
type actionSpec struct {
	kind string // "job", "deployment" or "node"
	// capability is the namespace capability a job or deployment action
	// needs; a node action needs node:write, as the API's node writes.
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
	Node       *structs.Node
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
	"node-drain": {kind: "node", verb: "drain nodes", button: "Drain node", danger: true,
		explain: func(t *actionTarget) string {
			s := fmt.Sprintf("Draining node %s marks it ineligible for new allocations and migrates its allocations to other nodes. "+
				"When the deadline passes, the allocations still on it are stopped.", t.Node.Name)
			if t.Node.DrainStrategy != nil {
				s += " The node is draining already: confirming replaces its drain (and deadline)."
			}
			return s
		},
		run: func(ctx context.Context, a Actions, t *actionTarget, form url.Values) (*doneData, error) {
			spec, words, err := drainSpecOf(form)
			if err != nil {
				return nil, err
			}
			resp, err := a.UpdateNodeDrain(ctx, t.Node.ID, spec, false)
			if err != nil {
				return nil, err
			}
			return nodeDone(t.Node, fmt.Sprintf("Node %s is draining (%s).", t.Node.Name, words), resp), nil
		}},
	"node-drain-stop": {kind: "node", verb: "stop node drains", button: "Stop drain",
		explain: func(t *actionTarget) string {
			return fmt.Sprintf("Stops the drain of node %s: allocations not yet migrated stay on it. The node becomes eligible again unless you keep it ineligible below.", t.Node.Name)
		},
		check: func(t *actionTarget) error {
			if t.Node.DrainStrategy == nil {
				return &pageError{status: http.StatusConflict, msg: fmt.Sprintf("Node %s is not draining: there is no drain to stop.", t.Node.Name)}
			}
			return nil
		},
		run: func(ctx context.Context, a Actions, t *actionTarget, form url.Values) (*doneData, error) {
			keep := form.Get("keep_ineligible") != ""
			resp, err := a.UpdateNodeDrain(ctx, t.Node.ID, nil, !keep)
			if err != nil {
				return nil, err
			}
			msg := fmt.Sprintf("The drain of node %s was stopped; the node is eligible again.", t.Node.Name)
			if keep {
				msg = fmt.Sprintf("The drain of node %s was stopped; the node stays ineligible.", t.Node.Name)
			}
			return nodeDone(t.Node, msg, resp), nil
		}},
	"node-eligible":   eligibilityAction(structs.NodeSchedulingEligible),
	"node-ineligible": eligibilityAction(structs.NodeSchedulingIneligible),
}

// eligibilityAction marks a node eligible or ineligible for new
// allocations; its allocations stay where they are.
func eligibilityAction(elig string) actionSpec {
	spec := actionSpec{kind: "node", verb: "change the eligibility of nodes", button: "Mark eligible",
		explain: func(t *actionTarget) string {
			return fmt.Sprintf("Marks node %s eligible: the schedulers may place new allocations on it again.", t.Node.Name)
		},
		check: func(t *actionTarget) error {
			switch {
			case t.Node.SchedulingEligibility == elig:
				return &pageError{status: http.StatusConflict, msg: fmt.Sprintf("Node %s is %s already.", t.Node.Name, elig)}
			case t.Node.DrainStrategy != nil && elig == structs.NodeSchedulingEligible:
				return &pageError{status: http.StatusConflict, msg: fmt.Sprintf("Node %s is draining: stop its drain to make it eligible again.", t.Node.Name)}
			}
			return nil
		},
		run: func(ctx context.Context, a Actions, t *actionTarget, _ url.Values) (*doneData, error) {
			resp, err := a.UpdateNodeEligibility(ctx, t.Node.ID, elig)
			if err != nil {
				return nil, err
			}
			return nodeDone(t.Node, fmt.Sprintf("Node %s is now %s.", t.Node.Name, elig), resp), nil
		}}
	if elig == structs.NodeSchedulingIneligible {
		spec.button, spec.danger = "Mark ineligible", true
		spec.explain = func(t *actionTarget) string {
			return fmt.Sprintf("Marks node %s ineligible: no new allocation is placed on it; the ones it runs keep running.", t.Node.Name)
		}
	}
	return spec
}

func nodeDone(n *structs.Node, msg string, resp *structs.NodeEligibilityUpdateResponse) *doneData {
	d := &doneData{Message: msg, Links: []link{{"Back to node " + n.Name, "/ui/nodes/" + url.PathEscape(n.ID)}}}
	if resp != nil {
		for _, id := range resp.EvalIDs {
			d.Links = append(d.Links, link{"Evaluation " + shortID(id), evalURL(id)})
		}
	}
	return d
}

// drainDeadline is one of the drain form's deadline choices: Nomad's
// -deadline, -no-deadline (0) and -force (negative) in one list.
type drainDeadline struct {
	Value, Label string
	d            time.Duration
}

// drainDeadlines are the choices of the drain form; the first is the
// default, Nomad's one hour.
var drainDeadlines = []drainDeadline{
	{"1h", "in 1 hour (the default)", time.Hour},
	{"10m", "in 10 minutes", 10 * time.Minute},
	{"4h", "in 4 hours", 4 * time.Hour},
	{"24h", "in 24 hours", 24 * time.Hour},
	{"none", "no deadline: wait for every allocation to migrate", 0},
	{"force", "now: stop every allocation at once (force)", -1},
}

// drainSpecOf reads the drain form: its deadline choice and whether
// system jobs' allocations stay. It returns the spec and its wording.
func drainSpecOf(form url.Values) (*structs.DrainSpec, string, error) {
	choice := form.Get("deadline")
	for _, c := range drainDeadlines {
		if c.Value == choice {
			spec := &structs.DrainSpec{Deadline: c.d, IgnoreSystemJobs: form.Get("ignore_system") != ""}
			words := "deadline " + c.Label
			if spec.IgnoreSystemJobs {
				words += ", system jobs stay"
			}
			return spec, words, nil
		}
	}
	values := make([]string, len(drainDeadlines))
	for i, c := range drainDeadlines {
		values[i] = c.Value
	}
	return nil, "", badRequest("Deadline: %q is not one of the choices (%s).", choice, strings.Join(values, ", "))
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
	Action, Title, Explain, Button       string
	Danger                               bool
	Namespace, JobID, Deployment, NodeID string
	CSRF                                 string
	Dispatch                             bool
	Meta, Payload                        string
	// Drain asks for a drain's deadline and system jobs; DrainStop
	// whether the node stays ineligible.
	Drain, DrainStop bool
	Deadlines        []drainDeadline
	Error            string
	Back             link
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
	case "node":
		id := params.Get("node")
		if id == "" {
			return spec, nil, badRequest("Name the node: the node parameter is missing.")
		}
		if !q.allowNodeWrite() {
			return spec, nil, forbidden("Your token may not %s (it needs node:write).", spec.verb)
		}
		n, err := q.st.NodeByID(nil, id)
		if err != nil {
			return spec, nil, err
		}
		if n == nil {
			return spec, nil, notFound("No node %s.", id)
		}
		t.Node = n
	}
	if spec.check != nil {
		if err := spec.check(t); err != nil {
			return spec, nil, err
		}
	}
	return spec, t, nil
}

func (u *UI) confirmData(q *request, spec actionSpec, t *actionTarget) *confirmData {
	action := q.PathValue("action")
	d := &confirmData{Action: action, Explain: spec.explain(t), Button: spec.button, Danger: spec.danger,
		CSRF: csrfToken(q.w, q.Request), Dispatch: action == "job-dispatch",
		Drain: action == "node-drain", DrainStop: action == "node-drain-stop"}
	if d.Drain {
		d.Deadlines = drainDeadlines
	}
	switch {
	case t.Node != nil:
		d.NodeID = t.Node.ID
		d.Title = spec.button + ": " + t.Node.Name
		d.Back = link{"Back to node " + t.Node.Name, "/ui/nodes/" + url.PathEscape(t.Node.ID)}
	case t.Job != nil:
		d.Namespace, d.JobID = t.Job.Namespace, t.Job.ID
		d.Title = spec.button + ": job " + t.Job.ID
		d.Back = link{"Back to job " + t.Job.ID, jobURL(t.Job.Namespace, t.Job.ID)}
	default:
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
