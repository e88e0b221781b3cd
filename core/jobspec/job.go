package jobspec

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/dynblock"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/drover-org/drover/core/structs"
)

// parser accumulates diagnostics while walking one file, so that a user
// sees every problem of a job file at once rather than one per run.
type parser struct {
	src      []byte
	filename string
	opts     Options
	diags    hcl.Diagnostics
	// configDepth is how many levels of a task config (the config block,
	// blocks and lists of blocks inside it) enclose what configBody reads.
	configDepth int

	// ctx holds var, local and the functions; every expression is
	// evaluated in a child of it (runtimeContext).
	ctx       *hcl.EvalContext
	funcs     map[string]function.Function
	vars      map[string]*variable
	localVals map[string]*local
	// sensitive holds the string forms of sensitive variables' values,
	// which diagnostics never show.
	sensitive []string
	// spent is what function calls have built (maxFunctionBytes);
	// dynBlocks what dynamic blocks have made (maxDynamicBlocks).
	spent, dynBlocks int
	// maxRefBytes and maxRefElems are the size of the largest value an
	// expression may refer to (a variable, local or for_each value).
	maxRefBytes, maxRefElems int
	// bodies indexes the file's bodies by their start, so a body that a
	// dynamic block wraps can be read for its shape (configBody).
	bodies map[int]*hclsyntax.Body
	// blockAt holds the positions of the job ("") and of its groups and
	// tasks, by the names validation messages start with (`group "g"`,
	// `group "g": task "t"`), and of their services and checks
	// (`group "g": service "s": check "c"`); see Check.
	blockAt map[string]hcl.Range
	// jobName is the job's name (its ID when it sets none), the start of
	// a default service name.
	jobName string
	// bcrypts counts the bcrypt calls of the parse (maxBcryptCalls).
	bcrypts int
	// taskKey is the position key of the task being parsed
	// (`group "g": task "t"`), under which its inner blocks are noted.
	taskKey string
}

// blockKind describes one block type a body accepts.
type blockKind struct {
	name   string
	labels []string
	many   bool // several blocks of this type may appear
	unique bool // with many: no two blocks may share their labels
}

// content checks body against the given attributes and blocks, reporting
// unknown names, missing labels, empty labels and repeated single blocks
// with their positions. The returned blocks of a single kind hold at most
// one block.
func (p *parser) content(body hcl.Body, attrs []string, blocks []blockKind) (hcl.Attributes, map[string]hcl.Blocks) {
	schema := &hcl.BodySchema{}
	for _, a := range attrs {
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: a})
	}
	kinds := map[string]blockKind{}
	for _, k := range blocks {
		schema.Blocks = append(schema.Blocks, hcl.BlockHeaderSchema{Type: k.name, LabelNames: k.labels})
		kinds[k.name] = k
	}
	c, diags := body.Content(schema)
	p.diags = append(p.diags, diags...)

	byType := map[string]hcl.Blocks{}
	seen := map[string]*hcl.Block{}
	for _, b := range c.Blocks {
		prev := byType[b.Type]
		if len(prev) > 0 && !kinds[b.Type].many {
			p.errorf(b.DefRange, fmt.Sprintf("Duplicate %s block", b.Type),
				"Only one %s block is allowed here; another was defined at %s.", b.Type, posString(prev[0].DefRange))
			continue
		}
		bad := false
		for i, l := range b.Labels {
			if l == "" {
				p.errorf(b.LabelRanges[i], fmt.Sprintf("Invalid %s %s", b.Type, kinds[b.Type].labels[i]),
					"The %s of a %s block must not be empty.", kinds[b.Type].labels[i], b.Type)
				bad = true
			}
		}
		if bad {
			continue
		}
		if kinds[b.Type].unique {
			key := b.Type + "\x00" + strings.Join(b.Labels, "\x00")
			if other := seen[key]; other != nil {
				p.errorf(b.LabelRanges[0], fmt.Sprintf("Duplicate %s %q", b.Type, strings.Join(b.Labels, " ")),
					"Each %s needs its own name; %q was already defined at %s.", b.Type, strings.Join(b.Labels, " "), posString(other.DefRange))
				continue
			}
			seen[key] = b
		}
		byType[b.Type] = append(prev, b)
	}
	return c.Attributes, byType
}

func first(blocks map[string]hcl.Blocks, name string) *hcl.Block {
	if bs := blocks[name]; len(bs) > 0 {
		return bs[0]
	}
	return nil
}

