package aclendpoint

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/drover-org/drover/core/structs"
)

// Binding rule selectors: the subset of Nomad's (go-bexpr) expressions
// that users write over the mapped claims of a login. The data is
// value.<name> (ClaimMappings, strings) and list.<name>
// (ListClaimMappings, lists of strings). The forms are
//
//	value.sub == "ci"            value.sub != "ci"
//	"admins" in list.groups      "admins" not in list.groups
//	list.groups contains "x"     list.groups not contains "x"
//	"prod" in value.env          (substring, as bexpr)
//	list.groups is empty         list.groups is not empty
//
// joined with and, or, not and parentheses. Anything else is refused when
// the rule is written, with the position and what was expected.

// selector is a parsed selector expression.
type selector interface {
	eval(d *claimData) bool
}

// claimData is what a selector reads: the mapped claims of one login.
type claimData struct {
	Value map[string]string
	List  map[string][]string
}

type (
	selAnd struct{ l, r selector }
	selOr  struct{ l, r selector }
	selNot struct{ e selector }
	// selMatch is one comparison of a selector path with a literal.
	selMatch struct {
		op  string // == != in contains empty
		neg bool
		sel []string // "value"|"list", name
		lit string
	}
)

func (s selAnd) eval(d *claimData) bool { return s.l.eval(d) && s.r.eval(d) }
func (s selOr) eval(d *claimData) bool  { return s.l.eval(d) || s.r.eval(d) }
func (s selNot) eval(d *claimData) bool { return !s.e.eval(d) }

func (m selMatch) eval(d *claimData) bool {
	var out bool
	if m.sel[0] == "value" {
		v, ok := d.Value[m.sel[1]]
		switch m.op {
		case "==":
			out = ok && v == m.lit
		case "!=":
			// A claim that is absent equals nothing.
			return !ok || v != m.lit
		case "in", "contains":
			out = ok && strings.Contains(v, m.lit)
		case "empty":
			out = !ok || v == ""
		}
	} else {
		l, ok := d.List[m.sel[1]]
		switch m.op {
		case "in", "contains":
			out = ok && slices.Contains(l, m.lit)
		case "empty":
			out = len(l) == 0
		case "==", "!=":
			// Refused at parse time.
		}
	}
	return out != m.neg
}

// maxSelectorDepth bounds the nesting of a selector (parentheses, not).
const maxSelectorDepth = 32

// parseSelector parses a binding rule's Selector; "" matches every
// login (nil selector).
func parseSelector(src string) (selector, error) {
	if strings.TrimSpace(src) == "" {
		return nil, nil
	}
	if len(src) > structs.MaxACLBindingRuleSelectorBytes {
		return nil, selectorError(src, 0, "at most %d bytes", structs.MaxACLBindingRuleSelectorBytes)
	}
	toks, err := lexSelector(src)
	if err != nil {
		return nil, err
	}
	p := &selParser{src: src, toks: toks}
	e, err := p.or(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, selectorError(src, t.pos, "unexpected %s; expected and, or or the end", t)
	}
	return e, nil
}

func selectorError(src string, pos int, format string, args ...any) error {
	return structs.NewError(structs.ErrInvalid, "binding rule Selector %s: at column %d: %s", bounded(src), pos+1, fmt.Sprintf(format, args...))
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokWord
	tokString
	tokOp // == != ( )
)

type selTok struct {
	kind tokKind
	text string
	pos  int
}

func (t selTok) String() string {
	switch t.kind {
	case tokEOF:
		return "end of selector"
	case tokString:
		return fmt.Sprintf("string %q", t.text)
	}
	return fmt.Sprintf("%q", t.text)
}

