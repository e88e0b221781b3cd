package client

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	dep "github.com/hashicorp/consul-template/dependency"
	"github.com/hashicorp/consul-template/template"
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/safefs"
)

// A task's templates, rendered with consul-template's engine before the
// task starts and again whenever the native services they read change
// (`nomadService "name"`, `"tag.name"`, `"name@namespace"`): the
// registrations come from the servers by blocking lookups, and a changed
// file applies the template's change_mode (restart, signal, noop). A
// template that reads a service with no registration yet holds the task's
// start until one appears, as Nomad's does.

// templateDenied are consul-template functions a task's template may not
// call: they run programs or write files outside the rendering (Nomad's
// default function_denylist).
var templateDenied = []string{"plugin", "writeToFile"}

// Bounds of template data lookups.
const (
	// maxTemplateRounds bounds the render passes that discover data a
	// template needs (each pass may use data the last one fetched).
	maxTemplateRounds = 16
	// serviceLookupWait is the MaxWait of a blocking service lookup.
	serviceLookupWait = 5 * time.Minute
)

// serviceLookupFunc reads one service's registrations (blocking with
// MinIndex); the client fills in the node's credentials.
type serviceLookupFunc func(ctx context.Context, args *structs.ServiceLookupArgs) (*structs.ServiceLookupReply, error)

// serviceDep is one `nomadService` query of a task's templates.
type serviceDep struct {
	d         dep.Dependency
	name, tag string
	namespace string
	index     uint64
	value     []*dep.NomadService
}

// templateRenderer renders one task's templates and keeps what it needs
// to render them again: the brain of fetched data and each file's last
// contents.
type templateRenderer struct {
	allocDir, taskDir string
	tmpls             []*structs.Template
	env               map[string]string
	envList           []string
	lookup            serviceLookupFunc // nil: nomadService is refused
	namespace         string
	logger            hclog.Logger

	mu       sync.Mutex
	budget   renderBudget // the current execution's (mu held)
	compiled []*template.Template
	brain    *template.Brain
	deps     map[string]*serviceDep // by the dependency's String()
	outputs  []string
	written  bool
	vars     map[string]string
}

func newTemplateRenderer(allocDir, taskDir string, tmpls []*structs.Template, env map[string]string, lookup serviceLookupFunc, namespace string, logger hclog.Logger) *templateRenderer {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &templateRenderer{
		allocDir: allocDir, taskDir: taskDir, tmpls: tmpls, env: env, envList: envList(env),
		lookup: lookup, namespace: namespace, logger: logger,
		brain: template.NewBrain(), deps: map[string]*serviceDep{},
	}
}

// renderTemplates renders each template into the task's directory with the
// task's environment (and only it: the client's own environment is not
// visible to `env`) and returns the variables of the templates with env =
// true. A template whose data needs Consul, Vault or Nomad variables fails
// the task with the reason: drover serves none of them to templates.
func renderTemplates(allocDir, taskDir string, tmpls []*structs.Template, env map[string]string) (map[string]string, error) {
	r := newTemplateRenderer(allocDir, taskDir, tmpls, env, nil, "", nil)
	if _, err := r.render(context.Background(), false); err != nil {
		return nil, err
	}
	return r.envVars(), nil
}

// envVars are the variables of the templates with env = true.
func (r *templateRenderer) envVars() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.vars == nil {
		return nil
	}
	out := make(map[string]string, len(r.vars))
	for k, v := range r.vars {
		out[k] = v
	}
	return out
}

// readBeneath reads rel, a path beneath the trusted directory root, of at
// most limit bytes, refusing a symlink on the way.
func readBeneath(root, rel string, limit int64) ([]byte, error) {
	d, err := safefs.Open(root)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadFile(rel, limit)
}

func (r *templateRenderer) where(i int) string {
	return fmt.Sprintf("template %d (%s)", i+1, r.tmpls[i].DestPath)
}

