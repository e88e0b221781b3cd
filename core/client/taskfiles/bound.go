package taskfiles

import (
	"errors"
	"fmt"
	"iter"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"text/template/parse"

	"github.com/Masterminds/sprig/v3"
)

// Bounds of one template's render (a drover safeguard: Nomad has none).
// consul-template renders into a buffer of its own with no limit, so a
// template such as `{{ range loop 5000000 }}…{{ end }}` would grow the
// client by hundreds of megabytes. drover parses each template first and
// rewrites it so that every piece of output, every range iteration and
// every variable assignment passes through a counter of the render's
// budget; the counter's error stops text/template's execution at once,
// so a render holds at most about its bound in memory. The helpers that
// would allocate a large value in one call from small arguments (loop,
// until, seq, repeat, indent, printf's widths, replace) are bounded
// before they allocate.
const (
	// templateMaxOutput bounds one template's rendered file.
	templateMaxOutput = 4 << 20
	// templateMaxIterations bounds the range iterations and template
	// calls of one render.
	templateMaxIterations = 250_000
	// templateMaxWidth bounds a printf width or precision.
	templateMaxWidth = 1 << 16
)

// errTemplateBound marks a render stopped by its budget.
var errTemplateBound = errors.New("template over its bound")

// renderBudget counts one render's output and iterations; reset before
// each execution (the renderer's lock held).
type renderBudget struct {
	out, iters int64
	err        error // the first bound crossed
}

func (b *renderBudget) reset() { *b = renderBudget{} }

func (b *renderBudget) fail(format string, args ...any) error {
	if b.err == nil {
		b.err = fmt.Errorf("%w: "+format+" (a drover safeguard)", append([]any{errTemplateBound}, args...)...)
	}
	return b.err
}

// chargeOut counts n bytes of output.
func (b *renderBudget) chargeOut(n int) error {
	b.out += int64(n)
	if b.out > templateMaxOutput {
		return b.fail("the rendered output is over %d bytes", templateMaxOutput)
	}
	return nil
}

// checkSize refuses a value that alone would pass the output bound.
func (b *renderBudget) checkSize(n int64) error {
	if n > templateMaxOutput || n < 0 {
		return b.fail("a value of %d bytes is over the bound of %d bytes", n, templateMaxOutput)
	}
	return nil
}

func (b *renderBudget) tick() error {
	b.iters++
	if b.iters > templateMaxIterations {
		return b.fail("more than %d loop iterations or template calls", templateMaxIterations)
	}
	return nil
}

// Names of the counting functions the rewrite inserts.
const (
	fnText = "_droverText"
	fnOut  = "_droverOut"
	fnVal  = "_droverVal"
	fnTick = "_droverTick"
)

