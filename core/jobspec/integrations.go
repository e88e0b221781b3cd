package jobspec

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/drover-org/drover/core/structs"
)

// The blocks of Nomad's integrations (vault, consul, identity, connect
// with its sidecar_service, sidecar_task and gateway blocks, multiregion)
// are parsed as Nomad parses them into their structs, by the hcl tags of
// those structs' fields; whether drover can run them is decided when the
// job is registered (structs' validation refuses each by name, and Check
// places the refusal at the block). The parser itself refuses only what
// is not valid HCL for Nomad: an unknown name, a value of the wrong type.
//
// A field's tag is `hcl:"name"` for an attribute (string, bool, int,
// time.Duration and their pointers, []string), or `hcl:"name,kind"`:
//
//	block       a single block, into a pointer to a struct
//	blocks      repeated blocks, into a slice of pointers to structs
//	labelled    repeated labelled blocks, into a map by label
//	label       the block's label
//	map         a string map, as a block or an attribute (meta, env)
//	any         a free-form block (a proxy's config)
//	taskconfig  a task driver's config block
//	resources   a resources block
//	logs        a logs block

// decodeTagged decodes b's body into dst, a pointer to a struct with hcl
// tags, reporting unknown names and wrong types at their position.
func (p *parser) decodeTagged(b *hcl.Block, dst any) {
	v := reflect.ValueOf(dst).Elem()
	t := v.Type()
	var attrs []string
	var kinds []blockKind
	for i := 0; i < t.NumField(); i++ {
		name, kind, ok := hclTag(t.Field(i))
		if !ok {
			continue
		}
		switch kind {
		case "":
			attrs = append(attrs, name)
		case "map":
			attrs = append(attrs, name)
			kinds = append(kinds, blockKind{name: name})
		case "blocks":
			k := blockKind{name: name, many: true}
			if hasLabel(t.Field(i).Type.Elem().Elem()) {
				k.labels, k.unique = []string{"name"}, true
			}
			kinds = append(kinds, k)
		case "labelled":
			kinds = append(kinds, blockKind{name: name, labels: []string{"name"}, many: true, unique: true})
		case "label":
		default:
			kinds = append(kinds, blockKind{name: name})
		}
	}
	ha, hb := p.content(b.Body, attrs, kinds)
	for i := 0; i < t.NumField(); i++ {
		name, kind, ok := hclTag(t.Field(i))
		if !ok {
			continue
		}
		f := v.Field(i)
		switch kind {
		case "":
			p.setField(ha[name], f)
		case "label":
			if len(b.Labels) > 0 {
				f.SetString(b.Labels[0])
			}
		case "map":
			if m := p.stringMap(ha, hb, name); m != nil {
				f.Set(reflect.ValueOf(m))
			}
		case "block":
			if sb := first(hb, name); sb != nil {
				nv := newBlock(f.Type().Elem())
				p.decodeTagged(sb, nv.Interface())
				f.Set(nv)
			}
		case "blocks":
			for _, sb := range hb[name] {
				nv := newBlock(f.Type().Elem().Elem())
				p.decodeTagged(sb, nv.Interface())
				f.Set(reflect.Append(f, nv))
			}
		case "labelled":
			for _, sb := range hb[name] {
				if f.IsNil() {
					f.Set(reflect.MakeMap(f.Type()))
				}
				nv := newBlock(f.Type().Elem().Elem())
				p.decodeTagged(sb, nv.Interface())
				f.SetMapIndex(reflect.ValueOf(sb.Labels[0]), nv)
			}
		case "any":
			if sb := first(hb, name); sb != nil {
				f.Set(reflect.ValueOf(p.policyBody(sb.Body, 1)))
			}
		case "taskconfig":
			if sb := first(hb, name); sb != nil {
				f.Set(reflect.ValueOf(p.configBody(sb.Body)))
			}
		case "resources":
			if sb := first(hb, name); sb != nil {
				f.Set(reflect.ValueOf(p.resources(sb)))
			}
		case "logs":
			if sb := first(hb, name); sb != nil {
				f.Set(reflect.ValueOf(p.logs(sb)))
			}
		}
	}
}

