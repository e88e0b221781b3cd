package base

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/basepb"
)

// Configurable is implemented by a plugin implementation that takes a
// config block. Every kind's Serve (and its Plugin's GRPCServer) registers
// the Base service for an implementation that is Configurable, and for no
// other: the agent then refuses a config block for it. A Go author writes
//
//	type Scheduler struct{ cfg *base.Config[Settings] }
//
//	func (s *Scheduler) PluginConfig() base.Settable { return s.cfg }
//
// and reads s.cfg.Get() wherever the settings matter. The agent calls
// SetConfig before any call of the kind's service, so Info and the rest
// already see the config in force.
type Configurable interface {
	// PluginConfig returns the config the Base service serves. It is
	// called once, when the plugin starts serving; nil is an error.
	PluginConfig() Settable
}

// Settable is a config as the Base service serves it: its schema and its
// setter. *Config[T] is the implementation to use; the interface only
// erases T.
type Settable interface {
	// Spec is the schema of the config block; it never changes.
	Spec() *basepb.Spec
	// SetJSON judges a decoded config block (SetConfigRequest.config_json)
	// and puts it in force when there are no field errors. An error means
	// the config could not be judged at all (it is not JSON).
	SetJSON(configJSON []byte, pluginName string) ([]*basepb.FieldError, error)
}

// Config is a plugin's config block described by one Go struct T whose
// fields carry tags:
//
//	type Settings struct {
//		PageSize int           `hcl:"page_size,optional" doc:"Objects per page."`
//		Mode     string        `hcl:"mode" doc:"fast or safe."`
//		Timeout  time.Duration `hcl:"timeout,optional"`
//		Limits   []Limit       `hcl:"limit,block"`
//		Volumes  map[string]Volume `hcl:"volume,block"`
//		cache    int           // unexported: not part of the config
//		Internal string        `hcl:"-"` // left out on purpose
//	}
//
// The tag is `hcl:"name[,optional][,block]"`; doc is the description the
// schema publishes.
//
// Attributes are fields of type string, bool, int*, uint*, float*,
// time.Duration (written as a string such as "30s"), a pointer to one of
// those (nil when unset), or slices and string-keyed maps of them. An
// attribute is required unless its tag says optional; an optional one
// defaults to its value in the defaults NewConfig is given (an empty slice
// or map defaults to null, which decodes to nil).
//
// Blocks are fields tagged block: a struct or pointer to a struct is one
// block (`name { ... }`), required unless optional; an absent optional one
// is nil for a pointer and the default's value for a struct. A slice of
// structs is any number of blocks (`name { ... }`), a map from string to
// struct any number of labelled blocks (`name "label" { ... }`); neither
// is ever required (validate can demand some), and both are empty by
// default. The attributes of a single block default to the default's
// value of the block; those of list and map blocks to their Go zero.
//
// A Config is safe for concurrent use: Get returns the config in force,
// and SetJSON swaps a new one in atomically. Values Get returns share
// their slices and maps with the config in force: treat them as read-only.
type Config[T any] struct {
	spec     *basepb.Spec
	root     *body
	defaults T
	validate func(T) []*basepb.FieldError
	cur      atomic.Pointer[T]
	name     atomic.Pointer[string]
}

var _ Settable = (*Config[struct{}])(nil)

