package jobspec

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/drover-org/drover/core/hclguard"
	"github.com/drover-org/drover/core/structs"
)

// Input variables and local values, as in Nomad's HCL2 job files:
//
//	variable "image" {
//	  type    = string
//	  default = "redis:7"
//	  validation {
//	    condition     = length(var.image) > 0
//	    error_message = "The image must not be empty."
//	  }
//	}
//	locals { tag = split(":", var.image)[1] }
//
// A variable's value comes, the later winning, from its default, the
// environment (NOMAD_VAR_<name>), var files in their order, and -var
// arguments in theirs. Var files and -var may only set declared
// variables; the environment may hold anything.

// VarFile is the content of one var file: HCL assignments (`name = value`),
// or JSON (`{"name": value}`) when Name ends in ".json". Name is used in
// positions.
type VarFile struct {
	Name string
	Src  []byte
}

// EnvVarPrefix starts the name of an environment variable that sets an
// input variable, as in Nomad: NOMAD_VAR_image=redis:7.
const EnvVarPrefix = "NOMAD_VAR_"

// variable is one declared input variable.
type variable struct {
	name        string
	decl        *hcl.Block
	ty          cty.Type
	defaults    *typeexpr.Defaults
	def         cty.Value // cty.NilVal: none
	sensitive   bool
	validations []*hcl.Block
	value       cty.Value
	source      string // where value came from, for messages
	bad         bool   // a value given was refused
}

var (
	variableAttrs   = []string{"type", "default", "description", "sensitive"}
	variableBlocks  = []blockKind{{name: "validation", many: true}}
	validationAttrs = []string{"condition", "error_message"}
)

// declare reads the variable blocks of a file.
func (p *parser) declare(blocks hcl.Blocks) {
	p.vars = map[string]*variable{}
	if len(blocks) > structs.MaxCollectionElements {
		p.errorf(blocks[structs.MaxCollectionElements].DefRange, "Too many variables",
			"The file declares %d variables; exceeds limit %s.", len(blocks), structs.ElementsLimit())
		return
	}
	for _, b := range blocks {
		name := b.Labels[0]
		if !hclsyntax.ValidIdentifier(name) {
			p.errorf(b.LabelRanges[0], "Invalid variable name",
				"%q is not a valid name: use letters, digits, underscores and dashes, starting with a letter.", name)
			continue
		}
		v := &variable{name: name, decl: b, ty: cty.DynamicPseudoType}
		attrs, inner := p.content(b.Body, variableAttrs, variableBlocks)
		if a := attrs["type"]; a != nil {
			ty, defaults, diags := typeexpr.TypeConstraintWithDefaults(a.Expr)
			p.diags = append(p.diags, diags...)
			if !diags.HasErrors() {
				v.ty, v.defaults = ty, defaults
			}
		}
		p.setBool(attrs["sensitive"], &v.sensitive)
		var desc string
		p.setString(attrs["description"], &desc)
		if a := attrs["default"]; a != nil {
			val, diags := a.Expr.Value(nil)
			p.diags = append(p.diags, diags...)
			if !diags.HasErrors() {
				if cv, ok := p.convertVar(v, val, a.Expr.Range(), "its default"); ok {
					v.def = cv
				}
			}
		}
		for _, vb := range inner["validation"] {
			va, _ := p.content(vb.Body, validationAttrs, nil)
			if va["condition"] == nil || va["error_message"] == nil {
				p.errorf(vb.DefRange, "Missing required argument", "A validation block needs a condition and an error_message.")
				continue
			}
			v.validations = append(v.validations, vb)
		}
		p.vars[name] = v
	}
}

// convertVar converts val to v's type, with the type's optional defaults
// applied. rng (may be nil) and what tell where val came from.
func (p *parser) convertVar(v *variable, val cty.Value, rng hcl.Range, what string) (cty.Value, bool) {
	if err := checkValue(val, fmt.Sprintf("the value of variable %q", v.name)); err != nil {
		p.varError(rng, "Variable value too large", "%s: %v.", what, err)
		return cty.NilVal, false
	}
	if v.defaults != nil {
		val = v.defaults.Apply(val)
	}
	cv, err := convert.Convert(val, v.ty)
	if err != nil {
		p.varError(rng, "Invalid value for variable",
			"Variable %q (declared at %s) is %s; %s: %v.", v.name, posString(v.decl.DefRange), typeexpr.TypeString(v.ty), what, err)
		return cty.NilVal, false
	}
	return cv, true
}

// varError records an error at rng, or without a position when rng is the
// zero range (a -var argument or an environment variable).
func (p *parser) varError(rng hcl.Range, summary, format string, args ...any) {
	if rng.Filename == "" {
		p.diags = append(p.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...)})
		return
	}
	p.errorf(rng, summary, format, args...)
}