// blockDefaults are the values Nomad gives a block's attributes that it
// leaves out (its API's canonicalization), set before the block is read.
var blockDefaults = map[reflect.Type]func(v any){
	reflect.TypeOf(structs.MultiregionRegion{}): func(v any) { v.(*structs.MultiregionRegion).Count = 1 },
	reflect.TypeOf(structs.ConsulGatewayProxy{}): func(v any) {
		d := 5 * time.Second
		v.(*structs.ConsulGatewayProxy).ConnectTimeout = &d
	},
	reflect.TypeOf(structs.SidecarTask{}): func(v any) {
		kill, delay := 5*time.Second, time.Duration(0)
		st := v.(*structs.SidecarTask)
		st.KillTimeout, st.ShutdownDelay = &kill, &delay
	},
}

// newBlock is a new block of struct type t with Nomad's defaults.
func newBlock(t reflect.Type) reflect.Value {
	v := reflect.New(t)
	if set := blockDefaults[t]; set != nil {
		set(v.Interface())
	}
	return v
}

// hasLabel reports whether the struct t takes its block's label.
func hasLabel(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		if _, kind, ok := hclTag(t.Field(i)); ok && kind == "label" {
			return true
		}
	}
	return false
}

// hclTag splits a field's hcl tag into its name and kind.
func hclTag(f reflect.StructField) (name, kind string, ok bool) {
	tag, ok := f.Tag.Lookup("hcl")
	if !ok {
		return "", "", false
	}
	name, kind, _ = strings.Cut(tag, ",")
	return name, kind, true
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	stringsType  = reflect.TypeOf([]string(nil))
)

// setField decodes attr (nil: absent) into the attribute field f.
func (p *parser) setField(attr *hcl.Attribute, f reflect.Value) {
	if attr == nil {
		return
	}
	ptr := f.Kind() == reflect.Pointer
	t := f.Type()
	if ptr {
		t = t.Elem()
	}
	dst := reflect.New(t)
	var ok bool
	switch {
	case t == durationType:
		ok = p.setDuration(attr, dst.Interface().(*time.Duration))
	case t == stringsType:
		ok = p.setStrings(attr, dst.Interface().(*[]string))
	case t.Kind() == reflect.String:
		ok = p.setString(attr, dst.Interface().(*string))
	case t.Kind() == reflect.Bool:
		ok = p.setBool(attr, dst.Interface().(*bool))
	case t.Kind() == reflect.Int:
		ok = p.setInt(attr, dst.Interface().(*int))
	default:
		panic(fmt.Sprintf("jobspec: no decoder for an attribute of type %s", t))
	}
	if !ok {
		return
	}
	if ptr {
		f.Set(dst)
	} else {
		f.Set(dst.Elem())
	}
}

// vault parses a vault block laid over Nomad's defaults.
func (p *parser) vault(b *hcl.Block) *structs.Vault {
	v := structs.NewVault()
	p.decodeTagged(b, v)
	return v
}

func (p *parser) consul(b *hcl.Block) *structs.Consul {
	c := &structs.Consul{}
	p.decodeTagged(b, c)
	return c
}

// identities parses a task's identity blocks: the one without a name (or
// named "default") is the task's default identity, the others its named
// ones, as Nomad keeps them. key is the task's position key.
func (p *parser) identities(bs hcl.Blocks, key string) (def *structs.WorkloadIdentity, named []*structs.WorkloadIdentity) {
	for _, b := range bs {
		id := &structs.WorkloadIdentity{}
		p.decodeTagged(b, id)
		if (id.Name == "" || id.Name == structs.WorkloadIdentityDefaultName) && def == nil {
			id.Name = structs.WorkloadIdentityDefaultName
			def = id
			p.noteBlock(key+": identity", b.DefRange)
			continue
		}
		named = append(named, id)
		p.noteBlock(fmt.Sprintf("%s: identity %q", key, id.Name), b.DefRange)
	}
	return def, named
}

func (p *parser) multiregion(b *hcl.Block) *structs.Multiregion {
	m := &structs.Multiregion{}
	p.decodeTagged(b, m)
	return m
}

func (p *parser) connect(b *hcl.Block) *structs.ConsulConnect {
	c := &structs.ConsulConnect{}
	p.decodeTagged(b, c)
	return c
}

// noteBlock records the position of a block that validation may refuse,
// under the prefix its message starts with (`group "g": task "t": vault`),
// so that Check reports the refusal at the block.
func (p *parser) noteBlock(key string, rng hcl.Range) {
	if _, seen := p.blockAt[key]; !seen {
		p.blockAt[key] = rng
	}
}
