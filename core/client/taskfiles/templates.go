// Package taskfiles lays a task's files into its directory before it
// starts: artifacts fetched once (artifacts.go) and templates rendered on
// every start and again when the services they read change (templates.go,
// bounded by bound.go). Every write stays beneath the allocation directory
// through sdk/safefs, crossing no symlink a task planted there.
package taskfiles

import (
	"context"
	"fmt"
	"maps"
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

	"github.com/drover-org/drover/core/client/taskenv"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/safefs"
)

// A task's templates, rendered with consul-template's engine before the
// task starts and again whenever the native services they read change
// (`nomadService "name"`, `"tag.name"`, `"name@namespace"`): the
// registrations come from the servers by blocking lookups, and the task
// runner applies a re-rendered file's change_mode (restart, signal,
// noop). A
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

// ServiceLookupFunc reads one service's registrations (blocking with
// MinIndex); the client fills in the node's credentials.
type ServiceLookupFunc func(ctx context.Context, args *structs.ServiceLookupArgs) (*structs.ServiceLookupReply, error)

// serviceDep is one service query of a task's templates: nomadService,
// or (with the job's services drover's) Consul's service, or a listing
// (nomadServices, services).
type serviceDep struct {
	d         dep.Dependency
	name, tag string
	// all: a listing of every service of the namespace (name is "").
	all       bool
	namespace string
	index     uint64
	// convert turns the registrations into what the template function
	// returns.
	convert func([]*structs.ServiceRegistration) any
	value   any
}

// lookupArgs is the lookup of sd, blocking from minIndex (0: not).
func (sd *serviceDep) lookupArgs(minIndex uint64) *structs.ServiceLookupArgs {
	a := &structs.ServiceLookupArgs{Namespace: sd.namespace, ServiceName: sd.name, All: sd.all}
	if minIndex > 0 {
		a.MinIndex, a.MaxWait = minIndex, serviceLookupWait
	}
	return a
}

// what names sd in logs and errors.
func (sd *serviceDep) what() string {
	if sd.all {
		return "the service listing"
	}
	return fmt.Sprintf("service %q", sd.name)
}

// Renderer renders one task's templates and keeps what it needs
// to render them again: the brain of fetched data and each file's last
// contents.
type Renderer struct {
	allocDir, taskDir string
	tmpls             []*structs.Template
	env               map[string]string
	envList           []string
	lookup            ServiceLookupFunc // nil: nomadService is refused
	namespace         string
	// consul: Consul's catalogue functions (service, services) read
	// drover's catalogue (the job's services with no provider are
	// drover's: server.default_service_provider = "nomad").
	consul bool
	logger hclog.Logger

	mu       sync.Mutex
	budget   renderBudget // the current execution's (mu held)
	compiled []*template.Template
	brain    *template.Brain
	deps     map[string]*serviceDep // by the dependency's String()
	// varLookup serves nomadVar and nomadVarList (nil: refused); vdeps
	// are their queries (template_vars.go).
	varLookup VariableLookupFunc
	vdeps     map[string]*varDep
	outputs   []string
	written   bool
	vars      map[string]string
}

// NewRenderer is the renderer of tmpls into taskDir, a directory of
// allocDir, with the task's environment env; lookup (nil: none) serves
// nomadService, namespace is the alloc's.
func NewRenderer(allocDir, taskDir string, tmpls []*structs.Template, env map[string]string, lookup ServiceLookupFunc, namespace string, logger hclog.Logger) *Renderer {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Renderer{
		allocDir: allocDir, taskDir: taskDir, tmpls: tmpls, env: env, envList: taskenv.List(env),
		lookup: lookup, namespace: namespace, logger: logger,
		brain: template.NewBrain(), deps: map[string]*serviceDep{}, vdeps: map[string]*varDep{},
	}
}

// ReadConsulFromCatalogue makes the templates' Consul catalogue functions
// (`service "name"`, `services`) read drover's catalogue, as they read
// Consul's in Nomad: for a job whose services that name no provider are
// drover's (Job.DefaultServiceProvider "nomad"). Call before rendering.
func (r *Renderer) ReadConsulFromCatalogue() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.consul = true
}

// renderTemplates renders each template into the task's directory with the
// task's environment (and only it: the client's own environment is not
// visible to `env`) and returns the variables of the templates with env =
// true. A template whose data needs Consul, Vault or Nomad variables fails
// the task with the reason: drover serves none of them to templates.
func renderTemplates(allocDir, taskDir string, tmpls []*structs.Template, env map[string]string) (map[string]string, error) {
	r := NewRenderer(allocDir, taskDir, tmpls, env, nil, "", nil)
	if _, err := r.Render(context.Background(), false); err != nil {
		return nil, err
	}
	return r.EnvVars(), nil
}