// NewConfig derives the schema of T's config block, with defaults as the
// values of its optional attributes, and returns a Config holding
// defaults. validate (nil: none) judges a decoded config beyond its types
// (ranges, combinations); its field errors name fields by path, as
// PathName, PathIndex and PathLabel build them. NewConfig fails on a struct
// it cannot describe (an untagged exported field, an unsupported type, a
// default for a required field) and when nothing is required but validate
// refuses the defaults, since the agent would then refuse every config
// that leaves them be. Call it once, at start-up, and treat an error as a
// bug in the plugin.
func NewConfig[T any](defaults T, validate func(T) []*basepb.FieldError) (*Config[T], error) {
	t := reflect.TypeOf(defaults)
	if t == nil || t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("plugin config: %v is not a struct", t)
	}
	root, err := describe(t, reflect.ValueOf(defaults), t.Name(), 0)
	if err != nil {
		return nil, fmt.Errorf("plugin config: %w", err)
	}
	spec, err := root.spec()
	if err != nil {
		return nil, fmt.Errorf("plugin config: %w", err)
	}
	if err := CheckSpec(spec); err != nil {
		return nil, fmt.Errorf("plugin config: %w", err)
	}
	c := &Config[T]{spec: spec, root: root, defaults: defaults, validate: validate}
	if !root.requires() && validate != nil {
		if errs := validate(defaults); len(errs) > 0 {
			return nil, fmt.Errorf("plugin config: the defaults, in force when the config block is empty, are refused: %s",
				FieldErrors(errs).Error())
		}
	}
	c.cur.Store(&defaults)
	return c, nil
}

// MustConfig is NewConfig for a package-level or constructor call whose
// error is a programming mistake: it panics on one.
func MustConfig[T any](defaults T, validate func(T) []*basepb.FieldError) *Config[T] {
	c, err := NewConfig(defaults, validate)
	if err != nil {
		panic(err)
	}
	return c
}

// Get returns the config in force: the defaults until a config is set.
func (c *Config[T]) Get() T { return *c.cur.Load() }

// PluginName is the plugin's name in the agent, as the last accepted
// SetConfig gave it ("" before one).
func (c *Config[T]) PluginName() string {
	if n := c.name.Load(); n != nil {
		return *n
	}
	return ""
}

// PluginConfig returns c, so a plugin that embeds *Config[T] is
// Configurable without writing the method.
func (c *Config[T]) PluginConfig() Settable {
	if c == nil {
		return nil
	}
	return c
}

// Spec returns a copy of the schema of the config block.
func (c *Config[T]) Spec() *basepb.Spec { return proto.Clone(c.spec).(*basepb.Spec) }

// SetJSON decodes configJSON strictly into a T (a field T does not have,
// or a value of the wrong type or out of its Go type's range, is a field
// error), runs validate on it and, when there are no field errors, puts it
// in force.
func (c *Config[T]) SetJSON(configJSON []byte, pluginName string) ([]*basepb.FieldError, error) {
	v, errs, err := c.Parse(configJSON)
	if err != nil || len(errs) > 0 {
		return errs, err
	}
	c.cur.Store(&v)
	c.name.Store(&pluginName)
	return nil, nil
}

// Parse is SetJSON without putting the config in force: it returns the
// decoded config, or what is wrong with it. Tests of a plugin's settings
// use it with JSON as the agent's Decode produces.
func (c *Config[T]) Parse(configJSON []byte) (T, []*basepb.FieldError, error) {
	var zero T
	dec := json.NewDecoder(bytes.NewReader(configJSON))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return zero, nil, fmt.Errorf("config_json is not JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return zero, nil, errors.New("config_json holds more than one JSON value")
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return zero, []*basepb.FieldError{{Message: "the config must be an object"}}, nil
	}
	v := reflect.New(c.root.typ).Elem()
	v.Set(reflect.ValueOf(c.defaults)) // fields left out of the config keep their value
	var d decoder
	d.body(v, c.root, obj, "")
	if len(d.errs) > 0 {
		return zero, d.errs, nil
	}
	out := v.Interface().(T)
	if c.validate != nil {
		if errs := c.validate(out); len(errs) > 0 {
			return zero, errs, nil
		}
	}
	return out, nil, nil
}

// FieldErrorf returns a field error for path (see PathName) saying which
// rule the value breaks.
func FieldErrorf(path, format string, args ...any) *basepb.FieldError {
	return &basepb.FieldError{Path: path, Message: fmt.Sprintf(format, args...)}
}