// compile builds the templates once (r.mu held).
func (r *templateRenderer) compile() error {
	if r.compiled != nil {
		return nil
	}
	env := r.env
	taskRel := filepath.Base(r.taskDir)
	out := make([]*template.Template, 0, len(r.tmpls))
	for i, t := range r.tmpls {
		dst, err := containedPath(r.allocDir, filepath.Join(taskRel, t.DestPath))
		if err != nil {
			return fmt.Errorf("%s: destination: %v", r.where(i), err)
		}
		contents := t.EmbeddedTmpl
		if t.SourcePath != "" {
			// Read beneath the allocation directory without following a
			// symlink: the task directory is writable by tasks.
			b, err := readBeneath(r.allocDir, filepath.Join(taskRel, t.SourcePath), structs.MaxTemplateBytes)
			if err != nil {
				return fmt.Errorf("%s: source %s: %w", r.where(i), t.SourcePath, err)
			}
			contents = string(b)
		}
		left, right := t.LeftDelim, t.RightDelim
		if left == "" || right == "" {
			left, right = "{{", "}}"
		}
		// Rewritten so that the render counts its output and stops at
		// its bound (template_bound.go); the rewrite uses the default
		// delimiters.
		bounded, err := boundTemplate(contents, left, right)
		if err != nil {
			return fmt.Errorf("%s: parse: %v", r.where(i), err)
		}
		funcs := boundedFuncs(&r.budget)
		maps.Copy(funcs, map[string]any{
			"env": func(k string) string { return env[k] },
			"envOrDefault": func(k, def string) string {
				if v, ok := env[k]; ok && v != "" {
					return v
				}
				return def
			},
			"mustEnv": func(k string) (string, error) {
				if v := env[k]; v != "" {
					return v, nil
				}
				return "", fmt.Errorf("environment variable %s is not set", k)
			},
		})
		tm, err := template.NewTemplate(&template.NewTemplateInput{
			Contents: bounded, Destination: dst, ErrMissingKey: t.ErrMissingKey,
			LeftDelim: "{{", RightDelim: "}}", FunctionDenylist: templateDenied, SandboxPath: r.taskDir,
			ExtFuncMap: funcs,
		})
		if err != nil {
			return fmt.Errorf("%s: %v", r.where(i), err)
		}
		out = append(out, tm)
	}
	r.compiled = out
	return nil
}

// execute runs every template against the brain (r.mu held) and returns
// the outputs and the data they lack.
func (r *templateRenderer) execute() ([]string, []dep.Dependency, error) {
	if err := r.compile(); err != nil {
		return nil, nil, err
	}
	outs := make([]string, len(r.compiled))
	var missing []dep.Dependency
	seen := map[string]bool{}
	for i, tm := range r.compiled {
		r.budget.reset()
		res, err := tm.Execute(&template.ExecuteInput{Brain: r.brain, Env: r.envList})
		if r.budget.err != nil {
			// Stopped by its bound: say which, not where the counter
			// was.
			return nil, nil, fmt.Errorf("%s: %w", r.where(i), r.budget.err)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", r.where(i), err)
		}
		if res.Missing != nil {
			for _, d := range res.Missing.List() {
				if !seen[d.String()] {
					seen[d.String()] = true
					missing = append(missing, d)
				}
			}
		}
		outs[i] = string(res.Output)
	}
	return outs, missing, nil
}

// render renders every template, fetching the services they read until
// none is missing, and writes the files whose contents changed (all of
// them on the first render). With wait, a service without registrations
// is waited for (until ctx ends). It returns the indexes of the templates
// written.
func (r *templateRenderer) render(ctx context.Context, wait bool) ([]int, error) {
	for range maxTemplateRounds {
		r.mu.Lock()
		outs, missing, err := r.execute()
		r.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if len(missing) == 0 {
			return r.write(outs)
		}
		for _, d := range missing {
			sd, err := r.track(d)
			if err != nil {
				return nil, err
			}
			if err := r.fetch(ctx, sd, wait); err != nil {
				return nil, err
			}
		}
	}
	return nil, fmt.Errorf("templates: still missing data after %d lookups", maxTemplateRounds)
}

// track parses a dependency the templates lack into a service query; any
// other kind of data is refused with the reason.
func (r *templateRenderer) track(d dep.Dependency) (*serviceDep, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sd, ok := r.deps[d.String()]; ok {
		return sd, nil
	}
	q, ok := d.(*dep.NomadServiceQuery)
	if !ok || r.lookup == nil {
		return nil, fmt.Errorf("a template needs data drover does not serve to templates (Consul, Vault, Nomad variables or service listings): %s", d.String())
	}
	s := strings.TrimSuffix(strings.TrimPrefix(q.String(), "nomad.service("), ")")
	if strings.Contains(s, ":") {
		return nil, fmt.Errorf("templates: %s: the <count> <key> form of nomadService is not supported", d.String())
	}
	m := dep.NomadServiceQueryRe.FindStringSubmatch(s)
	if m == nil {
		return nil, fmt.Errorf("templates: %s: invalid service query", d.String())
	}
	sd := &serviceDep{d: d, namespace: r.namespace}
	for i, n := range dep.NomadServiceQueryRe.SubexpNames() {
		switch n {
		case "name":
			sd.name = m[i]
		case "tag":
			sd.tag = m[i]
		case "region":
			// "name@namespace": the service of another namespace.
			if m[i] != "" {
				sd.namespace = m[i]
			}
		}
	}
	r.deps[d.String()] = sd
	return sd, nil
}