// stringMap decodes meta or env, which Nomad accepts both as a block
// (`meta { k = "v" }`) and as an attribute (`meta = { "a.b" = "v" }`, for
// keys that are not identifiers).
func (p *parser) stringMap(attrs hcl.Attributes, blocks map[string]hcl.Blocks, name string) map[string]string {
	attr, block := attrs[name], first(blocks, name)
	switch {
	case attr != nil && block != nil:
		p.errorf(block.DefRange, fmt.Sprintf("Duplicate %s block", name),
			"%s is already defined as an attribute at %s; use one form.", name, posString(attr.NameRange))
		return nil
	case attr != nil:
		return p.stringMapAttr(attr)
	case block != nil:
		return p.stringMapBlock(block)
	}
	return nil
}

var fileBlocks = []blockKind{
	{name: "job", labels: []string{"name"}, many: true},
	{name: "variable", labels: []string{"name"}, many: true, unique: true},
	{name: "locals", many: true},
}

func (p *parser) file(body *hclsyntax.Body) *structs.Job {
	_, blocks := p.content(body, nil, fileBlocks)

	// Variables and locals first: the job's expressions refer to them,
	// and so do the for_each of its dynamic blocks.
	p.funcs = p.functions()
	p.ctx = &hcl.EvalContext{Variables: map[string]cty.Value{}, Functions: p.funcs}
	p.declare(blocks["variable"])
	p.assign()
	p.validateVars()
	p.buildContext()
	p.locals(blocks["locals"])
	p.buildLocals()

	jobs := blocks["job"]
	if len(jobs) == 0 {
		if !p.diags.HasErrors() {
			start := hcl.Range{Filename: p.filename, Start: hcl.InitialPos, End: hcl.InitialPos}
			p.errorf(start, "Missing job block", `A job file must define one job, as in job "example" { … }.`)
		}
		return &structs.Job{}
	}
	if len(jobs) > 1 {
		p.errorf(jobs[1].DefRange, "Duplicate job block",
			"A job file defines exactly one job; another was defined at %s.", posString(jobs[0].DefRange))
	}
	jb := *jobs[0]
	jb.Body = dynblock.Expand(jb.Body, p.ctx, dynblock.OptCheckForEach(p.checkForEach))
	return p.job(&jb)
}

var (
	jobAttrs = []string{
		"name", "type", "datacenters", "node_pool", "priority", "namespace", "region", "all_at_once", "meta",
		"vault_token", "consul_token",
	}
	jobBlocks = []blockKind{
		{name: "meta"},
		{name: "constraint", many: true},
		{name: "affinity", many: true},
		{name: "spread", many: true},
		{name: "update"},
		{name: "migrate"},
		{name: "reschedule"},
		{name: "ui"},
		{name: "periodic"},
		{name: "parameterized"},
		{name: "group", labels: []string{"name"}, many: true, unique: true},
		// A task written directly in the job is a group of its own.
		{name: "task", labels: []string{"name"}, many: true, unique: true},
		{name: "vault"},
		{name: "multiregion"},
	}
)