// PathName is the path of field name in the body at path ("" for the top).
func PathName(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// PathIndex is the path of the i-th block or element of the list at path.
func PathIndex(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// PathLabel is the path of the block labelled label (or the map element
// keyed label) at path.
func PathLabel(path, label string) string {
	b, _ := json.Marshal(label) // a string always marshals
	return path + "[" + string(b) + "]"
}

// FieldErrors is a list of field errors as an error, for logs and tests.
type FieldErrors []*basepb.FieldError

func (e FieldErrors) Error() string {
	parts := make([]string, 0, len(e))
	for _, f := range e {
		if f.GetPath() == "" {
			parts = append(parts, f.GetMessage())
			continue
		}
		parts = append(parts, f.GetPath()+": "+f.GetMessage())
	}
	return strings.Join(parts, "; ")
}

// fieldKind is what a struct field is in the config block.
type fieldKind int

const (
	attrField fieldKind = iota
	singleBlock
	listBlock
	mapBlock
)

// body is one config body as the Go struct describing it, at one place in
// the config (the same struct type at two places has two bodies, since
// their defaults differ).
type body struct {
	typ    reflect.Type
	fields []*field
	byName map[string]*field
}

type field struct {
	name     string
	goName   string
	index    int
	kind     fieldKind
	required bool
	doc      string
	ptr      bool       // a single block held by pointer
	val      *valueType // an attribute's type
	body     *body      // a block's body
	// def is the field's default as a JSON value tree (nil: null), which
	// an absent or null field decodes from.
	def any
}

// valueType is an attribute's Go type and how it travels.
type valueType struct {
	t    reflect.Type
	kind valueKind
	elem *valueType // of a list, map or pointer
}

type valueKind int

const (
	vString valueKind = iota
	vBool
	vInt
	vUint
	vFloat
	vDuration
	vList
	vMap
	vPtr
)

var durationType = reflect.TypeOf(time.Duration(0))

// describe builds the body of struct type t, with def (a value of t, or
// invalid for the zero value) giving its defaults.
func describe(t reflect.Type, def reflect.Value, where string, depth int) (*body, error) {
	if depth > MaxSpecDepth {
		return nil, fmt.Errorf("%s: blocks nest deeper than %d", where, MaxSpecDepth)
	}
	if !def.IsValid() {
		def = reflect.Zero(t)
	}
	b := &body{typ: t, byName: map[string]*field{}}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag, tagged := sf.Tag.Lookup("hcl")
		if !sf.IsExported() || tag == "-" {
			continue
		}
		at := where + "." + sf.Name
		if !tagged {
			return nil, fmt.Errorf("%s has no hcl tag (tag it `hcl:\"-\"` to leave it out of the config)", at)
		}
		parts := strings.Split(tag, ",")
		f := &field{name: parts[0], goName: sf.Name, index: i, doc: sf.Tag.Get("doc")}
		optional, block := false, false
		for _, o := range parts[1:] {
			switch o {
			case "optional":
				optional = true
			case "block":
				block = true
			default:
				return nil, fmt.Errorf("%s: unknown hcl tag option %q (want optional, block)", at, o)
			}
		}
		if f.name == "" {
			return nil, fmt.Errorf("%s: the hcl tag has no name", at)
		}
		if _, dup := b.byName[f.name]; dup {
			return nil, fmt.Errorf("%s: name %q is used twice", at, f.name)
		}
		fv := def.Field(i)
		if block {
			if err := describeBlock(f, sf.Type, fv, optional, at, depth); err != nil {
				return nil, err
			}
		} else {
			vt, err := describeValue(sf.Type, at)
			if err != nil {
				return nil, err
			}
			f.kind, f.val, f.required = attrField, vt, !optional
			if f.required {
				if !fv.IsZero() {
					return nil, fmt.Errorf("%s is required, so it takes no default: make its default the zero value or tag it optional", at)
				}
			} else if f.def, err = encodeValue(fv, vt); err != nil {
				return nil, fmt.Errorf("%s: default: %w", at, err)
			}
		}
		b.fields = append(b.fields, f)
		b.byName[f.name] = f
	}
	return b, nil
}

func describeBlock(f *field, t reflect.Type, def reflect.Value, optional bool, at string, depth int) error {
	elem := func(t reflect.Type) (reflect.Type, bool) {
		if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
			return t.Elem(), true
		}
		return t, t.Kind() == reflect.Struct
	}
	var err error
	switch {
	case t.Kind() == reflect.Struct || (t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct):
		f.kind, f.required, f.ptr = singleBlock, !optional, t.Kind() == reflect.Pointer
		st, _ := elem(t)
		inner := def
		if f.ptr {
			if def.IsNil() {
				inner = reflect.Value{}
			} else {
				inner = def.Elem()
			}
		}
		if f.body, err = describe(st, inner, at, depth+1); err != nil {
			return err
		}
		if !f.ptr && !f.required {
			// An absent optional struct block holds the default's value.
			if f.def, err = encodeBody(def, f.body); err != nil {
				return fmt.Errorf("%s: default: %w", at, err)
			}
		}
		return nil
	case t.Kind() == reflect.Slice || (t.Kind() == reflect.Map && t.Key().Kind() == reflect.String):
		st, ok := elem(t.Elem())
		if !ok {
			return fmt.Errorf("%s: a block must be a struct, a pointer to one, or a slice or string-keyed map of them, not %v", at, t)
		}
		f.kind = listBlock
		if t.Kind() == reflect.Map {
			f.kind = mapBlock
		}
		if def.Len() > 0 {
			return fmt.Errorf("%s: blocks take no default (the config holds the blocks written): leave it empty in the defaults", at)
		}
		f.body, err = describe(st, reflect.Value{}, at, depth+1)
		return err
	}
	return fmt.Errorf("%s: a block must be a struct, a pointer to one, or a slice or string-keyed map of them, not %v", at, t)
}