// assign sets the variables' values from opts, then checks that every
// variable has one and passes its validations.
func (p *parser) assign() {
	set := func(v *variable, val cty.Value, rng hcl.Range, what string) {
		if cv, ok := p.convertVar(v, val, rng, what); ok {
			v.value, v.source = cv, what
		} else {
			v.bad = true
		}
	}
	// A value written as text (environment, -var) is a string unless the
	// variable is of a collection or structural type, in which case it is
	// HCL syntax, as in Nomad.
	fromText := func(v *variable, raw, what string) {
		if len(raw) > hclguard.MaxFileBytes {
			p.varError(hcl.Range{}, "Variable value too large", "%s is %d bytes; a value may be at most %d.", what, len(raw), hclguard.MaxFileBytes)
			return
		}
		if v.ty.IsPrimitiveType() || v.ty == cty.DynamicPseudoType {
			set(v, cty.StringVal(raw), hcl.Range{}, what)
			return
		}
		name := what
		if diags := hclguard.Check(name, []byte(raw)); diags.HasErrors() {
			p.diags = append(p.diags, diags...)
			return
		}
		expr, diags := hclsyntax.ParseExpression([]byte(raw), name, hcl.InitialPos)
		p.diags = append(p.diags, diags...)
		if diags.HasErrors() {
			return
		}
		p.checkCollectionsOf(expr)
		val, diags := expr.Value(nil)
		p.diags = append(p.diags, diags...)
		if !diags.HasErrors() {
			set(v, val, expr.Range(), what)
		}
	}

	for _, e := range p.opts.Env {
		name, raw, ok := strings.Cut(e, "=")
		if !ok || !strings.HasPrefix(name, EnvVarPrefix) {
			continue
		}
		if v := p.vars[strings.TrimPrefix(name, EnvVarPrefix)]; v != nil {
			fromText(v, raw, "the environment variable "+name)
		}
	}
	if len(p.opts.VarFiles) > maxVarFiles {
		p.varError(hcl.Range{}, "Too many var files", "%d var files were given; at most %d are read.", len(p.opts.VarFiles), maxVarFiles)
		return
	}
	for _, f := range p.opts.VarFiles {
		p.varFile(f, set)
	}
	if len(p.opts.Vars) > maxVarArgs {
		p.varError(hcl.Range{}, "Too many -var arguments", "%d were given; at most %d are read.", len(p.opts.Vars), maxVarArgs)
		return
	}
	for _, a := range p.opts.Vars {
		name, raw, ok := strings.Cut(a, "=")
		what := fmt.Sprintf("-var %q", name)
		switch {
		case !ok:
			p.varError(hcl.Range{}, "Invalid -var argument", "%q is not name=value.", truncate(a, 80))
		case p.vars[name] == nil:
			p.varError(hcl.Range{}, "Undeclared variable",
				"-var sets %q, but the job file declares no variable of that name%s.", truncate(name, 80), p.declaredNames())
		default:
			fromText(p.vars[name], raw, what)
		}
	}

	for _, name := range p.varNames() {
		v := p.vars[name]
		if v.bad {
			// Reported; what refers to it fails without more errors.
			v.value = cty.DynamicVal
			continue
		}
		if v.value == cty.NilVal {
			if v.def == cty.NilVal {
				p.errorf(v.decl.DefRange, "Missing value for variable",
					"Variable %q has no default and no value was given: set it with -var %s=…, a var file, or the %s%s environment variable.",
					name, name, EnvVarPrefix, name)
				continue
			}
			v.value, v.source = v.def, "its default"
		}
		if v.sensitive {
			p.addSensitive(v.value)
		}
	}
}

// varFile reads one var file's assignments.
func (p *parser) varFile(f VarFile, set func(*variable, cty.Value, hcl.Range, string)) {
	var file *hcl.File
	var diags hcl.Diagnostics
	if strings.HasSuffix(f.Name, ".json") {
		if diags = checkJSON(f.Name, f.Src); !diags.HasErrors() {
			file, diags = hcljson.Parse(f.Src, f.Name)
		}
	} else if diags = hclguard.Check(f.Name, f.Src); !diags.HasErrors() {
		file, diags = hclsyntax.ParseConfig(f.Src, f.Name, hcl.InitialPos)
		if !diags.HasErrors() {
			p.checkCollectionsOf(file.Body.(*hclsyntax.Body))
		}
	}
	p.diags = append(p.diags, diags...)
	if diags.HasErrors() {
		return
	}
	attrs, diags := file.Body.JustAttributes()
	p.diags = append(p.diags, diags...)
	for _, name := range sortedAttrNames(attrs) {
		a := attrs[name]
		v := p.vars[name]
		if v == nil {
			p.errorf(a.NameRange, "Undeclared variable",
				"%s sets %q, but the job file declares no variable of that name%s.", f.Name, name, p.declaredNames())
			continue
		}
		val, diags := a.Expr.Value(nil)
		p.diags = append(p.diags, diags...)
		if !diags.HasErrors() {
			set(v, val, a.Expr.Range(), f.Name)
		}
	}
}

