package structs

import (
	"encoding/json"
	"reflect"
)

// Diff types, as Nomad's API names them.
const (
	DiffTypeNone    = "None"
	DiffTypeAdded   = "Added"
	DiffTypeDeleted = "Deleted"
	DiffTypeEdited  = "Edited"
)

// Task diff annotations: what a task's change does to its allocations.
const (
	AnnotationForcesCreate            = "forces create"
	AnnotationForcesDestroy           = "forces destroy"
	AnnotationForcesInplaceUpdate     = "forces in-place update"
	AnnotationForcesDestructiveUpdate = "forces create/destroy update"
)

// JobDiff is the difference between two versions of a job, in the shape of
// Nomad's API (`job plan -diff`, job versions with diffs).
type JobDiff struct {
	Type       string           `codec:",omitempty"`
	ID         string           `codec:",omitempty"`
	Fields     []*FieldDiff     `codec:",omitempty"`
	Objects    []*ObjectDiff    `codec:",omitempty"`
	TaskGroups []*TaskGroupDiff `codec:",omitempty"`
}

// TaskGroupDiff is the difference of one group. Updates counts, by Nomad's
// labels ("create", "destroy", "create/destroy update", ...), what a plan
// would do to the group's allocations.
type TaskGroupDiff struct {
	Type    string            `codec:",omitempty"`
	Name    string            `codec:",omitempty"`
	Fields  []*FieldDiff      `codec:",omitempty"`
	Objects []*ObjectDiff     `codec:",omitempty"`
	Tasks   []*TaskDiff       `codec:",omitempty"`
	Updates map[string]uint64 `codec:",omitempty"`
}

// TaskDiff is the difference of one task.
type TaskDiff struct {
	Type        string        `codec:",omitempty"`
	Name        string        `codec:",omitempty"`
	Fields      []*FieldDiff  `codec:",omitempty"`
	Objects     []*ObjectDiff `codec:",omitempty"`
	Annotations []string      `codec:",omitempty"`
}

// ObjectDiff is the difference of a nested block (Config, Resources, a
// constraint, ...).
type ObjectDiff struct {
	Type    string        `codec:",omitempty"`
	Name    string        `codec:",omitempty"`
	Fields  []*FieldDiff  `codec:",omitempty"`
	Objects []*ObjectDiff `codec:",omitempty"`
}

// FieldDiff is one primitive value; Old and New are its string forms, empty
// on the side where it is absent.
type FieldDiff struct {
	Type        string   `codec:",omitempty"`
	Name        string   `codec:",omitempty"`
	Old         string   `codec:",omitempty"`
	New         string   `codec:",omitempty"`
	Annotations []string `codec:",omitempty"`
}

// Fields that are bookkeeping, not spec, or that get a diff of their own.
var (
	jobDiffSkip = map[string]bool{"ID": true, "TaskGroups": true, "Status": true, "StatusDescription": true,
		"Stable": true, "Version": true, "SubmitTime": true, "CreateIndex": true, "ModifyIndex": true,
		"JobModifyIndex": true, "Payload": true, "DefaultServiceProvider": true}
	groupDiffSkip = map[string]bool{"Name": true, "Tasks": true}
	taskDiffSkip  = map[string]bool{"Name": true}
)

// DiffJobs compares the old version of a job with a new one. With
// contextual, the unchanged fields of edited objects (a task's resources,
// a restart block, a config) are listed too (as type None), so that a
// reader sees a change in its context; `job plan` asks for that. The
// primitive fields of the job, its groups and its tasks themselves are
// diffed non-contextually, as Nomad does: only the changed ones are
// listed. Either side may be nil (the job is added or deleted).
func DiffJobs(old, cur *Job, contextual bool) *JobDiff {
	if old == nil && cur == nil {
		return nil
	}
	d := &JobDiff{}
	if cur != nil {
		d.ID = cur.ID
	} else {
		d.ID = old.ID
	}
	ov, nv := structValue(old), structValue(cur)
	d.Fields, d.Objects = diffTop(ov, nv, jobDiffSkip, contextual && old != nil && cur != nil)
	d.TaskGroups = diffGroups(old, cur, contextual)
	d.Type = diffType(old != nil, cur != nil, len(d.Fields) > 0 && hasChange(d.Fields) || len(d.Objects) > 0 || anyGroupChanged(d.TaskGroups))
	if d.Type == DiffTypeNone {
		d.Fields = nil
	}
	return d
}