// fetch reads a service's registrations into the brain; with wait, until
// it has at least one.
func (r *templateRenderer) fetch(ctx context.Context, sd *serviceDep, wait bool) error {
	args := &structs.ServiceLookupArgs{Namespace: sd.namespace, ServiceName: sd.name}
	logged := false
	for {
		reply, err := r.lookup(ctx, args)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("templates: waiting for service %q: %w", sd.name, ctx.Err())
			}
			return fmt.Errorf("templates: service %q: %w", sd.name, err)
		}
		value := nomadServices(reply.Services, sd.tag)
		if len(value) > 0 || !wait {
			r.mu.Lock()
			sd.index, sd.value = reply.Index, value
			r.brain.Remember(sd.d, value)
			r.mu.Unlock()
			return nil
		}
		if !logged {
			logged = true
			r.logger.Info("template waits for a service to be registered", "service", sd.name, "namespace", sd.namespace)
		}
		args = &structs.ServiceLookupArgs{Namespace: sd.namespace, ServiceName: sd.name,
			MinIndex: max(reply.Index, 1), MaxWait: serviceLookupWait}
	}
}

// nomadServices turns registrations into what consul-template's
// nomadService returns, filtered by tag and sorted as it sorts them.
func nomadServices(regs []*structs.ServiceRegistration, tag string) []*dep.NomadService {
	out := make([]*dep.NomadService, 0, len(regs))
	for _, s := range regs {
		if tag != "" && !contains(s.Tags, tag) {
			continue
		}
		tags := append([]string(nil), s.Tags...)
		sort.Strings(tags)
		out = append(out, &dep.NomadService{
			ID: s.ID, Name: s.ServiceName, Node: s.NodeID, Address: s.Address, Port: s.Port,
			Datacenter: s.Datacenter, Tags: dep.ServiceTags(tags), JobID: s.JobID, AllocID: s.AllocID,
		})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// write writes each template whose output changed (every one the first
// time) and re-reads the env templates.
func (r *templateRenderer) write(outs []string) ([]int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var changed []int
	vars := map[string]string{}
	anyEnv := false
	for i, t := range r.tmpls {
		if t.Envvars {
			anyEnv = true
			parsed, err := parseEnvFile([]byte(outs[i]))
			if err != nil {
				return nil, fmt.Errorf("%s: env: %v", r.where(i), err)
			}
			for k, v := range parsed {
				vars[k] = v
			}
		}
		if r.written && r.outputs[i] == outs[i] {
			continue
		}
		if err := r.writeOne(i, outs[i]); err != nil {
			return nil, err
		}
		changed = append(changed, i)
	}
	r.outputs, r.written = outs, true
	if anyEnv {
		r.vars = vars
	}
	return changed, nil
}

func (r *templateRenderer) writeOne(i int, out string) error {
	t := r.tmpls[i]
	where := r.where(i)
	root, err := safefs.Open(r.allocDir)
	if err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	defer root.Close()
	mode := os.FileMode(t.FileMode()).Perm()
	// Beneath the allocation directory, crossing no symlink a task
	// planted (alloc/ and the task's directories are writable by tasks),
	// into a new file renamed over the destination: a symlink at the
	// destination is replaced, never written through. The mode and owner
	// are set on the open file, not by path.
	f, commit, err := root.CreateAtomic(r.destRel(i), mode)
	if err != nil {
		return fmt.Errorf("%s: destination: %w", where, err)
	}
	if _, err := f.WriteString(out); err != nil {
		commit(false)
		return fmt.Errorf("%s: %v", where, err)
	}
	if err := f.Chmod(mode); err != nil {
		commit(false)
		return fmt.Errorf("%s: %v", where, err)
	}
	if t.Uid != nil || t.Gid != nil {
		uid, gid := -1, -1
		if t.Uid != nil {
			uid = *t.Uid
		}
		if t.Gid != nil {
			gid = *t.Gid
		}
		if err := f.Chown(uid, gid); err != nil {
			commit(false)
			return fmt.Errorf("%s: set owner: %v", where, err)
		}
	}
	if err := commit(true); err != nil {
		return fmt.Errorf("%s: destination: %w", where, err)
	}
	return nil
}

// destRel is template i's destination relative to the allocation
// directory (its DestPath is relative to the task's directory).
func (r *templateRenderer) destRel(i int) string {
	return filepath.Join(filepath.Base(r.taskDir), r.tmpls[i].DestPath)
}

// watched reports whether the templates read any service.
func (r *templateRenderer) watched() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.deps) > 0
}