// checkJSON bounds a JSON var file as hclguard bounds HCL: its size and
// nesting (HCL's JSON parser recurses once per level).
func checkJSON(filename string, src []byte) hcl.Diagnostics {
	at := func(off int) *hcl.Range {
		return &hcl.Range{Filename: filename, Start: hcl.Pos{Line: 1, Column: 1, Byte: off}, End: hcl.Pos{Line: 1, Column: 1, Byte: off}}
	}
	if len(src) > hclguard.MaxFileBytes {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "File too large", Subject: at(0),
			Detail: fmt.Sprintf("The file is %d bytes; a file may be at most %d (limit MaxFileBytes).", len(src), hclguard.MaxFileBytes)}}
	}
	depth, inString, escaped := 0, false, false
	for i, c := range src {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > structs.MaxNestingDepth {
				return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Nesting too deep", Subject: at(i),
					Detail: fmt.Sprintf("Lists and objects nest more than %d levels here; exceeds limit %s.", structs.MaxNestingDepth, structs.DepthLimit())}}
			}
		case c == ']' || c == '}':
			depth = max(depth-1, 0)
		}
	}
	return nil
}

// validate runs every variable's validation blocks against its value.
func (p *parser) validateVars() {
	for _, name := range p.varNames() {
		v := p.vars[name]
		if v.value == cty.NilVal || !v.value.IsWhollyKnown() {
			continue
		}
		ctx := &hcl.EvalContext{
			Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{name: v.value})},
			Functions: p.funcs,
		}
		failed := false
		for _, vb := range v.validations {
			attrs, _ := vb.Body.JustAttributes()
			cond := attrs["condition"]
			val, diags := cond.Expr.Value(ctx)
			p.diags = append(p.diags, diags...)
			if diags.HasErrors() {
				continue
			}
			if val.IsNull() || !val.IsKnown() || val.Type() != cty.Bool {
				p.errorf(cond.Expr.Range(), "Invalid validation condition", "The condition of variable %q must be true or false.", name)
				continue
			}
			if val.True() {
				continue
			}
			msg := "Invalid value."
			if mv, diags := attrs["error_message"].Expr.Value(ctx); !diags.HasErrors() && !mv.IsNull() && mv.Type() == cty.String {
				msg = mv.AsString()
			} else {
				p.diags = append(p.diags, diags...)
			}
			p.errorf(cond.Expr.Range(), "Invalid value for variable",
				"%s (variable %q, value from %s)", msg, name, v.source)
			failed = true
		}
		if failed {
			// Unknown: what refers to it fails without more errors.
			v.value = cty.DynamicVal
		}
	}
}