func describeValue(t reflect.Type, at string) (*valueType, error) {
	vt := &valueType{t: t}
	if t == durationType {
		vt.kind = vDuration
		return vt, nil
	}
	switch t.Kind() {
	case reflect.String:
		vt.kind = vString
	case reflect.Bool:
		vt.kind = vBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		vt.kind = vInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		vt.kind = vUint
	case reflect.Float32, reflect.Float64:
		vt.kind = vFloat
	case reflect.Slice, reflect.Map, reflect.Pointer:
		if t.Kind() == reflect.Map && t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: a map attribute must have string keys, not %v", at, t.Key())
		}
		vt.kind = map[reflect.Kind]valueKind{reflect.Slice: vList, reflect.Map: vMap, reflect.Pointer: vPtr}[t.Kind()]
		if t.Elem().Kind() == reflect.Struct && t.Elem() != durationType {
			return nil, fmt.Errorf("%s: structs are blocks: tag it ,block", at)
		}
		if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Pointer {
			return nil, fmt.Errorf("%s: a pointer to a pointer is not a config type", at)
		}
		e, err := describeValue(t.Elem(), at)
		if err != nil {
			return nil, err
		}
		if t.Kind() == reflect.Pointer && (e.kind == vList || e.kind == vMap) {
			return nil, fmt.Errorf("%s: a pointer to a slice or map is not a config type (a nil slice or map is already unset)", at)
		}
		vt.elem = e
	case reflect.Struct:
		return nil, fmt.Errorf("%s: structs are blocks: tag it ,block", at)
	default:
		return nil, fmt.Errorf("%s: type %v is not a config type (string, bool, numbers, time.Duration, slices and maps of them)", at, t)
	}
	return vt, nil
}