// watch follows the services the templates read with blocking lookups
// until ctx ends; when one changes it renders again and hands the indexes
// of the rewritten templates to onChange.
func (r *templateRenderer) watch(ctx context.Context, bo backoff, onChange func([]int)) {
	events := make(chan struct{}, 1)
	started := map[string]bool{}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		r.mu.Lock()
		for key, sd := range r.deps {
			if started[key] {
				continue
			}
			started[key] = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.watchDep(ctx, sd, bo, events)
			}()
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-events:
		}
		changed, err := r.render(ctx, false)
		if err != nil {
			if ctx.Err() == nil {
				r.logger.Error("failed to render templates again", "error", err)
			}
			continue
		}
		if len(changed) > 0 {
			onChange(changed)
		}
	}
}

// watchDep follows one service; a change of its registrations goes into
// the brain and wakes watch.
func (r *templateRenderer) watchDep(ctx context.Context, sd *serviceDep, bo backoff, events chan<- struct{}) {
	failures := 0
	for {
		r.mu.Lock()
		idx := sd.index
		r.mu.Unlock()
		reply, err := r.lookup(ctx, &structs.ServiceLookupArgs{Namespace: sd.namespace, ServiceName: sd.name,
			MinIndex: max(idx, 1), MaxWait: serviceLookupWait})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			wait := bo.next(failures)
			r.logger.Warn("service lookup for a template failed; retrying", "service", sd.name, "error", err, "retry_in", wait)
			if !waitOrDone(ctx, wait) {
				return
			}
			continue
		}
		failures = 0
		value := nomadServices(reply.Services, sd.tag)
		r.mu.Lock()
		sd.index = reply.Index
		same := reflect.DeepEqual(value, sd.value)
		if !same {
			sd.value = value
			r.brain.Remember(sd.d, value)
		}
		r.mu.Unlock()
		if !same {
			select {
			case events <- struct{}{}:
			default:
			}
		}
	}
}

// allocNamespace is the namespace of an alloc's services.
func allocNamespace(a *structs.Allocation) string {
	ns := a.Namespace
	if ns == "" && a.Job != nil {
		ns = a.Job.Namespace
	}
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	return ns
}

// lookupServices is the service lookup templates use (nil: none).
func (ar *allocRunner) lookupServices() serviceLookupFunc {
	if ar.cfg.LookupServices == nil {
		return nil
	}
	return ar.cfg.LookupServices
}

// watchTemplates starts following the services the task's templates read
// and returns the function that stops it (nil: nothing to follow).
func (tr *taskRunner) watchTemplates(ctx context.Context) func() {
	r := tr.tpl
	if r == nil || !r.watched() {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.watch(wctx, backoff{Base: time.Second, Max: 30 * time.Second}, func(changed []int) { tr.templatesChanged(wctx, changed) })
	}()
	return func() {
		cancel()
		<-done
	}
}

// templatesChanged applies the change_mode of the templates rendered anew:
// a restart (also for env templates) wins over signals; noop does nothing.
func (tr *taskRunner) templatesChanged(ctx context.Context, changed []int) {
	restart := false
	var signals []string
	for _, i := range changed {
		t := tr.task.Templates[i]
		if t.Envvars {
			restart = true
		}
		switch t.ChangeMode {
		case "", structs.TemplateChangeModeRestart:
			restart = true
		case structs.TemplateChangeModeSignal:
			if t.ChangeSignal != "" && !contains(signals, t.ChangeSignal) {
				signals = append(signals, t.ChangeSignal)
			}
		}
	}
	if tr.dead() || tr.killRequested() || (!restart && len(signals) == 0) {
		return
	}
	// splay: a random wait of up to the templates' splay before acting,
	// so that the tasks of many allocations re-rendered by one change do
	// not all restart at once.
	if !waitSplay(ctx, templateSplay(tr.task.Templates, changed), randUpTo) || tr.dead() || tr.killRequested() {
		return
	}
	drv, err := tr.ar.driver(tr.task.Driver)
	if err != nil {
		tr.logger.Warn("cannot apply a template's change_mode", "error", err)
		return
	}
	if restart {
		tr.emit(structs.NewTaskEvent(structs.TaskRestartSignal, "Template with change_mode restart re-rendered"))
		if tr.claimTemplateStop(true) {
			tr.stopForTemplate(ctx, drv)
		}
		return
	}
	tr.mu.Lock()
	running := tr.handle != nil && tr.state.State == structs.TaskStateRunning
	tr.mu.Unlock()
	if !running {
		return // the next start reads the new files
	}
	for _, sig := range signals {
		tr.emit(structs.NewTaskEvent(structs.TaskSignaling, "Template re-rendered; sending "+sig))
		if err := drv.SignalTask(ctx, tr.id, sig); err != nil && ctx.Err() == nil {
			tr.logger.Warn("failed to signal the task for its template", "signal", sig, "error", err)
		}
	}
}

