package jobspec

import (
	"fmt"
	"math"
	"sort"

	"github.com/hashicorp/hcl/v2"

	"github.com/drover-org/drover/core/structs"
)

// The blocks of Nomad 1.6 and later that drover keeps as data (a job's
// ui, a task's kind and actions, a group's scaling policy) and those it
// parses as Nomad does but cannot honour (devices, NUMA placement, the
// disconnect blocks): structs' validation refuses those at registration,
// and Check places the refusal at the block.

var (
	uiAttrs  = []string{"description"}
	uiBlocks = []blockKind{{name: "link", many: true}}
)

func (p *parser) ui(b *hcl.Block) *structs.JobUIConfig {
	u := &structs.JobUIConfig{}
	attrs, blocks := p.content(b.Body, uiAttrs, uiBlocks)
	if p.setString(attrs["description"], &u.Description) && len(u.Description) > structs.MaxUIDescriptionBytes {
		p.errorf(attrs["description"].Expr.Range(), "Value too long",
			"description is %d bytes; exceeds limit of %d.", len(u.Description), structs.MaxUIDescriptionBytes)
	}
	links := blocks["link"]
	if len(links) > structs.MaxUILinks {
		p.errorf(links[structs.MaxUILinks].DefRange, "Too many links",
			"A ui block may have at most %d links; this one has %d.", structs.MaxUILinks, len(links))
		return u
	}
	for _, lb := range links {
		la, _ := p.content(lb.Body, []string{"label", "url"}, nil)
		l := &structs.JobUILink{}
		for n, dst := range map[string]*string{"label": &l.Label, "url": &l.URL} {
			if a := la[n]; a != nil && p.setString(a, dst) && len(*dst) > structs.MaxUILinkBytes {
				p.errorf(a.Expr.Range(), "Value too long", "%s is %d bytes; exceeds limit of %d.", n, len(*dst), structs.MaxUILinkBytes)
			}
		}
		u.Links = append(u.Links, l)
	}
	return u
}

// groupDisconnect parses a group's disconnect attributes and block into
// tg; validation refuses what drover cannot honour at registration.
func (p *parser) groupDisconnect(tg *structs.TaskGroup, attrs hcl.Attributes, b *hcl.Block) {
	gkey := fmt.Sprintf("group %q", tg.Name)
	for _, n := range []string{"max_client_disconnect", "stop_after_client_disconnect", "prevent_reschedule_on_lost"} {
		if a := attrs[n]; a != nil {
			p.noteBlock(gkey+": "+n, a.NameRange)
		}
	}
	p.setDurationPtr(attrs["max_client_disconnect"], &tg.MaxClientDisconnect)
	p.setDurationPtr(attrs["stop_after_client_disconnect"], &tg.StopAfterClientDisconnect)
	p.setBool(attrs["prevent_reschedule_on_lost"], &tg.PreventRescheduleOnLost)
	if b == nil {
		return
	}
	d := &structs.DisconnectStrategy{}
	p.noteBlock(gkey+": disconnect", b.DefRange)
	da, _ := p.content(b.Body, []string{"lost_after", "stop_on_client_after", "replace", "reconcile"}, nil)
	if a := da["lost_after"]; a != nil && p.setDuration(a, &d.LostAfter) {
		if d.LostAfter < 0 {
			p.errorf(a.Expr.Range(), "Invalid duration", "lost_after must not be negative.")
		}
		if mcd := attrs["max_client_disconnect"]; mcd != nil {
			p.errorf(a.NameRange, "Conflicting attributes",
				"Set lost_after or the group's max_client_disconnect (its deprecated form, at %s), not both.", posString(mcd.NameRange))
		}
	}
	p.setDurationPtr(da["stop_on_client_after"], &d.StopOnClientAfter)
	var replace bool
	if a := da["replace"]; a != nil && p.setBool(a, &replace) {
		d.Replace = &replace
	}
	if a := da["reconcile"]; a != nil && p.setString(a, &d.Reconcile) {
		switch d.Reconcile {
		case structs.ReconcileBestScore, structs.ReconcileKeepOriginal, structs.ReconcileKeepReplacement, structs.ReconcileLongestRunning:
		default:
			p.errorf(a.Expr.Range(), "Invalid reconcile option", "reconcile must be %q, %q, %q or %q, got %q.",
				structs.ReconcileBestScore, structs.ReconcileKeepOriginal, structs.ReconcileKeepReplacement, structs.ReconcileLongestRunning, d.Reconcile)
		}
	}
	tg.Disconnect = d
}

var (
	scalingAttrs  = []string{"min", "max", "enabled", "type"}
	scalingBlocks = []blockKind{{name: "policy"}}
)