// hclType is the HCL type expression of vt.
func (vt *valueType) hclType() string {
	switch vt.kind {
	case vString, vDuration:
		return "string"
	case vBool:
		return "bool"
	case vInt, vUint, vFloat:
		return "number"
	case vList:
		return "list(" + vt.elem.hclType() + ")"
	case vMap:
		return "map(" + vt.elem.hclType() + ")"
	default: // vPtr
		return vt.elem.hclType()
	}
}

// spec is the schema of b.
func (b *body) spec() (*basepb.Spec, error) {
	s := &basepb.Spec{}
	for _, f := range b.fields {
		if f.kind == attrField {
			a := &basepb.Attribute{Name: f.name, Type: f.val.hclType(), Required: f.required, Description: f.doc}
			if f.def != nil {
				raw, err := json.Marshal(f.def)
				if err != nil {
					return nil, fmt.Errorf("%s: default: %w", f.goName, err)
				}
				a.DefaultJson = string(raw)
			}
			s.Attributes = append(s.Attributes, a)
			continue
		}
		nested, err := f.body.spec()
		if err != nil {
			return nil, err
		}
		blk := &basepb.Block{Name: f.name, Body: nested, Description: f.doc}
		switch f.kind {
		case singleBlock:
			blk.Nesting, blk.Required = basepb.Block_NESTING_SINGLE, f.required
		case listBlock:
			blk.Nesting = basepb.Block_NESTING_LIST
		case mapBlock:
			blk.Nesting = basepb.Block_NESTING_MAP
		}
		s.Blocks = append(s.Blocks, blk)
	}
	return s, nil
}

// requires reports whether an empty config block is refused for a missing
// field.
func (b *body) requires() bool {
	for _, f := range b.fields {
		if f.required {
			return true
		}
	}
	return false
}

// encodeValue is v (of vt) as a JSON value tree; an empty slice or map and
// a nil pointer are null.
func encodeValue(v reflect.Value, vt *valueType) (any, error) {
	switch vt.kind {
	case vString:
		return v.String(), nil
	case vBool:
		return v.Bool(), nil
	case vInt:
		return json.Number(strconv.FormatInt(v.Int(), 10)), nil
	case vUint:
		return json.Number(strconv.FormatUint(v.Uint(), 10)), nil
	case vFloat:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%v is not a JSON number", f)
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	case vDuration:
		return time.Duration(v.Int()).String(), nil
	case vPtr:
		if v.IsNil() {
			return nil, nil
		}
		return encodeValue(v.Elem(), vt.elem)
	case vList:
		if v.Len() == 0 {
			return nil, nil
		}
		out := make([]any, v.Len())
		for i := range out {
			e, err := encodeValue(v.Index(i), vt.elem)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	default: // vMap
		if v.Len() == 0 {
			return nil, nil
		}
		out := make(map[string]any, v.Len())
		it := v.MapRange()
		for it.Next() {
			e, err := encodeValue(it.Value(), vt.elem)
			if err != nil {
				return nil, err
			}
			out[it.Key().String()] = e
		}
		return out, nil
	}
}

// encodeBody is struct v as the JSON object of body b (its attributes;
// its blocks empty or, for single ones, their defaults).
func encodeBody(v reflect.Value, b *body) (any, error) {
	out := map[string]any{}
	for _, f := range b.fields {
		switch f.kind {
		case attrField:
			e, err := encodeValue(v.Field(f.index), f.val)
			if err != nil {
				return nil, err
			}
			out[f.name] = e
		case singleBlock:
			fv := v.Field(f.index)
			if f.ptr {
				if fv.IsNil() {
					out[f.name] = nil
					continue
				}
				fv = fv.Elem()
			}
			e, err := encodeBody(fv, f.body)
			if err != nil {
				return nil, err
			}
			out[f.name] = e
		default:
			out[f.name] = nil
		}
	}
	return out, nil
}

// decoder decodes a JSON value tree into Go values, collecting field
// errors with their paths.
type decoder struct {
	errs []*basepb.FieldError
}

func (d *decoder) fail(path, format string, args ...any) {
	d.errs = append(d.errs, FieldErrorf(path, format, args...))
}

// body decodes obj into struct v (which holds the values of fields the
// config leaves out).
func (d *decoder) body(v reflect.Value, b *body, obj map[string]any, path string) {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := b.byName[k]; !ok {
			d.fail(PathName(path, k), "is not a field of this plugin's config")
		}
	}
	for _, f := range b.fields {
		at := PathName(path, f.name)
		raw, present := obj[f.name]
		if !present || raw == nil {
			if f.required {
				d.fail(at, "is required")
				continue
			}
			raw = f.def
		}
		fv := v.Field(f.index)
		switch f.kind {
		case attrField:
			d.value(fv, f.val, raw, at)
		case singleBlock:
			d.single(fv, f, raw, at)
		case listBlock:
			d.list(fv, f, raw, at)
		case mapBlock:
			d.mapBlocks(fv, f, raw, at)
		}
	}
}