func anyGroupChanged(gs []*TaskGroupDiff) bool {
	for _, g := range gs {
		if g.Type != DiffTypeNone {
			return true
		}
	}
	return false
}

func hasChange(fs []*FieldDiff) bool {
	for _, f := range fs {
		if f.Type != DiffTypeNone {
			return true
		}
	}
	return false
}

func diffType(hadOld, hasNew, changed bool) string {
	switch {
	case !hadOld:
		return DiffTypeAdded
	case !hasNew:
		return DiffTypeDeleted
	case changed:
		return DiffTypeEdited
	}
	return DiffTypeNone
}

// pairByName pairs the old and the current elements of the same name:
// [old, cur], either nil when the element is only on the other side.
func pairByName[T any](old, cur []*T, name func(*T) string) map[string][2]*T {
	pairs := map[string][2]*T{}
	for _, e := range old {
		pairs[name(e)] = [2]*T{e, nil}
	}
	for _, e := range cur {
		p := pairs[name(e)]
		p[1] = e
		pairs[name(e)] = p
	}
	return pairs
}

func diffGroups(old, cur *Job, contextual bool) []*TaskGroupDiff {
	var oldGroups, curGroups []*TaskGroup
	if old != nil {
		oldGroups = old.TaskGroups
	}
	if cur != nil {
		curGroups = cur.TaskGroups
	}
	groups := pairByName(oldGroups, curGroups, func(tg *TaskGroup) string { return tg.Name })
	var out []*TaskGroupDiff
	for _, name := range sortedKeys(groups) {
		p := groups[name]
		out = append(out, diffGroup(name, p[0], p[1], contextual))
	}
	return out
}

func diffGroup(name string, old, cur *TaskGroup, contextual bool) *TaskGroupDiff {
	d := &TaskGroupDiff{Name: name}
	both := old != nil && cur != nil
	d.Fields, d.Objects = diffTop(structValue(old), structValue(cur), groupDiffSkip, contextual && both)
	if both && old.Count != cur.Count {
		for _, f := range d.Fields {
			if f.Name == "Count" && old.Count < cur.Count {
				f.Annotations = []string{AnnotationForcesCreate}
			} else if f.Name == "Count" {
				f.Annotations = []string{AnnotationForcesDestroy}
			}
		}
	}
	var oldTasks, curTasks []*Task
	if old != nil {
		oldTasks = old.Tasks
	}
	if cur != nil {
		curTasks = cur.Tasks
	}
	tasks := pairByName(oldTasks, curTasks, func(t *Task) string { return t.Name })
	for _, tn := range sortedKeys(tasks) {
		p := tasks[tn]
		td := &TaskDiff{Name: tn}
		tboth := p[0] != nil && p[1] != nil
		td.Fields, td.Objects = diffTop(structValue(p[0]), structValue(p[1]), taskDiffSkip, contextual && tboth)
		td.Type = diffType(p[0] != nil, p[1] != nil, hasChange(td.Fields) || len(td.Objects) > 0)
		if td.Type == DiffTypeNone {
			td.Fields = nil
		}
		d.Tasks = append(d.Tasks, td)
	}
	changed := hasChange(d.Fields) || len(d.Objects) > 0
	for _, td := range d.Tasks {
		changed = changed || td.Type != DiffTypeNone
	}
	d.Type = diffType(old != nil, cur != nil, changed)
	if d.Type == DiffTypeNone {
		d.Fields = nil
	}
	return d
}

// Annotate fills each group's Updates from a plan's counts and marks each
// changed task with what its change forces: a group whose allocations the
// plan only updates in place gets "forces in-place update", any other
// change "forces create/destroy update".
func (d *JobDiff) Annotate(updates map[string]*DesiredUpdates) {
	if d == nil {
		return
	}
	for _, g := range d.TaskGroups {
		u := updates[g.Name]
		if u != nil {
			g.Updates = u.Labels()
		}
		for _, t := range g.Tasks {
			switch {
			case t.Type == DiffTypeNone:
			case t.Type == DiffTypeAdded && g.Type == DiffTypeAdded:
				t.Annotations = []string{AnnotationForcesCreate}
			case t.Type == DiffTypeDeleted && g.Type == DiffTypeDeleted:
				t.Annotations = []string{AnnotationForcesDestroy}
			case u != nil && u.InPlaceUpdate > 0 && u.DestructiveUpdate == 0:
				t.Annotations = []string{AnnotationForcesInplaceUpdate}
			default:
				t.Annotations = []string{AnnotationForcesDestructiveUpdate}
			}
		}
	}
}