// scaling parses a group's scaling block. countAttr is the group's count
// attribute (nil: absent), to which the policy's bounds are held: an
// absent count takes min, as in Nomad, and an absent min takes the count.
func (p *parser) scaling(tg *structs.TaskGroup, b *hcl.Block, countAttr *hcl.Attribute) {
	s := &structs.ScalingPolicy{Enabled: true, Type: structs.ScalingPolicyTypeHorizontal}
	attrs, blocks := p.content(b.Body, scalingAttrs, scalingBlocks)
	p.setBool(attrs["enabled"], &s.Enabled)
	if a := attrs["type"]; a != nil && p.setString(a, &s.Type) && s.Type != structs.ScalingPolicyTypeHorizontal {
		p.errorf(a.Expr.Range(), "Invalid scaling type",
			"A group's scaling block is of type %q, got %q (other types scale a task's resources, which needs Nomad Enterprise's dynamic application sizing).",
			structs.ScalingPolicyTypeHorizontal, s.Type)
	}
	okMin := p.setIntRange(attrs["min"], 0, math.MaxInt32, func(i int64) { s.Min = i })
	okMax := p.setIntRange(attrs["max"], 0, math.MaxInt32, func(i int64) { s.Max = i })
	if attrs["max"] == nil {
		p.errorf(b.DefRange, "Missing required argument", "A scaling block needs max, the largest count the group may be scaled to.")
	}
	if pb := first(blocks, "policy"); pb != nil {
		s.Policy = p.policyBody(pb.Body, 1)
	}
	minAttr, maxAttr := attrs["min"], attrs["max"]
	switch {
	case countAttr == nil && okMin:
		tg.Count = int(s.Min)
	case minAttr == nil:
		s.Min = int64(tg.Count)
		okMin = true
	}
	if !okMin || !okMax {
		tg.Scaling = s
		return
	}
	c := int64(tg.Count)
	switch {
	case minAttr != nil && s.Min > s.Max:
		p.errorf(minAttr.Expr.Range(), "Invalid scaling bounds", "min (%d) must not be greater than max (%d).", s.Min, s.Max)
	case countAttr != nil && c > s.Max:
		p.errorf(countAttr.Expr.Range(), "Count outside scaling bounds",
			"count (%d) must not be greater than the scaling block's max (%d, at %s).", c, s.Max, posString(maxAttr.Expr.Range()))
	case countAttr != nil && c < s.Min:
		p.errorf(countAttr.Expr.Range(), "Count outside scaling bounds",
			"count (%d) must not be less than the scaling block's min (%d, at %s).", c, s.Min, posString(minAttr.Expr.Range()))
	case c > s.Max:
		p.errorf(maxAttr.Expr.Range(), "Count outside scaling bounds",
			"max (%d) is below the group's count (%d, the default when neither count nor min is set).", s.Max, c)
	}
	tg.Scaling = s
}

// policyBody decodes a scaling policy block, which belongs to the
// autoscaler, not to drover, in the shape Nomad gives it: attributes as
// written, and each block type a list of its blocks, a labelled block
// nested in a one-entry map per label (`check "cpu" { … }` is
// check = [{cpu = [{…}]}]).
func (p *parser) policyBody(body hcl.Body, depth int) map[string]any {
	out := map[string]any{}
	syn := p.syntaxOf(body)
	if syn == nil {
		return out
	}
	if depth > structs.MaxScalingPolicyDepth/2 {
		p.errorf(syn.SrcRange, "Nesting too deep",
			"A scaling policy's blocks may nest at most %d levels.", structs.MaxScalingPolicyDepth/2)
		return out
	}
	names := make([]string, 0, len(syn.Attributes))
	for n := range syn.Attributes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		attr := syn.Attributes[name]
		v, ok := p.value(attr.Expr)
		if !ok {
			continue
		}
		g, err := goValue(v)
		if err != nil {
			p.errorf(attr.Expr.Range(), "Unsupported policy value", "policy key %q: %v.", name, err)
			continue
		}
		if d := depth + structs.ValueDepth(g); d > structs.MaxScalingPolicyDepth {
			p.errorf(attr.Expr.Range(), "Nesting too deep", "policy key %q nests %d levels; exceeds limit of %d.", name, d, structs.MaxScalingPolicyDepth)
			continue
		}
		out[name] = g
	}
	for _, b := range syn.Blocks {
		if attr, dup := syn.Attributes[b.Type]; dup {
			p.errorf(b.TypeRange, "Duplicate policy key", "%q is already set as an attribute at %s.", b.Type, posString(attr.NameRange))
			continue
		}
		var v any = p.policyBody(b.Body, depth+1+len(b.Labels))
		for i := len(b.Labels) - 1; i >= 0; i-- {
			v = map[string]any{b.Labels[i]: []any{v}}
		}
		list, _ := out[b.Type].([]any)
		out[b.Type] = append(list, v)
	}
	return out
}

var (
	actionAttrs  = []string{"command", "args"}
	deviceAttrs  = []string{"count"}
	deviceBlocks = []blockKind{{name: "constraint", many: true}, {name: "affinity", many: true}}
)