func (d *decoder) object(raw any, at, what string) (map[string]any, bool) {
	obj, ok := raw.(map[string]any)
	if !ok {
		d.fail(at, "must be %s, not %s", what, jsonKind(raw))
	}
	return obj, ok
}

func (d *decoder) single(fv reflect.Value, f *field, raw any, at string) {
	if raw == nil {
		fv.Set(reflect.Zero(fv.Type()))
		return
	}
	obj, ok := d.object(raw, at, "a block")
	if !ok {
		return
	}
	nv := reflect.New(f.body.typ).Elem()
	d.body(nv, f.body, obj, at)
	if f.ptr {
		p := reflect.New(f.body.typ)
		p.Elem().Set(nv)
		fv.Set(p)
		return
	}
	fv.Set(nv)
}

func (d *decoder) list(fv reflect.Value, f *field, raw any, at string) {
	fv.Set(reflect.Zero(fv.Type()))
	if raw == nil {
		return
	}
	arr, ok := raw.([]any)
	if !ok {
		d.fail(at, "must be a list of blocks, not %s", jsonKind(raw))
		return
	}
	if len(arr) == 0 {
		return
	}
	out := reflect.MakeSlice(fv.Type(), len(arr), len(arr))
	for i, e := range arr {
		d.blockElem(out.Index(i), f, e, PathIndex(at, i))
	}
	fv.Set(out)
}

func (d *decoder) mapBlocks(fv reflect.Value, f *field, raw any, at string) {
	fv.Set(reflect.Zero(fv.Type()))
	if raw == nil {
		return
	}
	obj, ok := d.object(raw, at, "an object of labelled blocks")
	if !ok || len(obj) == 0 {
		return
	}
	out := reflect.MakeMapWithSize(fv.Type(), len(obj))
	for _, k := range sortedKeys(obj) {
		e := reflect.New(fv.Type().Elem()).Elem()
		d.blockElem(e, f, obj[k], PathLabel(at, k))
		out.SetMapIndex(reflect.ValueOf(k).Convert(fv.Type().Key()), e)
	}
	fv.Set(out)
}

// blockElem decodes one block of a list or map into ev (a struct or a
// pointer to one).
func (d *decoder) blockElem(ev reflect.Value, f *field, raw any, at string) {
	obj, ok := d.object(raw, at, "a block")
	if !ok {
		return
	}
	nv := reflect.New(f.body.typ).Elem()
	d.body(nv, f.body, obj, at)
	if ev.Kind() == reflect.Pointer {
		p := reflect.New(f.body.typ)
		p.Elem().Set(nv)
		ev.Set(p)
		return
	}
	ev.Set(nv)
}