func (p *parser) job(b *hcl.Block) *structs.Job {
	job := &structs.Job{ID: b.Labels[0]}
	p.blockAt[""] = b.DefRange
	attrs, blocks := p.content(b.Body, jobAttrs, jobBlocks)
	for n, dst := range map[string]*string{"consul_token": &job.ConsulToken, "vault_token": &job.VaultToken} {
		if a := attrs[n]; a != nil && p.setString(a, dst) {
			p.noteBlock(n, a.NameRange)
		}
	}
	if mb := first(blocks, "multiregion"); mb != nil {
		job.Multiregion = p.multiregion(mb)
		p.noteBlock("multiregion", mb.DefRange)
	}
	// A job's vault block is that of each of its tasks that has none.
	var jobVault *vaultAt
	if vb := first(blocks, "vault"); vb != nil {
		jobVault = &vaultAt{p.vault(vb), vb.DefRange}
	}
	p.setString(attrs["name"], &job.Name)
	p.jobName = job.Name
	if p.jobName == "" {
		p.jobName = job.ID
	}
	p.setString(attrs["type"], &job.Type)
	p.setStrings(attrs["datacenters"], &job.Datacenters)
	p.setString(attrs["node_pool"], &job.NodePool)
	p.setInt(attrs["priority"], &job.Priority)
	p.setString(attrs["namespace"], &job.Namespace)
	p.setString(attrs["region"], &job.Region)
	p.setBool(attrs["all_at_once"], &job.AllAtOnce)
	job.Meta = p.stringMap(attrs, blocks, "meta")

	job.Constraints = p.constraints(blocks["constraint"])
	job.Affinities = p.affinities(blocks["affinity"])
	job.Spreads = p.spreads(blocks["spread"])
	if ub := first(blocks, "update"); ub != nil {
		job.Update = p.update(ub, nil)
	}
	if pb := first(blocks, "periodic"); pb != nil {
		job.Periodic = p.periodic(pb)
	}
	if pb := first(blocks, "parameterized"); pb != nil {
		job.ParameterizedJob = p.parameterized(pb)
	}
	if ub := first(blocks, "ui"); ub != nil {
		job.UI = p.ui(ub)
	}

	// The type's declaration, when the caller knows it, holds the defaults
	// (restart, reschedule) onto which a group's blocks are laid, as Nomad
	// merges them.
	jobType := job.Type
	if jobType == "" {
		jobType = structs.DefaultJobType
	}
	behavior := p.opts.behavior(jobType)
	job.TypeBehavior = behavior
	// A job-level update block is the base of every group's, so schedulers
	// read one place (the group). A type refusing update blocks has the
	// job-level refusal; copying would only repeat it for every group.
	var groupUpdate *structs.UpdateStrategy
	if !behavior.Refuses(structs.BlockUpdate) {
		groupUpdate = job.Update
	}
	// A job-level migrate block, as in Nomad, is the base of every
	// group's: a group's own block sets only what it names over it.
	var jobMigrate *structs.MigrateStrategy
	if mb := first(blocks, "migrate"); mb != nil {
		jobMigrate = p.migrate(mb, nil)
	}
	// So is a job-level reschedule block, laid over the type's default.
	var jobReschedule *structs.ReschedulePolicy
	if rb := first(blocks, "reschedule"); rb != nil {
		jobReschedule = p.reschedule(rb, defaultReschedule(behavior))
	}
	// A task written directly in the job is, as in Nomad, a group of its
	// own named after it, before the job's groups.
	for _, tb := range blocks["task"] {
		job.TaskGroups = append(job.TaskGroups, p.loneTask(tb, behavior, groupUpdate, jobMigrate, jobReschedule, jobVault))
	}
	for _, gb := range blocks["group"] {
		job.TaskGroups = append(job.TaskGroups, p.group(gb, behavior, groupUpdate, jobMigrate, jobReschedule, jobVault))
	}
	return job
}

// loneTask is the group of a task written directly in the job: named
// after the task, of count 1, with the job's update, migrate, reschedule
// and vault blocks as a group without its own would have them.
func (p *parser) loneTask(b *hcl.Block, behavior *structs.JobTypeBehavior, jobUpdate *structs.UpdateStrategy, jobMigrate *structs.MigrateStrategy, jobReschedule *structs.ReschedulePolicy, jobVault *vaultAt) *structs.TaskGroup {
	tg := &structs.TaskGroup{Name: b.Labels[0], Count: 1}
	p.blockAt[fmt.Sprintf("group %q", tg.Name)] = b.DefRange
	if jobUpdate != nil {
		u := *jobUpdate
		tg.Update = &u
	}
	if jobMigrate != nil {
		m := *jobMigrate
		tg.Migrate = &m
	}
	if jobReschedule != nil {
		r := *jobReschedule
		tg.ReschedulePolicy = &r
	}
	p.blockAt[fmt.Sprintf("group %q: task %q", tg.Name, tg.Name)] = b.DefRange
	tg.Tasks = []*structs.Task{p.task(b, tg.Name, defaultRestart(behavior), jobVault)}
	return tg
}

var (
	groupAttrs = []string{
		"count", "meta", "max_run_duration", "shutdown_delay",
		"max_client_disconnect", "stop_after_client_disconnect", "prevent_reschedule_on_lost",
	}
	// Blocks of Nomad's group that drover does not model (network, service,
	// scaling, …) are refused by name rather than ignored, so a job
	// never silently loses part of its meaning.
	groupBlocks = []blockKind{
		{name: "meta"},
		{name: "constraint", many: true},
		{name: "affinity", many: true},
		{name: "spread", many: true},
		{name: "update"},
		{name: "restart"},
		{name: "reschedule"},
		{name: "migrate"},
		{name: "ephemeral_disk"},
		{name: "task", labels: []string{"name"}, many: true, unique: true},
		{name: "volume", labels: []string{"name"}, many: true, unique: true},
		{name: "network"},
		{name: "service", many: true},
		{name: "disconnect"},
		{name: "scaling"},
		{name: "vault"},
		{name: "consul"},
	}
)

