package taskfiles

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	dep "github.com/hashicorp/consul-template/dependency"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/structs"
)

// Templates' Nomad Variables: `nomadVar "path"` (waits until the variable
// exists, as Nomad's), `nomadVarExists`, `nomadVarList "prefix"`. A task
// reads what its workload identity may (structs.TaskVariablePaths) in its
// allocation's namespace; the servers decide, and a variable written
// later re-renders the template.

// VariableLookupFunc reads variables for the task's templates; the client
// fills in the node's credentials, the allocation and the task.
type VariableLookupFunc func(ctx context.Context, args *structs.VariableTaskReadArgs) (*structs.VariableTaskReadReply, error)

// varDep is one nomadVar or nomadVarList query of a task's templates.
type varDep struct {
	d        dep.Dependency
	path     string // nomadVar
	list     bool
	prefix   string // nomadVarList
	blocking bool   // nomadVar: wait for the variable to exist
	index    uint64
}

// SetVariableLookup lets the templates read variables through fn (nil:
// nomadVar and nomadVarList fail the task, saying so).
func (r *Renderer) SetVariableLookup(fn VariableLookupFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.varLookup = fn
}

// unexported reads a string field of a consul-template dependency, which
// keeps the parsed query private.
func unexported(d dep.Dependency, field string) string {
	v := reflect.ValueOf(d)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return ""
	}
	f := v.FieldByName(field)
	if !f.IsValid() || f.Kind() != reflect.String {
		return ""
	}
	return f.String()
}

// trackVar parses a variables dependency (r.mu held); ok false when d is
// not one.
func (r *Renderer) trackVar(d dep.Dependency) (*varDep, bool, error) {
	var vd *varDep
	switch d.(type) {
	case *dep.NVGetQuery:
		vd = &varDep{d: d, path: unexported(d, "path"), blocking: strings.HasPrefix(d.String(), "nomad.var.block(")}
	case *dep.NVListQuery:
		vd = &varDep{d: d, list: true, prefix: unexported(d, "prefix")}
	default:
		return nil, false, nil
	}
	if old, ok := r.vdeps[d.String()]; ok {
		return old, true, nil
	}
	if r.varLookup == nil {
		return nil, true, fmt.Errorf("templates: %s: this client serves no variables to templates", d.String())
	}
	if ns := unexported(d, "namespace"); ns != "" && ns != r.namespace {
		return nil, true, fmt.Errorf("templates: %s: a task reads the variables of its own namespace (%s) only", d.String(), r.namespace)
	}
	r.vdeps[d.String()] = vd
	return vd, true, nil
}

func (vd *varDep) args(minIndex uint64, wait time.Duration) *structs.VariableTaskReadArgs {
	return &structs.VariableTaskReadArgs{Path: vd.path, List: vd.list, Prefix: vd.prefix, MinIndex: minIndex, MaxWait: wait}
}

// remember puts a reply into the brain in the shapes consul-template's
// functions read, and reports whether the template can use it (a
// blocking nomadVar needs the variable).
func (r *Renderer) remember(vd *varDep, reply *structs.VariableTaskReadReply) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	vd.index = reply.Index
	if vd.list {
		metas := make([]*dep.NomadVarMeta, 0, len(reply.List))
		for _, m := range reply.List {
			metas = append(metas, dep.NewNomadVarMeta(&nomadapi.VariableMetadata{Namespace: m.Namespace, Path: m.Path,
				CreateIndex: m.CreateIndex, ModifyIndex: m.ModifyIndex, CreateTime: m.CreateTime, ModifyTime: m.ModifyTime}))
		}
		r.brain.Remember(vd.d, metas)
		return true
	}
	if reply.Var == nil {
		if vd.blocking {
			r.brain.Forget(vd.d)
			return false
		}
		r.brain.Remember(vd.d, nil)
		return true
	}
	v := reply.Var
	items := &dep.NewNomadVariable(&nomadapi.Variable{Namespace: v.Namespace, Path: v.Path, CreateIndex: v.CreateIndex,
		ModifyIndex: v.ModifyIndex, CreateTime: v.CreateTime, ModifyTime: v.ModifyTime, Items: nomadapi.VariableItems(v.Items)}).Items
	r.brain.Remember(vd.d, items)
	return true
}

// fetchVar reads a variables dependency into the brain; with wait, a
// nomadVar of a variable that does not exist yet is waited for.
func (r *Renderer) fetchVar(ctx context.Context, vd *varDep, wait bool) error {
	args := vd.args(0, 0)
	logged := false
	for {
		reply, err := r.varLookup(ctx, args)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("templates: waiting for %s: %w", vd.d.String(), ctx.Err())
			}
			return fmt.Errorf("templates: %s: %w", vd.d.String(), err)
		}
		if r.remember(vd, reply) || !wait {
			return nil
		}
		if !logged {
			logged = true
			r.logger.Info("template waits for a variable to be written", "path", vd.path, "namespace", r.namespace)
		}
		args = vd.args(max(reply.Index, 1), serviceLookupWait)
	}
}

// watchVar follows one variables dependency; a change goes into the brain
// and wakes Watch.
func (r *Renderer) watchVar(ctx context.Context, vd *varDep, retry func(int) time.Duration, events chan<- struct{}) {
	failures := 0
	for {
		r.mu.Lock()
		idx := vd.index
		r.mu.Unlock()
		reply, err := r.varLookup(ctx, vd.args(max(idx, 1), serviceLookupWait))
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			wait := retry(failures)
			r.logger.Warn("variable lookup for a template failed; retrying", "dependency", vd.d.String(), "error", err, "retry_in", wait)
			if !waitOrDone(ctx, wait) {
				return
			}
			continue
		}
		failures = 0
		if reply.Index == idx {
			continue
		}
		r.remember(vd, reply)
		select {
		case events <- struct{}{}:
		default:
		}
	}
}
