package jobspec

import (
	"math"
	"sort"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/drover-org/drover/core/structs"
)

// Operator shorthands: `version = ">= 1.2"` means operator "version" with
// that value, and so on.
var operatorShorthands = []string{
	"version", "semver", "regexp", "set_contains", "set_contains_any", "set_contains_all",
}

var constraintAttrs = append([]string{
	"attribute", "operator", "value", "distinct_hosts", "distinct_property",
}, operatorShorthands...)

func (p *parser) constraints(blocks hcl.Blocks) []*structs.Constraint {
	var out []*structs.Constraint
	for _, b := range blocks {
		attrs, _ := p.content(b.Body, constraintAttrs, nil)
		c := &structs.Constraint{}
		p.setString(attrs["attribute"], &c.LTarget)
		p.setString(attrs["value"], &c.RTarget)
		p.setString(attrs["operator"], &c.Operand)

		var distinct bool
		if p.setBool(attrs["distinct_hosts"], &distinct) && !distinct {
			// distinct_hosts = false asks for nothing; forget it so it does
			// not conflict with a real operator.
			delete(attrs, "distinct_hosts")
		}
		if op, attr := p.shorthand(attrs, append([]string{"distinct_hosts", "distinct_property"}, operatorShorthands...)); attr != nil {
			c.Operand = op
			switch op {
			case "distinct_hosts":
			case "distinct_property":
				if p.exclusive(attr, attrs["attribute"]) {
					p.setString(attr, &c.LTarget)
				}
			default:
				if p.exclusive(attr, attrs["value"]) {
					p.setString(attr, &c.RTarget)
				}
			}
		}
		if c.Operand == "" {
			c.Operand = "="
		}
		out = append(out, c)
	}
	return out
}

// shorthand finds which operator shorthand of names the block uses. Setting
// two, or one together with `operator`, is refused: Nomad would let the
// last one win silently.
func (p *parser) shorthand(attrs hcl.Attributes, names []string) (string, *hcl.Attribute) {
	var set []*hcl.Attribute
	for _, n := range names {
		if a := attrs[n]; a != nil {
			set = append(set, a)
		}
	}
	if len(set) == 0 {
		return "", nil
	}
	if op := attrs["operator"]; op != nil {
		set = append(set, op)
	}
	sort.Slice(set, func(i, j int) bool { return set[i].Range.Start.Byte < set[j].Range.Start.Byte })
	if len(set) > 1 {
		p.errorf(set[1].NameRange, "Conflicting operator",
			"%q and %q both set the operator (%s); keep one.", set[0].Name, set[1].Name, posString(set[0].NameRange))
		return "", nil
	}
	return set[0].Name, set[0]
}

// exclusive refuses a shorthand that would overwrite a target set
// explicitly in the same block.
func (p *parser) exclusive(shorthand, explicit *hcl.Attribute) bool {
	if explicit == nil {
		return true
	}
	p.errorf(shorthand.NameRange, "Conflicting attributes",
		"%q sets the same target as %q at %s; keep one.", shorthand.Name, explicit.Name, posString(explicit.NameRange))
	return false
}

var affinityAttrs = append([]string{"attribute", "operator", "value", "weight"}, operatorShorthands...)

// affinityDefaultWeight is Nomad's weight for an affinity that names none.
const affinityDefaultWeight = 50

func (p *parser) affinities(blocks hcl.Blocks) []*structs.Affinity {
	var out []*structs.Affinity
	for _, b := range blocks {
		attrs, _ := p.content(b.Body, affinityAttrs, nil)
		a := &structs.Affinity{Weight: affinityDefaultWeight}
		p.setString(attrs["attribute"], &a.LTarget)
		p.setString(attrs["value"], &a.RTarget)
		p.setString(attrs["operator"], &a.Operand)
		p.setIntRange(attrs["weight"], -100, 100, func(i int64) { a.Weight = int8(i) })
		if op, attr := p.shorthand(attrs, operatorShorthands); attr != nil {
			a.Operand = op
			if p.exclusive(attr, attrs["value"]) {
				p.setString(attr, &a.RTarget)
			}
		}
		if a.Operand == "" {
			a.Operand = "="
		}
		out = append(out, a)
	}
	return out
}