// claimTemplateStop decides, once per request, who stops the run for a
// template's restart: the watcher (request: it asks for the restart) when
// the task runs, else the run goroutine right after the start that raced
// with the request.
func (tr *taskRunner) claimTemplateStop(request bool) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if request {
		tr.tplRestart = true
	}
	if !tr.tplRestart || tr.tplStopIssued || tr.handle == nil || tr.state.State != structs.TaskStateRunning {
		return false
	}
	tr.tplStopIssued = true
	return true
}

// stopForTemplate stops the run; its end is judged a template restart.
func (tr *taskRunner) stopForTemplate(ctx context.Context, drv driver.Driver) {
	if err := drv.StopTask(ctx, tr.id, tr.killTimeout(), tr.task.KillSignal); err != nil && ctx.Err() == nil {
		tr.logger.Warn("failed to stop the task for its template's restart", "error", err)
	}
}

// restartForCheck stops the running task for a check_restart; its end
// counts against the restart policy, as a failure.
func (tr *taskRunner) restartForCheck(ctx context.Context, check string) {
	tr.mu.Lock()
	ok := tr.handle != nil && tr.state.State == structs.TaskStateRunning && !tr.tplStopIssued && !tr.killed
	if ok {
		tr.checkRestart, tr.tplStopIssued = true, true
	}
	tr.mu.Unlock()
	if !ok {
		return
	}
	drv, err := tr.ar.driver(tr.task.Driver)
	if err != nil {
		tr.logger.Warn("cannot restart the task for its check", "error", err)
		return
	}
	tr.emit(structs.NewTaskEvent(structs.TaskRestartSignal, fmt.Sprintf("healthcheck: check %q unhealthy", check)))
	tr.stopForTemplate(ctx, drv)
}

// takeCheckRestart reports and clears a check_restart's stop.
func (tr *taskRunner) takeCheckRestart() bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	r := tr.checkRestart
	if r {
		tr.checkRestart, tr.tplStopIssued, tr.tplRestart = false, false, false
	}
	return r
}

// lastStart is when the task's current run started (zero: not running).
func (tr *taskRunner) lastStart() time.Time {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.state.State != structs.TaskStateRunning {
		return time.Time{}
	}
	if tr.state.LastRestart.After(tr.state.StartedAt) {
		return tr.state.LastRestart
	}
	return tr.state.StartedAt
}

// takeTemplateRestart reports and clears a template's restart request.
func (tr *taskRunner) takeTemplateRestart() bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	r := tr.tplRestart && tr.tplStopIssued
	tr.tplRestart, tr.tplStopIssued = false, false
	return r
}

// applyTemplateEnv puts the env templates' latest variables into the
// driver config before a start (run goroutine only).
func (tr *taskRunner) applyTemplateEnv() {
	if tr.tpl == nil || tr.cfg == nil {
		return
	}
	for k, v := range tr.tpl.envVars() {
		tr.cfg.Env[k] = v
	}
}

// templateSplay is the longest splay of the changed templates.
func templateSplay(ts []*structs.Template, changed []int) time.Duration {
	var d time.Duration
	for _, i := range changed {
		if i >= 0 && i < len(ts) && ts[i] != nil {
			d = max(d, ts[i].Splay)
		}
	}
	return d
}

// randUpTo is a random duration in [0, d).
func randUpTo(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

// waitSplay waits pick(splay); false when ctx ended first.
func waitSplay(ctx context.Context, splay time.Duration, pick func(time.Duration) time.Duration) bool {
	d := pick(splay)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