func sortedKeys(obj map[string]any) []string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// value decodes raw into v of vt.
func (d *decoder) value(v reflect.Value, vt *valueType, raw any, at string) {
	if raw == nil {
		switch vt.kind {
		case vPtr, vList, vMap:
			v.Set(reflect.Zero(v.Type()))
		default:
			d.fail(at, "must not be null")
		}
		return
	}
	switch vt.kind {
	case vString:
		s, ok := raw.(string)
		if !ok {
			d.fail(at, "must be a string, not %s", jsonKind(raw))
			return
		}
		v.SetString(s)
	case vBool:
		b, ok := raw.(bool)
		if !ok {
			d.fail(at, "must be a bool, not %s", jsonKind(raw))
			return
		}
		v.SetBool(b)
	case vDuration:
		s, ok := raw.(string)
		if !ok {
			d.fail(at, "must be a duration such as \"30s\" or \"5m\", not %s", jsonKind(raw))
			return
		}
		dur, err := time.ParseDuration(s)
		if err != nil {
			d.fail(at, "must be a duration such as \"30s\" or \"5m\", not %q", s)
			return
		}
		v.SetInt(int64(dur))
	case vInt, vUint, vFloat:
		d.number(v, vt, raw, at)
	case vPtr:
		p := reflect.New(v.Type().Elem())
		before := len(d.errs)
		d.value(p.Elem(), vt.elem, raw, at)
		if len(d.errs) == before {
			v.Set(p)
		}
	case vList:
		arr, ok := raw.([]any)
		if !ok {
			d.fail(at, "must be a list, not %s", jsonKind(raw))
			return
		}
		if len(arr) == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		out := reflect.MakeSlice(v.Type(), len(arr), len(arr))
		for i, e := range arr {
			d.value(out.Index(i), vt.elem, e, PathIndex(at, i))
		}
		v.Set(out)
	case vMap:
		obj, ok := raw.(map[string]any)
		if !ok {
			d.fail(at, "must be a map, not %s", jsonKind(raw))
			return
		}
		if len(obj) == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		out := reflect.MakeMapWithSize(v.Type(), len(obj))
		for _, k := range sortedKeys(obj) {
			e := reflect.New(v.Type().Elem()).Elem()
			d.value(e, vt.elem, obj[k], PathLabel(at, k))
			out.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), e)
		}
		v.Set(out)
	}
}

func (d *decoder) number(v reflect.Value, vt *valueType, raw any, at string) {
	n, ok := raw.(json.Number)
	if !ok {
		d.fail(at, "must be a number, not %s", jsonKind(raw))
		return
	}
	bits := v.Type().Bits()
	switch vt.kind {
	case vInt:
		i, err := strconv.ParseInt(n.String(), 10, bits)
		if err != nil {
			if isWhole(n) {
				d.fail(at, "must be between %d and %d", int64(-1)<<(bits-1), int64(1<<(bits-1)-1))
			} else {
				d.fail(at, "must be a whole number, not %s", n)
			}
			return
		}
		v.SetInt(i)
	case vUint:
		u, err := strconv.ParseUint(n.String(), 10, bits)
		if err != nil {
			switch {
			case !isWhole(n):
				d.fail(at, "must be a whole number, not %s", n)
			case strings.HasPrefix(n.String(), "-"):
				d.fail(at, "must not be negative")
			default:
				d.fail(at, "must be at most %d", uint64(math.MaxUint64)>>(64-bits))
			}
			return
		}
		v.SetUint(u)
	default:
		f, err := strconv.ParseFloat(n.String(), bits)
		if err != nil {
			d.fail(at, "must be a number within the range of a float%d", bits)
			return
		}
		v.SetFloat(f)
	}
}

// isWhole reports whether n is written as an integer (HCL's numbers come
// as integers when they are whole).
func isWhole(n json.Number) bool {
	return !strings.ContainsAny(n.String(), ".eE")
}

func jsonKind(raw any) string {
	switch raw.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a bool"
	case json.Number:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", raw)
}