// boundedFuncs are the counting functions and the bounded helpers, over
// consul-template's own (ExtFuncMap wins).
func boundedFuncs(b *renderBudget) map[string]any {
	sp := sprig.HermeticTxtFuncMap()
	spUntilStep := sp["untilStep"].(func(int, int, int) []int)
	spSeq := sp["seq"].(func(...int) string)
	spIndent := sp["indent"].(func(int, string) string)
	spNindent := sp["nindent"].(func(int, string) string)
	return map[string]any{
		fnText: func(s string) (string, error) { return s, b.chargeOut(len(s)) },
		fnOut: func(v any) (string, error) {
			s := printed(v)
			return s, b.chargeOut(len(s))
		},
		fnVal: func(v any) (any, error) {
			switch s := v.(type) {
			case string:
				return v, b.checkSize(int64(len(s)))
			case []byte:
				return v, b.checkSize(int64(len(s)))
			}
			return v, nil
		},
		fnTick: func() (string, error) { return "", b.tick() },
		// loop yields lazily (consul-template's starts a goroutine that
		// a stopped render would leave blocked); the range's iterations
		// are counted.
		"loop": func(args ...any) (iter.Seq[int64], error) {
			var start, stop int64
			var err error
			switch len(args) {
			case 1:
				stop, err = loopInt(args[0])
			case 2:
				if start, err = loopInt(args[0]); err == nil {
					stop, err = loopInt(args[1])
				}
			default:
				return nil, fmt.Errorf("loop: wrong number of arguments, expected 1 or 2, but got %d", len(args))
			}
			if err != nil {
				return nil, err
			}
			return func(yield func(int64) bool) {
				for i := start; i < stop; i++ {
					if !yield(i) {
						return
					}
				}
			}, nil
		},
		"sprig_until": func(n int) ([]int, error) {
			if err := checkCount(b, n); err != nil {
				return nil, err
			}
			step := 1
			if n < 0 {
				step = -1
			}
			return spUntilStep(0, n, step), nil
		},
		"sprig_untilStep": func(start, stop, step int) ([]int, error) {
			if step != 0 {
				if err := checkCount(b, (stop-start)/step); err != nil {
					return nil, err
				}
			}
			return spUntilStep(start, stop, step), nil
		},
		"sprig_seq": func(p ...int) (string, error) {
			var span int
			switch len(p) {
			case 1:
				span = p[0]
			case 2:
				span = p[1] - p[0]
			case 3:
				if p[1] != 0 {
					span = (p[2] - p[0]) / p[1]
				}
			}
			if err := checkCount(b, span); err != nil {
				return "", err
			}
			return spSeq(p...), nil
		},
		"sprig_repeat": func(n int, s string) (string, error) {
			if n > 0 && len(s) > 0 && (n > templateMaxOutput || int64(n)*int64(len(s)) > templateMaxOutput) {
				return "", b.fail("repeat: %d times %d bytes is over the bound of %d bytes", n, len(s), templateMaxOutput)
			}
			return strings.Repeat(s, max(n, 0)), nil
		},
		"indent": func(n int, s string) (string, error) {
			if n < 0 {
				return "", fmt.Errorf("indent: spaces must be at least 0")
			}
			if err := indentSize(b, n, s); err != nil {
				return "", err
			}
			pad := strings.Repeat(" ", n)
			return pad + strings.ReplaceAll(s, "\n", "\n"+pad), nil
		},
		"sprig_indent": func(n int, s string) (string, error) {
			if err := indentSize(b, n, s); err != nil {
				return "", err
			}
			return spIndent(n, s), nil
		},
		"sprig_nindent": func(n int, s string) (string, error) {
			if err := indentSize(b, n, s+"\n"); err != nil {
				return "", err
			}
			return spNindent(n, s), nil
		},
		"printf": func(format string, args ...any) (string, error) {
			if err := checkWidths(b, format); err != nil {
				return "", err
			}
			return fmt.Sprintf(format, args...), nil
		},
		"replaceAll": func(from, to, s string) (string, error) {
			if err := replaceSize(b, from, to, s); err != nil {
				return "", err
			}
			return strings.ReplaceAll(s, from, to), nil
		},
		"sprig_replace": func(from, to, s string) (string, error) {
			if err := replaceSize(b, from, to, s); err != nil {
				return "", err
			}
			return strings.ReplaceAll(s, from, to), nil
		},
	}
}

func loopInt(v any) (int64, error) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if rv.Uint() > 1<<62 {
			return 0, fmt.Errorf("loop: %d is too large", rv.Uint())
		}
		return int64(rv.Uint()), nil
	case reflect.String:
		return strconv.ParseInt(rv.String(), 10, 64)
	}
	return 0, fmt.Errorf("loop: bad argument type: %T", v)
}

func checkCount(b *renderBudget, n int) error {
	if n < 0 {
		n = -n
	}
	if n > templateMaxIterations {
		return b.fail("a list of %d elements is over the bound of %d", n, templateMaxIterations)
	}
	return nil
}

func indentSize(b *renderBudget, n int, s string) error {
	if n <= 0 {
		return nil
	}
	if n > templateMaxOutput {
		return b.checkSize(int64(n))
	}
	return b.checkSize(int64(len(s)) + int64(n)*int64(strings.Count(s, "\n")+1))
}

func replaceSize(b *renderBudget, from, to, s string) error {
	if len(to) <= len(from) {
		return nil
	}
	return b.checkSize(int64(len(s)) + int64(strings.Count(s, from))*int64(len(to)-len(from)))
}