func lexSelector(src string) ([]selTok, error) {
	var out []selTok
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(' || c == ')':
			out = append(out, selTok{tokOp, string(c), i})
			i++
		case c == '=' || c == '!':
			if i+1 < len(src) && src[i+1] == '=' {
				out = append(out, selTok{tokOp, src[i : i+2], i})
				i += 2
				continue
			}
			return nil, selectorError(src, i, "unexpected %q; expected == or !=", c)
		case c == '"' || c == '`':
			start := i
			i++
			var b strings.Builder
			for ; i < len(src) && src[i] != c; i++ {
				if src[i] == '\\' && c == '"' && i+1 < len(src) {
					i++
				}
				b.WriteByte(src[i])
			}
			if i >= len(src) {
				return nil, selectorError(src, start, "unterminated string")
			}
			i++
			out = append(out, selTok{tokString, b.String(), start})
		case isWordByte(rune(c)):
			start := i
			for i < len(src) && isWordByte(rune(src[i])) {
				i++
			}
			out = append(out, selTok{tokWord, src[start:i], start})
		default:
			return nil, selectorError(src, i, "unexpected %q", c)
		}
	}
	return append(out, selTok{tokEOF, "", len(src)}), nil
}

func isWordByte(r rune) bool {
	return r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '.' || r == '-' || r == '/')
}

type selParser struct {
	src  string
	toks []selTok
	i    int
}

func (p *selParser) peek() selTok { return p.toks[p.i] }
func (p *selParser) next() selTok {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *selParser) isWord(w string) bool {
	t := p.peek()
	return t.kind == tokWord && t.text == w
}

func (p *selParser) or(depth int) (selector, error) {
	l, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	for p.isWord("or") {
		p.next()
		r, err := p.and(depth)
		if err != nil {
			return nil, err
		}
		l = selOr{l, r}
	}
	return l, nil
}

func (p *selParser) and(depth int) (selector, error) {
	l, err := p.unary(depth)
	if err != nil {
		return nil, err
	}
	for p.isWord("and") {
		p.next()
		r, err := p.unary(depth)
		if err != nil {
			return nil, err
		}
		l = selAnd{l, r}
	}
	return l, nil
}

func (p *selParser) unary(depth int) (selector, error) {
	if depth > maxSelectorDepth {
		return nil, selectorError(p.src, p.peek().pos, "nested deeper than %d", maxSelectorDepth)
	}
	t := p.peek()
	switch {
	case t.kind == tokWord && t.text == "not":
		p.next()
		e, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return selNot{e}, nil
	case t.kind == tokOp && t.text == "(":
		p.next()
		e, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tokOp || c.text != ")" {
			return nil, selectorError(p.src, c.pos, "unexpected %s; expected )", c)
		}
		return e, nil
	}
	return p.match()
}

// match parses one comparison: `<literal> [not] in <path>` or `<path> ==
// | != | [not] contains <literal>` or `<path> is [not] empty`.
func (p *selParser) match() (selector, error) {
	t := p.next()
	if t.kind == tokString || (t.kind == tokWord && !strings.Contains(t.text, ".")) {
		if t.kind == tokWord && isKeyword(t.text) {
			return nil, selectorError(p.src, t.pos, "unexpected %s; expected a comparison", t)
		}
		neg := false
		if p.isWord("not") {
			p.next()
			neg = true
		}
		if !p.isWord("in") {
			n := p.peek()
			return nil, selectorError(p.src, n.pos, "unexpected %s; expected in or not in after a value", n)
		}
		p.next()
		path, err := p.path(p.next())
		if err != nil {
			return nil, err
		}
		return selMatch{op: "in", neg: neg, sel: path, lit: t.text}, nil
	}
	path, err := p.path(t)
	if err != nil {
		return nil, err
	}
	op := p.next()
	switch {
	case op.kind == tokOp && (op.text == "==" || op.text == "!="):
		if path[0] == "list" {
			return nil, selectorError(p.src, op.pos, "%s compares a value; use contains or in with list.%s", op.text, path[1])
		}
		lit, err := p.literal()
		if err != nil {
			return nil, err
		}
		return selMatch{op: op.text, sel: path, lit: lit}, nil
	case op.kind == tokWord && (op.text == "contains" || op.text == "not"):
		neg := op.text == "not"
		if neg {
			if c := p.next(); c.kind != tokWord || c.text != "contains" {
				return nil, selectorError(p.src, c.pos, "unexpected %s; expected contains after not", c)
			}
		}
		lit, err := p.literal()
		if err != nil {
			return nil, err
		}
		return selMatch{op: "contains", neg: neg, sel: path, lit: lit}, nil
	case op.kind == tokWord && op.text == "is":
		neg := false
		if p.isWord("not") {
			p.next()
			neg = true
		}
		if e := p.next(); e.kind != tokWord || e.text != "empty" {
			return nil, selectorError(p.src, e.pos, "unexpected %s; expected empty", e)
		}
		return selMatch{op: "empty", neg: neg, sel: path}, nil
	case op.kind == tokWord && op.text == "matches":
		return nil, selectorError(p.src, op.pos, "matches (regular expressions) is not supported; use ==, in or contains")
	}
	return nil, selectorError(p.src, op.pos, "unexpected %s; expected ==, !=, contains, not contains or is empty", op)
}