var (
	spreadAttrs  = []string{"attribute", "weight"}
	spreadBlocks = []blockKind{{name: "target", labels: []string{"value"}, many: true, unique: true}}
)

func (p *parser) spreads(blocks hcl.Blocks) []*structs.Spread {
	var out []*structs.Spread
	for _, b := range blocks {
		attrs, inner := p.content(b.Body, spreadAttrs, spreadBlocks)
		s := &structs.Spread{Weight: structs.DefaultSpreadWeight}
		p.setString(attrs["attribute"], &s.Attribute)
		p.setIntRange(attrs["weight"], 0, 100, func(i int64) { s.Weight = int8(i) })
		for _, tb := range inner["target"] {
			tattrs, _ := p.content(tb.Body, []string{"percent"}, nil)
			t := &structs.SpreadTarget{Value: tb.Labels[0]}
			p.setIntRange(tattrs["percent"], 0, 100, func(i int64) { t.Percent = uint8(i) })
			s.SpreadTarget = append(s.SpreadTarget, t)
		}
		out = append(out, s)
	}
	return out
}

var updateAttrs = []string{
	"max_parallel", "stagger", "health_check", "min_healthy_time", "healthy_deadline",
	"progress_deadline", "auto_revert", "auto_promote", "canary",
}

// update decodes an update block laid over base (the job's block, for a
// group), so a group inherits what it does not override; without a base,
// over Nomad's defaults (structs.DefaultUpdateStrategy), as Nomad fills
// what a block leaves unset.
func (p *parser) update(b *hcl.Block, base *structs.UpdateStrategy) *structs.UpdateStrategy {
	u := structs.DefaultUpdateStrategy()
	if base != nil {
		*u = *base
	}
	attrs, _ := p.content(b.Body, updateAttrs, nil)
	p.setInt(attrs["max_parallel"], &u.MaxParallel)
	p.setDuration(attrs["stagger"], &u.Stagger)
	p.setString(attrs["health_check"], &u.HealthCheck)
	p.setDuration(attrs["min_healthy_time"], &u.MinHealthyTime)
	p.setDuration(attrs["healthy_deadline"], &u.HealthyDeadline)
	p.setDuration(attrs["progress_deadline"], &u.ProgressDeadline)
	p.setBool(attrs["auto_revert"], &u.AutoRevert)
	p.setBool(attrs["auto_promote"], &u.AutoPromote)
	p.setInt(attrs["canary"], &u.Canary)
	return u
}

var periodicAttrs = []string{"cron", "crons", "prohibit_overlap", "time_zone", "enabled"}

func (p *parser) periodic(b *hcl.Block) *structs.PeriodicConfig {
	// Enabled defaults to true: writing a periodic block means "run it".
	pc := &structs.PeriodicConfig{Enabled: true, SpecType: structs.PeriodicSpecCron}
	attrs, _ := p.content(b.Body, periodicAttrs, nil)
	p.setString(attrs["cron"], &pc.Spec)
	p.setStrings(attrs["crons"], &pc.Specs)
	p.setBool(attrs["prohibit_overlap"], &pc.ProhibitOverlap)
	p.setString(attrs["time_zone"], &pc.TimeZone)
	p.setBool(attrs["enabled"], &pc.Enabled)
	if attrs["cron"] != nil && attrs["crons"] != nil {
		p.errorf(attrs["crons"].NameRange, "Conflicting attributes",
			"Set cron or crons, not both (cron is set at %s).", posString(attrs["cron"].NameRange))
	}
	check := func(a *hcl.Attribute, specs ...string) {
		for _, spec := range specs {
			if _, err := structs.ParseCron(spec); err != nil {
				p.errorf(a.Expr.Range(), "Invalid cron expression", "%q: %v.", spec, err)
			}
		}
	}
	if a := attrs["cron"]; a != nil && pc.Spec != "" {
		check(a, pc.Spec)
	}
	if a := attrs["crons"]; a != nil {
		check(a, pc.Specs...)
	}
	if a := attrs["time_zone"]; a != nil && pc.TimeZone != "" {
		if _, err := time.LoadLocation(pc.TimeZone); err != nil {
			p.errorf(a.Expr.Range(), "Invalid time zone", "%q is not a known time zone: %v.", pc.TimeZone, err)
		}
	}
	return pc
}