// Labels maps the non-zero counts to Nomad's update labels.
func (u *DesiredUpdates) Labels() map[string]uint64 {
	out := map[string]uint64{}
	for label, n := range map[string]uint64{
		"ignore": u.Ignore, "create": u.Place, "migrate": u.Migrate, "destroy": u.Stop,
		"in-place update": u.InPlaceUpdate, "create/destroy update": u.DestructiveUpdate,
		"canary": u.Canary, "preemptions": u.Preemptions,
	} {
		if n > 0 {
			out[label] = n
		}
	}
	return out
}

// structValue is the struct a pointer points to, or the invalid Value for
// nil (the side on which the object is absent).
func structValue[T any](p *T) reflect.Value {
	if p == nil {
		return reflect.Value{}
	}
	return reflect.ValueOf(p).Elem()
}

// diffStruct compares two values of one struct type field by field; an
// invalid Value is an absent side. Primitives become fields, string maps
// become "Name[key]" fields, and lists, other maps and nested structs become
// objects. With contextual, unchanged primitives are listed as None.
func diffStruct(old, cur reflect.Value, skip map[string]bool, contextual bool) ([]*FieldDiff, []*ObjectDiff) {
	return diffStructCtx(old, cur, skip, contextual, contextual)
}

// diffTop is diffStruct for a job, group or task itself: its own primitive
// fields (and flat string maps) are diffed non-contextually, its blocks
// with contextual.
func diffTop(old, cur reflect.Value, skip map[string]bool, contextual bool) ([]*FieldDiff, []*ObjectDiff) {
	return diffStructCtx(old, cur, skip, false, contextual)
}

// diffStructCtx is diffStruct with the contextual choice made apart for
// the struct's own fields (fieldsCtx) and its objects (contextual).
func diffStructCtx(old, cur reflect.Value, skip map[string]bool, fieldsCtx, contextual bool) ([]*FieldDiff, []*ObjectDiff) {
	var t reflect.Type
	switch {
	case old.IsValid():
		t = old.Type()
	case cur.IsValid():
		t = cur.Type()
	default:
		return nil, nil
	}
	var fields []*FieldDiff
	var objects []*ObjectDiff
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() || skip[sf.Name] {
			continue
		}
		var ov, nv reflect.Value
		if old.IsValid() {
			ov = old.Field(i)
		}
		if cur.IsValid() {
			nv = cur.Field(i)
		}
		ft := sf.Type
		if sf.Anonymous && ft.Kind() == reflect.Struct {
			f, o := diffStructCtx(ov, nv, nil, fieldsCtx, contextual)
			fields, objects = append(fields, f...), append(objects, o...)
			continue
		}
		switch {
		case isPrimitive(ft):
			if f := diffField(sf.Name, primitiveString(ov), primitiveString(nv), fieldsCtx); f != nil {
				fields = append(fields, f)
			}
		case ft.Kind() == reflect.Map && ft.Key().Kind() == reflect.String && isPrimitive(ft.Elem()):
			fields = append(fields, diffFlat(flattenValue(sf.Name, ov), flattenValue(sf.Name, nv), fieldsCtx)...)
		case ft.Kind() == reflect.Slice && isPrimitive(ft.Elem()):
			if o := diffSet(sf.Name, ov, nv, contextual); o != nil {
				objects = append(objects, o)
			}
		case ft.Kind() == reflect.Slice && isStructish(ft.Elem()):
			objects = append(objects, diffStructSet(singular(sf.Name), ov, nv, contextual)...)
		case isStructish(ft):
			if o := diffObject(sf.Name, deref(ov), deref(nv), contextual); o != nil {
				objects = append(objects, o)
			}
		default: // Config and other free-form values: flattened into one object
			if o := diffFlatObject(sf.Name, flattenValue("", ov), flattenValue("", nv), contextual); o != nil {
				objects = append(objects, o)
			}
		}
	}
	return fields, objects
}