// group parses a group block of a job whose type declares behavior (nil:
// unknown), whose update block is jobUpdate (nil: none, or not copied) and
// whose migrate and reschedule blocks are jobMigrate and jobReschedule
// (nil: none), and whose vault block is jobVault (nil: none).
func (p *parser) group(b *hcl.Block, behavior *structs.JobTypeBehavior, jobUpdate *structs.UpdateStrategy, jobMigrate *structs.MigrateStrategy, jobReschedule *structs.ReschedulePolicy, jobVault *vaultAt) *structs.TaskGroup {
	// Count defaults to 1 when absent; an explicit 0 is kept.
	tg := &structs.TaskGroup{Name: b.Labels[0], Count: 1}
	p.blockAt[fmt.Sprintf("group %q", tg.Name)] = b.DefRange
	attrs, blocks := p.content(b.Body, groupAttrs, groupBlocks)
	if cb := first(blocks, "consul"); cb != nil {
		tg.Consul = p.consul(cb)
		p.noteBlock(fmt.Sprintf("group %q: consul", tg.Name), cb.DefRange)
	}
	// A group's vault block, as Nomad's parser does, is that of each of
	// its tasks that has none (over the job's).
	groupVault := jobVault
	if vb := first(blocks, "vault"); vb != nil {
		groupVault = &vaultAt{p.vault(vb), vb.DefRange}
	}

	p.setInt(attrs["count"], &tg.Count)
	p.setDurationPtr(attrs["max_run_duration"], &tg.MaxRunDuration)
	p.setDurationPtr(attrs["shutdown_delay"], &tg.ShutdownDelay)
	tg.Meta = p.stringMap(attrs, blocks, "meta")

	tg.Constraints = p.constraints(blocks["constraint"])
	tg.Affinities = p.affinities(blocks["affinity"])
	tg.Spreads = p.spreads(blocks["spread"])
	if ub := first(blocks, "update"); ub != nil {
		tg.Update = p.update(ub, jobUpdate)
	} else if jobUpdate != nil {
		u := *jobUpdate
		tg.Update = &u
	}
	if rb := first(blocks, "restart"); rb != nil {
		tg.RestartPolicy = p.restart(rb, defaultRestart(behavior))
	}
	switch rb := first(blocks, "reschedule"); {
	case rb != nil && jobReschedule != nil:
		tg.ReschedulePolicy = p.reschedule(rb, *jobReschedule)
	case rb != nil:
		tg.ReschedulePolicy = p.reschedule(rb, defaultReschedule(behavior))
	case jobReschedule != nil:
		r := *jobReschedule
		tg.ReschedulePolicy = &r
	}
	if mb := first(blocks, "migrate"); mb != nil {
		tg.Migrate = p.migrate(mb, jobMigrate)
	} else if jobMigrate != nil {
		m := *jobMigrate
		tg.Migrate = &m
	}
	if eb := first(blocks, "ephemeral_disk"); eb != nil {
		tg.EphemeralDisk = p.ephemeralDisk(eb)
	}
	p.groupDisconnect(tg, attrs, first(blocks, "disconnect"))
	if sb := first(blocks, "scaling"); sb != nil {
		p.scaling(tg, sb, attrs["count"])
	}

	// A task's restart block is laid over its group's policy, which is
	// the type's default when the group sets none.
	groupRestart := defaultRestart(behavior)
	if tg.RestartPolicy != nil {
		groupRestart = *tg.RestartPolicy
	}
	tg.Volumes = p.volumes(blocks["volume"])
	tg.Networks = p.network(first(blocks, "network"))
	tg.Services = p.services(blocks["service"], tg.Name, "")
	for _, tb := range blocks["task"] {
		p.blockAt[fmt.Sprintf("group %q: task %q", tg.Name, tb.Labels[0])] = tb.DefRange
		tg.Tasks = append(tg.Tasks, p.task(tb, tg.Name, groupRestart, groupVault))
	}
	return tg
}