// checkWidths refuses a printf width or precision over templateMaxWidth
// (fmt allocates the padding) and a width taken from an argument.
func checkWidths(b *renderBudget, format string) error {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		for i++; i < len(format); i++ {
			c := format[i]
			switch {
			case c == '*':
				return fmt.Errorf("printf: a width or precision from an argument (*) is not allowed in templates")
			case c >= '0' && c <= '9':
				j := i
				for j < len(format) && format[j] >= '0' && format[j] <= '9' {
					j++
				}
				if n, err := strconv.Atoi(format[i:j]); err != nil || n > templateMaxWidth {
					return b.fail("a printf width or precision over %d", templateMaxWidth)
				}
				i = j - 1
				continue
			case strings.IndexByte("+-# .[]", c) >= 0:
				continue
			}
			break
		}
	}
	return nil
}

// printed is v as text/template prints an action's value.
func printed(v any) string {
	if v == nil {
		return "<no value>"
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer && !rv.IsNil() && !implementsPrinter(rv.Type()) {
		rv = rv.Elem()
	}
	if rv.Kind() == reflect.Pointer && rv.IsNil() && !implementsPrinter(rv.Type()) {
		return "<nil>"
	}
	return fmt.Sprint(rv.Interface())
}

var (
	errorIface    = reflect.TypeFor[error]()
	stringerIface = reflect.TypeFor[fmt.Stringer]()
)

func implementsPrinter(t reflect.Type) bool {
	return t.Implements(errorIface) || t.Implements(stringerIface)
}

// boundTemplate rewrites a template's source (with its delimiters) into
// one with the default delimiters whose output, range iterations,
// template calls and assigned values all pass through the counting
// functions. The rewritten template renders the same text.
func boundTemplate(src, left, right string) (string, error) {
	tr := parse.New("")
	tr.Mode = parse.SkipFuncCheck
	set := map[string]*parse.Tree{}
	if _, err := tr.Parse(src, left, right, set); err != nil {
		return "", err
	}
	var sb strings.Builder
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	// Deterministic: the main template (name "") first.
	sort.Strings(names)
	for _, name := range names {
		t := set[name]
		if name != "" {
			sb.WriteString("{{define " + strconv.Quote(name) + "}}")
		}
		if err := boundNode(&sb, t.Root); err != nil {
			return "", err
		}
		if name != "" {
			sb.WriteString("{{end}}")
		}
	}
	return sb.String(), nil
}

func boundNode(sb *strings.Builder, n parse.Node) error {
	switch n := n.(type) {
	case nil:
		return nil
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := boundNode(sb, c); err != nil {
				return err
			}
		}
	case *parse.TextNode:
		if len(n.Text) == 0 {
			return nil
		}
		// The text's newlines stay newlines of the source (inside the
		// action), so that positions in errors keep their lines.
		sb.WriteString("{{" + fnText + " " + strconv.Quote(string(n.Text)) + strings.Repeat("\n", strings.Count(string(n.Text), "\n")) + "}}")
	case *parse.ActionNode:
		fn := fnOut
		if len(n.Pipe.Decl) > 0 {
			fn = fnVal
		}
		sb.WriteString("{{" + n.Pipe.String() + " | " + fn + "}}")
	case *parse.IfNode:
		return boundBranch(sb, "if", &n.BranchNode, "")
	case *parse.WithNode:
		return boundBranch(sb, "with", &n.BranchNode, "")
	case *parse.RangeNode:
		return boundBranch(sb, "range", &n.BranchNode, "{{"+fnTick+"}}")
	case *parse.TemplateNode:
		sb.WriteString("{{" + fnTick + "}}" + n.String())
	case *parse.BreakNode, *parse.ContinueNode:
		sb.WriteString(n.String())
	case *parse.CommentNode:
	default:
		return fmt.Errorf("unexpected %T in a template", n)
	}
	return nil
}

func boundBranch(sb *strings.Builder, kw string, b *parse.BranchNode, first string) error {
	sb.WriteString("{{" + kw + " " + b.Pipe.String() + "}}" + first)
	if err := boundNode(sb, b.List); err != nil {
		return err
	}
	if b.ElseList != nil {
		sb.WriteString("{{else}}")
		if err := boundNode(sb, b.ElseList); err != nil {
			return err
		}
	}
	sb.WriteString("{{end}}")
	return nil
}