func isKeyword(w string) bool {
	switch w {
	case "and", "or", "not", "in", "contains", "is", "empty", "matches":
		return true
	}
	return false
}

// path checks a selector path: value.<name> or list.<name>.
func (p *selParser) path(t selTok) ([]string, error) {
	if t.kind != tokWord {
		return nil, selectorError(p.src, t.pos, "unexpected %s; expected value.<claim> or list.<claim>", t)
	}
	parts := strings.Split(t.text, ".")
	if len(parts) != 2 || (parts[0] != "value" && parts[0] != "list") || parts[1] == "" {
		return nil, selectorError(p.src, t.pos, "%q: a selector reads value.<claim> or list.<claim> (the method's ClaimMappings and ListClaimMappings)", t.text)
	}
	return parts, nil
}

// literal reads the right-hand value of a comparison: a quoted string or
// a bare word.
func (p *selParser) literal() (string, error) {
	t := p.next()
	if t.kind == tokString || (t.kind == tokWord && !isKeyword(t.text)) {
		return t.text, nil
	}
	return "", selectorError(p.src, t.pos, "unexpected %s; expected a value", t)
}

// interpolateBindName fills ${value.x} in a BindName from the mapped
// claims. A reference to a claim the login does not have, or to list.x,
// makes the rule bind nothing (ok false).
func interpolateBindName(name string, d *claimData) (string, bool) {
	return interpolate(name, d, nil)
}

// interpolate fills ${value.x} from d and any other ${name} from vars.
func interpolate(name string, d *claimData, vars map[string]string) (string, bool) {
	var b strings.Builder
	for {
		i := strings.Index(name, "${")
		if i < 0 {
			b.WriteString(name)
			return b.String(), true
		}
		j := strings.IndexByte(name[i:], '}')
		if j < 0 {
			return "", false
		}
		ref := strings.TrimSpace(name[i+2 : i+j])
		var (
			v  string
			ok bool
		)
		if key, isValue := strings.CutPrefix(ref, "value."); isValue {
			if v, ok = d.Value[key]; !ok {
				return "", false
			}
		} else if v, ok = vars[ref]; !ok {
			return "", false
		}
		b.WriteString(name[:i])
		b.WriteString(v)
		name = name[i+j+1:]
	}
}

// checkBindName refuses a BindName whose interpolations are malformed or
// read anything but value.<name>.
func checkBindName(name string) error {
	return checkInterpolation("binding rule BindName", name, nil)
}

// checkInterpolation refuses a template whose interpolations are
// malformed or read anything but value.<name> and vars.
func checkInterpolation(field, name string, vars []string) error {
	rest := name
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			return nil
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return structs.NewError(structs.ErrInvalid, "%s %s: unterminated ${", field, bounded(name))
		}
		ref := strings.TrimSpace(rest[i+2 : i+j])
		if k, ok := strings.CutPrefix(ref, "value."); (!ok || k == "") && !slices.Contains(vars, ref) {
			allowed := "${value.<claim>}"
			for _, v := range vars {
				allowed += ", ${" + v + "}"
			}
			return structs.NewError(structs.ErrInvalid, "%s %s: ${%s}: only %s may be interpolated", field, bounded(name), bounded(ref), allowed)
		}
		rest = rest[i+j+1:]
	}
}