var parameterizedAttrs = []string{"payload", "meta_required", "meta_optional"}

func (p *parser) parameterized(b *hcl.Block) *structs.ParameterizedJobConfig {
	pc := &structs.ParameterizedJobConfig{}
	attrs, _ := p.content(b.Body, parameterizedAttrs, nil)
	if p.setString(attrs["payload"], &pc.Payload) {
		switch pc.Payload {
		case structs.DispatchPayloadOptional, structs.DispatchPayloadRequired, structs.DispatchPayloadForbidden:
		default:
			p.errorf(attrs["payload"].Expr.Range(), "Invalid payload mode",
				"payload must be %q, %q or %q, got %q.", structs.DispatchPayloadOptional,
				structs.DispatchPayloadRequired, structs.DispatchPayloadForbidden, pc.Payload)
		}
	}
	p.setStrings(attrs["meta_required"], &pc.MetaRequired)
	p.setStrings(attrs["meta_optional"], &pc.MetaOptional)
	return pc
}

var restartAttrs = []string{"attempts", "interval", "delay", "mode", "render_templates"}

// defaultRestart is the base of a group's restart block: what the job's
// type declares, or zero values when the type is unknown.
func defaultRestart(b *structs.JobTypeBehavior) structs.RestartPolicy {
	if b == nil || b.DefaultRestart == nil {
		return structs.RestartPolicy{}
	}
	return *b.DefaultRestart
}

// restart lays a restart block over base: the job type's defaults for a
// group, the group's policy for a task.
func (p *parser) restart(b *hcl.Block, base structs.RestartPolicy) *structs.RestartPolicy {
	rp := &base
	attrs, _ := p.content(b.Body, restartAttrs, nil)
	p.setInt(attrs["attempts"], &rp.Attempts)
	p.setDuration(attrs["interval"], &rp.Interval)
	p.setDuration(attrs["delay"], &rp.Delay)
	p.setString(attrs["mode"], &rp.Mode)
	p.setBool(attrs["render_templates"], &rp.RenderTemplates)
	return rp
}

var rescheduleAttrs = []string{"attempts", "interval", "delay", "delay_function", "max_delay", "unlimited"}

// defaultReschedule is the base of a group's reschedule block: what the
// job's type declares, or zero values when the type is unknown or declares
// none (a type refusing reschedule blocks has the block refused by
// validation, not dropped here).
func defaultReschedule(b *structs.JobTypeBehavior) structs.ReschedulePolicy {
	if b == nil || b.DefaultReschedule == nil {
		return structs.ReschedulePolicy{}
	}
	return *b.DefaultReschedule
}

// reschedule lays a reschedule block over base.
func (p *parser) reschedule(b *hcl.Block, base structs.ReschedulePolicy) *structs.ReschedulePolicy {
	rp := &base
	attrs, _ := p.content(b.Body, rescheduleAttrs, nil)
	p.setInt(attrs["attempts"], &rp.Attempts)
	p.setDuration(attrs["interval"], &rp.Interval)
	p.setDuration(attrs["delay"], &rp.Delay)
	p.setString(attrs["delay_function"], &rp.DelayFunction)
	p.setDuration(attrs["max_delay"], &rp.MaxDelay)
	p.setBool(attrs["unlimited"], &rp.Unlimited)
	return rp
}

var migrateAttrs = []string{"max_parallel", "health_check", "min_healthy_time", "healthy_deadline"}

// migrate parses a migrate block laid over base (the job's block for a
// group's; nil: none).
func (p *parser) migrate(b *hcl.Block, base *structs.MigrateStrategy) *structs.MigrateStrategy {
	m := &structs.MigrateStrategy{}
	if base != nil {
		*m = *base
	}
	attrs, _ := p.content(b.Body, migrateAttrs, nil)
	p.setInt(attrs["max_parallel"], &m.MaxParallel)
	p.setString(attrs["health_check"], &m.HealthCheck)
	p.setDuration(attrs["min_healthy_time"], &m.MinHealthyTime)
	p.setDuration(attrs["healthy_deadline"], &m.HealthyDeadline)
	return m
}

// ephemeralDiskDefaultMB is the size of a disk block that names none.
const ephemeralDiskDefaultMB = 300