func diffObject(name string, old, cur reflect.Value, contextual bool) *ObjectDiff {
	if !old.IsValid() && !cur.IsValid() {
		return nil
	}
	both := old.IsValid() && cur.IsValid()
	fields, objects := diffStruct(old, cur, nil, contextual && both)
	if !hasChange(fields) && len(objects) == 0 {
		return nil // unchanged, or an empty block added or removed
	}
	return &ObjectDiff{Type: diffType(old.IsValid(), cur.IsValid(), true), Name: name, Fields: fields, Objects: objects}
}

// diffStructSet compares lists of blocks as sets: a block that is in both
// is unchanged; any other is added or deleted.
func diffStructSet(name string, old, cur reflect.Value, contextual bool) []*ObjectDiff {
	key := func(v reflect.Value) string {
		b, _ := json.Marshal(v.Interface())
		return string(b)
	}
	elems := func(v reflect.Value) map[string]reflect.Value {
		m := map[string]reflect.Value{}
		if v.IsValid() {
			for i := 0; i < v.Len(); i++ {
				if e := deref(v.Index(i)); e.IsValid() {
					m[key(e)] = e
				}
			}
		}
		return m
	}
	om, nm := elems(old), elems(cur)
	var out []*ObjectDiff
	for _, k := range sortedKeys(om) {
		if _, ok := nm[k]; !ok {
			if o := diffObject(name, om[k], reflect.Value{}, contextual); o != nil {
				out = append(out, o)
			}
		}
	}
	for _, k := range sortedKeys(nm) {
		if _, ok := om[k]; !ok {
			if o := diffObject(name, reflect.Value{}, nm[k], contextual); o != nil {
				out = append(out, o)
			}
		}
	}
	return out
}

// diffSet compares lists of primitives (Datacenters, MetaRequired) as sets:
// an object of the list's name whose fields, all of that name, are the
// values added or deleted.
func diffSet(name string, old, cur reflect.Value, contextual bool) *ObjectDiff {
	vals := func(v reflect.Value) map[string]bool {
		m := map[string]bool{}
		if v.IsValid() {
			for i := 0; i < v.Len(); i++ {
				m[primitiveString(v.Index(i))] = true
			}
		}
		return m
	}
	om, nm := vals(old), vals(cur)
	var fields []*FieldDiff
	changed := false
	all := map[string]bool{}
	for k := range om {
		all[k] = true
	}
	for k := range nm {
		all[k] = true
	}
	for _, k := range sortedKeys(all) {
		switch {
		case om[k] && nm[k]:
			if contextual {
				fields = append(fields, &FieldDiff{Type: DiffTypeNone, Name: name, Old: k, New: k})
			}
		case nm[k]:
			changed = true
			fields = append(fields, &FieldDiff{Type: DiffTypeAdded, Name: name, New: k})
		default:
			changed = true
			fields = append(fields, &FieldDiff{Type: DiffTypeDeleted, Name: name, Old: k})
		}
	}
	if !changed {
		return nil
	}
	return &ObjectDiff{Type: diffType(len(om) > 0, len(nm) > 0, true), Name: name, Fields: fields}
}

func diffFlatObject(name string, old, cur map[string]string, contextual bool) *ObjectDiff {
	both := len(old) > 0 && len(cur) > 0
	fields := diffFlat(old, cur, contextual && both)
	if !hasChange(fields) {
		return nil
	}
	return &ObjectDiff{Type: diffType(len(old) > 0, len(cur) > 0, true), Name: name, Fields: fields}
}

// diffFlat compares flattened maps key by key, in key order.
func diffFlat(old, cur map[string]string, contextual bool) []*FieldDiff {
	all := map[string]bool{}
	for k := range old {
		all[k] = true
	}
	for k := range cur {
		all[k] = true
	}
	var out []*FieldDiff
	for _, k := range sortedKeys(all) {
		if f := diffField(k, old[k], cur[k], contextual); f != nil {
			out = append(out, f)
		}
	}
	return out
}

// diffField compares one value; an empty string is an absent value.
func diffField(name, old, cur string, contextual bool) *FieldDiff {
	switch {
	case old == cur && (!contextual || old == ""):
		return nil
	case old == cur:
		return &FieldDiff{Type: DiffTypeNone, Name: name, Old: old, New: cur}
	case old == "":
		return &FieldDiff{Type: DiffTypeAdded, Name: name, New: cur}
	case cur == "":
		return &FieldDiff{Type: DiffTypeDeleted, Name: name, Old: old}
	}
	return &FieldDiff{Type: DiffTypeEdited, Name: name, Old: old, New: cur}
}