// EnvVars are the variables of the templates with env = true.
func (r *Renderer) EnvVars() map[string]string {
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

func (r *Renderer) where(i int) string {
	return fmt.Sprintf("template %d (%s)", i+1, r.tmpls[i].DestPath)
}

// compile builds the templates once (r.mu held).
func (r *Renderer) compile() error {
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
func (r *Renderer) execute() ([]string, []dep.Dependency, error) {
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

// Render renders every template, fetching the services they read until
// none is missing, and writes the files whose contents changed (all of
// them on the first render). With wait, a service without registrations
// is waited for (until ctx ends). It returns the indexes of the templates
// written.
func (r *Renderer) Render(ctx context.Context, wait bool) ([]int, error) {
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
			r.mu.Lock()
			vd, isVar, err := r.trackVar(d)
			r.mu.Unlock()
			if err != nil {
				return nil, err
			}
			if isVar {
				if err := r.fetchVar(ctx, vd, wait); err != nil {
					return nil, err
				}
				continue
			}
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
func (r *Renderer) track(d dep.Dependency) (*serviceDep, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sd, ok := r.deps[d.String()]; ok {
		return sd, nil
	}
	sd, err := r.serviceDep(d)
	if err != nil {
		return nil, err
	}
	r.deps[d.String()] = sd
	return sd, nil
}

// serviceDep is the query of a dependency the templates lack, or the
// reason it cannot be served (r.mu held).
func (r *Renderer) serviceDep(d dep.Dependency) (*serviceDep, error) {
	refused := fmt.Errorf("a template needs data drover does not serve to templates (Consul or Vault): %s", d.String())
	if r.lookup == nil {
		return nil, refused
	}
	switch q := d.(type) {
	case *dep.NomadServiceQuery:
		return r.nomadServiceDep(q)
	case *dep.NomadServicesQuery:
		if q.String() != "nomad.services" {
			return nil, fmt.Errorf("templates: %s: a listing of another region is not supported", d.String())
		}
		return &serviceDep{d: d, all: true, namespace: r.namespace, convert: func(regs []*structs.ServiceRegistration) any {
			return snippets(regs, func(name string, tags []string) *dep.NomadServicesSnippet {
				return &dep.NomadServicesSnippet{Name: name, Tags: tags}
			})
		}}, nil
	case *dep.HealthServiceQuery:
		if !r.consul {
			return nil, fmt.Errorf("a template reads Consul's catalogue (%s), and drover has no Consul: use nomadService, or have the servers serve services without a provider (server { default_service_provider = \"nomad\" })", d.String())
		}
		return healthServiceDep(q, r.namespace)
	case *dep.CatalogServicesQuery:
		if !r.consul {
			return nil, fmt.Errorf("a template reads Consul's catalogue (%s), and drover has no Consul: use nomadServices, or have the servers serve services without a provider (server { default_service_provider = \"nomad\" })", d.String())
		}
		if q.String() != "catalog.services" {
			return nil, fmt.Errorf("templates: %s: a listing of another datacenter, partition or namespace is not supported", d.String())
		}
		return &serviceDep{d: d, all: true, namespace: r.namespace, convert: func(regs []*structs.ServiceRegistration) any {
			return snippets(regs, func(name string, tags []string) *dep.CatalogSnippet {
				return &dep.CatalogSnippet{Name: name, Tags: tags}
			})
		}}, nil
	}
	return nil, refused
}

// nomadServiceDep is a nomadService query.
func (r *Renderer) nomadServiceDep(q *dep.NomadServiceQuery) (*serviceDep, error) {
	d := dep.Dependency(q)
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
	tag := sd.tag
	sd.convert = func(regs []*structs.ServiceRegistration) any { return nomadServices(regs, tag) }
	return sd, nil
}

// healthServiceDep is Consul's `service "tag.name|filter"` read from
// drover's catalogue: the registrations of the service in namespace ns,
// with the health of their checks as Consul's statuses.
func healthServiceDep(q *dep.HealthServiceQuery, ns string) (*serviceDep, error) {
	s := strings.TrimSuffix(strings.TrimPrefix(q.String(), "health.service("), ")")
	filter := []string{dep.HealthPassing}
	if body, f, ok := strings.Cut(s, "|"); ok {
		s, filter = body, strings.Split(f, ",")
	}
	m := dep.HealthServiceQueryRe.FindStringSubmatch(s)
	if m == nil || strings.ContainsAny(s, "@~") {
		return nil, fmt.Errorf("templates: %s: drover's catalogue serves a service by name and tag (a datacenter, partition, namespace, peer or near is Consul's)", q.String())
	}
	sd := &serviceDep{d: q, namespace: ns}
	for i, n := range dep.HealthServiceQueryRe.SubexpNames() {
		switch n {
		case "name":
			sd.name = m[i]
		case "tag":
			sd.tag = m[i]
		}
	}
	tag := sd.tag
	sd.convert = func(regs []*structs.ServiceRegistration) any { return healthServices(regs, tag, filter) }
	return sd, nil
}

// healthServices turns registrations into what Consul's service function
// returns: those with tag whose status is one of filter ("any" takes all),
// sorted by node, then ID. The status is Consul's aggregate of the
// checks': critical when one fails or has no result yet (a Consul check
// starts critical), else warning when one warns, else passing.
func healthServices(regs []*structs.ServiceRegistration, tag string, filter []string) []*dep.HealthService {
	out := make([]*dep.HealthService, 0, len(regs))
	for _, s := range regs {
		if tag != "" && !contains(s.Tags, tag) {
			continue
		}
		status := dep.HealthPassing
		for _, c := range s.Checks {
			switch {
			case c == nil || c.Status == structs.CheckSuccess:
			case c.Status == dep.HealthWarning:
				if status == dep.HealthPassing {
					status = dep.HealthWarning
				}
			default:
				status = dep.HealthCritical
			}
		}
		if !contains(filter, dep.HealthAny) && !contains(filter, status) {
			continue
		}
		tags := append([]string(nil), s.Tags...)
		sort.Strings(tags)
		out = append(out, &dep.HealthService{
			Node: s.NodeID, NodeID: s.NodeID, NodeAddress: s.Address, Address: s.Address, Port: s.Port,
			ID: s.ID, Name: s.ServiceName, Tags: dep.ServiceTags(tags), Status: status,
		})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// snippets lists the services of regs by name with the union of their
// tags, sorted by name, as the listing functions return them.
func snippets[T any](regs []*structs.ServiceRegistration, mk func(name string, tags []string) T) []T {
	tags := map[string]map[string]bool{}
	for _, s := range regs {
		if tags[s.ServiceName] == nil {
			tags[s.ServiceName] = map[string]bool{}
		}
		for _, t := range s.Tags {
			tags[s.ServiceName][t] = true
		}
	}
	names := make([]string, 0, len(tags))
	for n := range tags {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]T, 0, len(names))
	for _, n := range names {
		ts := make([]string, 0, len(tags[n]))
		for t := range tags[n] {
			ts = append(ts, t)
		}
		sort.Strings(ts)
		out = append(out, mk(n, ts))
	}
	return out
}

// fetch reads a service's registrations into the brain; with wait, until
// it has at least one.
func (r *Renderer) fetch(ctx context.Context, sd *serviceDep, wait bool) error {
	args := sd.lookupArgs(0)
	logged := false
	for {
		reply, err := r.lookup(ctx, args)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("templates: waiting for %s: %w", sd.what(), ctx.Err())
			}
			return fmt.Errorf("templates: %s: %w", sd.what(), err)
		}
		value := sd.convert(reply.Services)
		if reflect.ValueOf(value).Len() > 0 || !wait {
			r.mu.Lock()
			sd.index, sd.value = reply.Index, value
			r.brain.Remember(sd.d, value)
			r.mu.Unlock()
			return nil
		}
		if !logged {
			logged = true
			r.logger.Info("template waits for a service to be registered", "service", sd.what(), "namespace", sd.namespace)
		}
		args = sd.lookupArgs(max(reply.Index, 1))
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
func (r *Renderer) write(outs []string) ([]int, error) {
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

func (r *Renderer) writeOne(i int, out string) error {
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
func (r *Renderer) destRel(i int) string {
	return filepath.Join(filepath.Base(r.taskDir), r.tmpls[i].DestPath)
}

// Watched reports whether the templates read any service.
func (r *Renderer) Watched() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.deps) > 0 || len(r.vdeps) > 0
}

// Watch follows the services the templates read with blocking lookups
// until ctx ends; when one changes it renders again and hands the indexes
// of the rewritten templates to onChange. retry is the wait after the
// n-th consecutive failed lookup of a service.
func (r *Renderer) Watch(ctx context.Context, retry func(n int) time.Duration, onChange func([]int)) {
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
				r.watchDep(ctx, sd, retry, events)
			}()
		}
		for key, vd := range r.vdeps {
			if started[key] {
				continue
			}
			started[key] = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.watchVar(ctx, vd, retry, events)
			}()
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-events:
		}
		changed, err := r.Render(ctx, false)
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
func (r *Renderer) watchDep(ctx context.Context, sd *serviceDep, retry func(int) time.Duration, events chan<- struct{}) {
	failures := 0
	for {
		r.mu.Lock()
		idx := sd.index
		r.mu.Unlock()
		reply, err := r.lookup(ctx, sd.lookupArgs(max(idx, 1)))
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			wait := retry(failures)
			r.logger.Warn("service lookup for a template failed; retrying", "service", sd.what(), "error", err, "retry_in", wait)
			if !waitOrDone(ctx, wait) {
				return
			}
			continue
		}
		failures = 0
		value := sd.convert(reply.Services)
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

// waitOrDone waits d; it reports false when ctx ended first.
func waitOrDone(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