func (p *parser) ephemeralDisk(b *hcl.Block) *structs.EphemeralDisk {
	d := &structs.EphemeralDisk{SizeMB: ephemeralDiskDefaultMB}
	attrs, _ := p.content(b.Body, []string{"size", "sticky", "migrate"}, nil)
	p.setInt(attrs["size"], &d.SizeMB)
	p.setBool(attrs["sticky"], &d.Sticky)
	p.setBool(attrs["migrate"], &d.Migrate)
	return d
}

var (
	resourceAttrs  = []string{"cpu", "cores", "memory", "memory_max", "disk", "iops", "secrets"}
	resourceBlocks = []blockKind{
		{name: "device", labels: []string{"name"}, many: true, unique: true}, {name: "numa"}, {name: "network", many: true},
	}
)

func (p *parser) resources(b *hcl.Block) *structs.Resources {
	r := &structs.Resources{}
	attrs, blocks := p.content(b.Body, resourceAttrs, resourceBlocks)
	p.setInt(attrs["cpu"], &r.CPU)
	p.setInt(attrs["cores"], &r.Cores)
	p.setInt(attrs["memory"], &r.MemoryMB)
	p.setInt(attrs["memory_max"], &r.MemoryMaxMB)
	p.setInt(attrs["disk"], &r.DiskMB)
	p.setInt(attrs["iops"], &r.IOPS)
	p.setIntRange(attrs["secrets"], 0, structs.MaxSecretsMB, func(i int64) { r.SecretsMB = int(i) })
	for _, nb := range blocks["network"] {
		p.errorf(nb.DefRange, "Unsupported block type",
			"A network block inside resources is Nomad's deprecated task-level network, which drover does not support: write it in the group.")
	}
	r.Devices = p.devices(blocks["device"])
	if nb := first(blocks, "numa"); nb != nil {
		r.NUMA = p.numa(nb)
	}
	return r
}

func (p *parser) dispatchPayload(b *hcl.Block) *structs.DispatchPayloadConfig {
	d := &structs.DispatchPayloadConfig{}
	attrs, _ := p.content(b.Body, []string{"file"}, nil)
	p.setString(attrs["file"], &d.File)
	return d
}

// lifecycleHooks are the hooks Nomad knows; validation in structs does not
// check them, so the parser does, where it can point at the value.
var lifecycleHooks = map[string]bool{"prestart": true, "poststart": true, "poststop": true}

func (p *parser) lifecycle(b *hcl.Block) *structs.TaskLifecycleConfig {
	l := &structs.TaskLifecycleConfig{}
	attrs, _ := p.content(b.Body, []string{"hook", "sidecar"}, nil)
	if p.setString(attrs["hook"], &l.Hook) && !lifecycleHooks[l.Hook] {
		p.errorf(attrs["hook"].Expr.Range(), "Invalid lifecycle hook",
			"hook must be \"prestart\", \"poststart\" or \"poststop\", got %q.", l.Hook)
	} else if attrs["hook"] == nil {
		p.errorf(b.DefRange, "Missing required argument", "A lifecycle block needs a hook.")
	}
	p.setBool(attrs["sidecar"], &l.Sidecar)
	return l
}

func (p *parser) logs(b *hcl.Block) *structs.LogConfig {
	// Unset fields keep Nomad's defaults rather than becoming zero.
	l := &structs.LogConfig{MaxFiles: 10, MaxFileSizeMB: 10}
	attrs, _ := p.content(b.Body, []string{"max_files", "max_file_size", "disabled", "enabled"}, nil)
	p.setIntRange(attrs["max_files"], 1, math.MaxInt32, func(i int64) { l.MaxFiles = int(i) })
	p.setIntRange(attrs["max_file_size"], 1, math.MaxInt32, func(i int64) { l.MaxFileSizeMB = int(i) })
	p.setBool(attrs["disabled"], &l.Disabled)
	// enabled is the deprecated inverse of disabled.
	if a := attrs["enabled"]; a != nil {
		var enabled bool
		if attrs["disabled"] != nil {
			p.errorf(a.NameRange, "Conflicting attributes",
				"Set disabled or its deprecated inverse enabled, not both (disabled is set at %s).", posString(attrs["disabled"].NameRange))
		} else if p.setBool(a, &enabled) {
			l.Disabled = !enabled
		}
	}
	return l
}