func (p *parser) varNames() []string {
	names := make([]string, 0, len(p.vars))
	for n := range p.vars {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (p *parser) declaredNames() string {
	names := p.varNames()
	switch {
	case len(names) == 0:
		return ""
	case len(names) > 10:
		names = append(names[:10], "…")
	}
	return " (declared: " + strings.Join(names, ", ") + ")"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// addSensitive remembers the string forms of a sensitive value, so that
// no diagnostic quotes them.
func (p *parser) addSensitive(v cty.Value) {
	if v.IsNull() || !v.IsKnown() {
		return
	}
	ty := v.Type()
	switch {
	case ty.IsPrimitiveType():
		s, err := convert.Convert(v, cty.String)
		if err == nil && s.AsString() != "" {
			p.sensitive = append(p.sensitive, s.AsString())
		}
	case ty.IsCollectionType() || ty.IsTupleType() || ty.IsObjectType():
		for it := v.ElementIterator(); it.Next(); {
			_, el := it.Element()
			p.addSensitive(el)
		}
	}
}

// redact replaces sensitive values in the diagnostics' text.
func (p *parser) redact(diags hcl.Diagnostics) {
	if len(p.sensitive) == 0 {
		return
	}
	// Longest first, so that a value containing another is hidden whole.
	sort.Slice(p.sensitive, func(i, j int) bool { return len(p.sensitive[i]) > len(p.sensitive[j]) })
	for _, d := range diags {
		for _, s := range p.sensitive {
			d.Summary = strings.ReplaceAll(d.Summary, s, "(sensitive value)")
			d.Detail = strings.ReplaceAll(d.Detail, s, "(sensitive value)")
		}
		d.Expression, d.EvalContext = nil, nil
	}
}

// local is one local value.
type local struct {
	attr  *hcl.Attribute
	value cty.Value
	state int // 0 new, 1 being evaluated, 2 done
}

// locals evaluates the locals blocks, each value after those it refers
// to; a cycle is reported at each of its members.
func (p *parser) locals(blocks hcl.Blocks) {
	p.localVals = map[string]*local{}
	var order []string
	for _, b := range blocks {
		attrs, diags := b.Body.JustAttributes()
		p.diags = append(p.diags, diags...)
		names := sortedAttrNames(attrs)
		sort.Slice(names, func(i, j int) bool { return attrs[names[i]].Range.Start.Byte < attrs[names[j]].Range.Start.Byte })
		for _, name := range names {
			a := attrs[name]
			if prev := p.localVals[name]; prev != nil {
				p.errorf(a.NameRange, "Duplicate local value",
					"local.%s was already defined at %s.", name, posString(prev.attr.NameRange))
				continue
			}
			p.localVals[name] = &local{attr: a}
			order = append(order, name)
		}
	}
	if len(order) > structs.MaxCollectionElements {
		p.errorf(p.localVals[order[structs.MaxCollectionElements]].attr.NameRange, "Too many local values",
			"The file defines %d local values; exceeds limit %s.", len(order), structs.ElementsLimit())
		return
	}
	for _, name := range order {
		p.evalLocal(name, nil)
	}
}

// evalLocal evaluates one local value; path is the chain of locals whose
// evaluation led here, to name a cycle.
func (p *parser) evalLocal(name string, path []string) {
	l := p.localVals[name]
	switch l.state {
	case 2:
		return
	case 1:
		i := 0
		for path[i] != name {
			i++
		}
		cycle := append(append([]string{}, path[i:]...), name)
		p.errorf(l.attr.NameRange, "Cycle in local values",
			"local.%s refers to itself through %s.", name, "local."+strings.Join(cycle, " → local."))
		l.value = cty.DynamicVal
		return
	}
	l.state = 1
	deps := map[string]cty.Value{}
	ok := true
	for _, t := range l.attr.Expr.Variables() {
		if t.RootName() != "local" || len(t) < 2 {
			continue
		}
		step, isAttr := t[1].(hcl.TraverseAttr)
		if !isAttr {
			continue
		}
		dep := p.localVals[step.Name]
		if dep == nil {
			p.errorf(t.SourceRange(), "Reference to undeclared local value", "No local value named %q is defined.", step.Name)
			ok = false
			continue
		}
		p.evalLocal(step.Name, append(path, name))
		if dep.value == cty.NilVal || !dep.value.IsWhollyKnown() {
			ok = false
			continue
		}
		deps[step.Name] = dep.value
	}
	l.state = 2
	l.value = cty.DynamicVal
	if !ok {
		return
	}
	v, good := p.evalWith(l.attr.Expr, map[string]cty.Value{"local": cty.ObjectVal(deps)})
	if !good {
		return
	}
	if err := checkValue(v, "local."+name); err != nil {
		p.errorf(l.attr.Expr.Range(), "Local value too large", "%v.", err)
		return
	}
	l.value = v
	p.noteSize(v)
}

// noteSize records the largest value that expressions may refer to; see
// checkForValues.
func (p *parser) noteSize(v cty.Value) {
	n, _ := valueSize(v, maxValueBytes)
	p.maxRefBytes = max(p.maxRefBytes, n)
	p.maxRefElems = max(p.maxRefElems, maxLength(v))
}

// buildContext makes the evaluation context every expression of the job
// sees: var, local and the functions.
func (p *parser) buildContext() {
	vars := map[string]cty.Value{}
	for name, v := range p.vars {
		if v.value != cty.NilVal {
			vars[name] = v.value
			p.noteSize(v.value)
		} else {
			vars[name] = cty.DynamicVal
		}
	}
	p.ctx.Variables["var"] = cty.ObjectVal(vars)
	p.buildLocals()
}

func (p *parser) buildLocals() {
	locals := map[string]cty.Value{}
	for name, l := range p.localVals {
		if l.value != cty.NilVal {
			locals[name] = l.value
		} else {
			locals[name] = cty.DynamicVal
		}
	}
	p.ctx.Variables["local"] = cty.ObjectVal(locals)
}

// checkCollectionsOf applies checkCollections' bounds to any node.
func (p *parser) checkCollectionsOf(n hclsyntax.Node) {
	_ = hclsyntax.Walk(n, &limitWalker{p: p})
}