func (p *parser) actions(bs hcl.Blocks) []*structs.Action {
	if len(bs) > structs.MaxActionsPerTask {
		p.errorf(bs[structs.MaxActionsPerTask].DefRange, "Too many actions",
			"A task may have at most %d actions; this one has %d.", structs.MaxActionsPerTask, len(bs))
		return nil
	}
	var out []*structs.Action
	for _, b := range bs {
		a := &structs.Action{Name: b.Labels[0]}
		attrs, _ := p.content(b.Body, actionAttrs, nil)
		if !p.setString(attrs["command"], &a.Command) && attrs["command"] == nil {
			p.errorf(b.DefRange, "Missing required argument", "An action needs a command.")
		}
		p.setStrings(attrs["args"], &a.Args)
		out = append(out, a)
	}
	return out
}

// devices parses a task's device blocks (validation refuses them: drover
// has no device plugins, so no node has a device to give).
func (p *parser) devices(bs hcl.Blocks) []*structs.RequestedDevice {
	var out []*structs.RequestedDevice
	for _, b := range bs {
		d := &structs.RequestedDevice{Name: b.Labels[0], Count: 1}
		attrs, blocks := p.content(b.Body, deviceAttrs, deviceBlocks)
		p.setIntRange(attrs["count"], 0, math.MaxInt32, func(i int64) { d.Count = uint64(i) })
		d.Constraints = p.constraints(blocks["constraint"])
		d.Affinities = p.affinities(blocks["affinity"])
		p.noteBlock(fmt.Sprintf("%s: resources: device %q", p.taskKey, d.Name), b.DefRange)
		out = append(out, d)
	}
	return out
}

func (p *parser) numa(b *hcl.Block) *structs.NUMAResource {
	n := &structs.NUMAResource{Affinity: structs.NUMAAffinityNone}
	p.noteBlock(p.taskKey+": resources: numa", b.DefRange)
	attrs, _ := p.content(b.Body, []string{"affinity", "devices"}, nil)
	if a := attrs["affinity"]; a != nil && p.setString(a, &n.Affinity) {
		switch n.Affinity {
		case structs.NUMAAffinityNone, "prefer", "require":
			// prefer and require are refused at registration.
		default:
			p.errorf(a.Expr.Range(), "Invalid NUMA affinity", "affinity must be %q, %q or %q, got %q.", structs.NUMAAffinityNone, "prefer", "require", n.Affinity)
		}
	}
	p.setStrings(attrs["devices"], &n.Devices)
	if len(n.Devices) == 0 {
		n.Devices = nil
	}
	return n
}

// taskKind parses a task's kind (Consul Connect's kinds are refused at
// registration).
func (p *parser) taskKind(a *hcl.Attribute, dst *string) {
	if a == nil || !p.setString(a, dst) {
		return
	}
	if len(*dst) > structs.MaxTaskKindBytes {
		p.errorf(a.Expr.Range(), "Value too long", "kind is %d bytes; exceeds limit of %d.", len(*dst), structs.MaxTaskKindBytes)
	}
}

// Blocks of Nomad Enterprise or of integrations drover does not have,
// found inside a task: refused by name with why.
var unsupportedTaskBlocks = map[string]string{
	"schedule": "a task's schedule block is Nomad Enterprise's time-based task execution, which drover does not have",
	"secret":   "a task's secret block reads secrets from a provider (Vault or a plugin), and drover has no secrets providers",
}

// taskScaling parses a task's `scaling "cpu"|"mem"` blocks as Nomad
// does (policies of type vertical_cpu and vertical_mem); validation
// refuses them at registration.
func (p *parser) taskScaling(bs hcl.Blocks) []*structs.ScalingPolicy {
	var out []*structs.ScalingPolicy
	for _, b := range bs {
		name := b.Labels[0]
		if name != "cpu" && name != "mem" {
			p.errorf(b.LabelRanges[0], "Invalid scaling policy", "A task's scaling block is \"cpu\" or \"mem\", got %q.", name)
			continue
		}
		p.noteBlock(fmt.Sprintf("%s: scaling %q", p.taskKey, name), b.DefRange)
		s := &structs.ScalingPolicy{Enabled: true, Type: "vertical_" + name}
		attrs, blocks := p.content(b.Body, []string{"min", "max", "enabled"}, scalingBlocks)
		p.setBool(attrs["enabled"], &s.Enabled)
		p.setIntRange(attrs["min"], 0, math.MaxInt32, func(i int64) { s.Min = i })
		p.setIntRange(attrs["max"], 0, math.MaxInt32, func(i int64) { s.Max = i })
		if pb := first(blocks, "policy"); pb != nil {
			s.Policy = p.policyBody(pb.Body, 1)
		}
		out = append(out, s)
	}
	return out
}

func (p *parser) refuseTaskBlocks(blocks map[string]hcl.Blocks) {
	names := make([]string, 0, len(unsupportedTaskBlocks))
	for n := range unsupportedTaskBlocks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, b := range blocks[n] {
			p.errorf(b.DefRange, "Unsupported block type", "%s: remove it.", unsupportedTaskBlocks[n])
		}
	}
}