var (
	taskAttrs = []string{
		"driver", "user", "kill_timeout", "kill_signal", "leader", "meta", "env", "kind", "shutdown_delay",
	}
	taskBlocks = []blockKind{
		{name: "config"},
		{name: "env"},
		{name: "meta"},
		{name: "resources"},
		{name: "restart"},
		{name: "dispatch_payload"},
		{name: "lifecycle"},
		{name: "logs"},
		{name: "constraint", many: true},
		{name: "affinity", many: true},
		{name: "volume_mount", many: true},
		{name: "csi_plugin"},
		{name: "artifact", many: true},
		{name: "template", many: true},
		{name: "service", many: true},
		{name: "action", labels: []string{"name"}, many: true, unique: true},
		{name: "scaling", labels: []string{"name"}, many: true},
		{name: "schedule"},
		{name: "secret", labels: []string{"name"}, many: true},
		{name: "vault"},
		{name: "consul"},
		{name: "identity", many: true},
	}
)

// vaultAt is a group's or job's vault block and its position.
type vaultAt struct {
	v   *structs.Vault
	rng hcl.Range
}

// task parses a task of group; groupRestart is the group's restart
// policy and groupVault its vault block (nil: none).
func (p *parser) task(b *hcl.Block, group string, groupRestart structs.RestartPolicy, groupVault *vaultAt) *structs.Task {
	t := &structs.Task{Name: b.Labels[0]}
	key := fmt.Sprintf("group %q: task %q", group, t.Name)
	p.taskKey = key
	attrs, blocks := p.content(b.Body, taskAttrs, taskBlocks)
	p.refuseTaskBlocks(blocks)
	if vb := first(blocks, "vault"); vb != nil {
		t.Vault = p.vault(vb)
		p.noteBlock(key+": vault", vb.DefRange)
	} else if groupVault != nil {
		v := *groupVault.v
		v.Policies = append([]string(nil), v.Policies...)
		t.Vault = &v
		p.noteBlock(key+": vault", groupVault.rng)
	}
	if cb := first(blocks, "consul"); cb != nil {
		t.Consul = p.consul(cb)
		p.noteBlock(key+": consul", cb.DefRange)
	}
	if ids := blocks["identity"]; len(ids) > 0 {
		t.Identity, t.Identities = p.identities(ids, key)
	}

	p.setString(attrs["driver"], &t.Driver)
	p.setString(attrs["user"], &t.User)
	p.setDuration(attrs["kill_timeout"], &t.KillTimeout)
	p.setString(attrs["kill_signal"], &t.KillSignal)
	p.setBool(attrs["leader"], &t.Leader)
	p.taskKind(attrs["kind"], &t.Kind)
	if a := attrs["kind"]; a != nil {
		p.noteBlock(key+": kind", a.NameRange)
	}
	p.setDuration(attrs["shutdown_delay"], &t.ShutdownDelay)
	t.Meta = p.stringMap(attrs, blocks, "meta")
	t.Env = p.stringMap(attrs, blocks, "env")

	if cb := first(blocks, "config"); cb != nil {
		t.Config = p.configBody(cb.Body)
	}
	if rb := first(blocks, "resources"); rb != nil {
		t.Resources = p.resources(rb)
	}
	if rb := first(blocks, "restart"); rb != nil {
		t.RestartPolicy = p.restart(rb, groupRestart)
	}
	if db := first(blocks, "dispatch_payload"); db != nil {
		t.DispatchPayload = p.dispatchPayload(db)
	}
	if lb := first(blocks, "lifecycle"); lb != nil {
		t.Lifecycle = p.lifecycle(lb)
	}
	if lb := first(blocks, "logs"); lb != nil {
		t.LogConfig = p.logs(lb)
	}
	t.Constraints = p.constraints(blocks["constraint"])
	t.Affinities = p.affinities(blocks["affinity"])
	t.VolumeMounts = p.volumeMounts(blocks["volume_mount"])
	if cb := first(blocks, "csi_plugin"); cb != nil {
		t.CSIPluginConfig = p.csiPlugin(cb)
	}
	t.Artifacts = p.artifacts(blocks["artifact"])
	t.Templates = p.templates(blocks["template"])
	t.Services = p.services(blocks["service"], group, t.Name)
	t.Actions = p.actions(blocks["action"])
	t.ScalingPolicies = p.taskScaling(blocks["scaling"])
	return t
}
