package jobspec

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"math"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/zclconf/go-cty-yaml"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/drover-org/drover/core/structs"
)

// The function library of job files: Nomad's set, by Nomad's names.
//
// Every function but try, can and convert (which take expressions, not
// values) is wrapped by guard: its result may be at most maxValueBytes,
// nest at most structs.MaxNestingDepth and hold at most
// structs.MaxCollectionElements elements, and all results of one parse
// together at most maxFunctionBytes. The few functions whose result can
// be far larger than their arguments (range, setproduct, join, replace,
// format widths, indent, YAML aliases) are also checked before they run,
// since checking after would come too late for the memory.
//
// Filesystem functions are off, as in Nomad's API parse: a job file is
// parsed on the agent as well as by the CLI, and reading the agent's files
// on behalf of whoever sends a job would be a hole. They are declared so
// that using one says so, instead of "unknown function".

// fileFunctions are Nomad's filesystem functions, refused when called.
var fileFunctions = []string{"abspath", "basename", "dirname", "file", "fileexists", "fileset", "filebase64", "pathexpand", "templatefile"}

// rsadecrypt is Nomad's too, refused: it decrypts PKCS #1 v1.5, a
// padding Go deprecates, on the agent for whoever sends a job file.

// precheck inspects a function's arguments before it runs.
type precheck func(args []cty.Value) error

func (p *parser) functions() map[string]function.Function {
	plain := map[string]function.Function{
		// Numeric.
		"abs": stdlib.AbsoluteFunc, "ceil": stdlib.CeilFunc, "floor": stdlib.FloorFunc,
		"log": stdlib.LogFunc, "max": stdlib.MaxFunc, "min": stdlib.MinFunc,
		"parseint": stdlib.ParseIntFunc, "pow": stdlib.PowFunc, "signum": stdlib.SignumFunc,
		// String.
		"chomp": stdlib.ChompFunc, "lower": stdlib.LowerFunc, "upper": stdlib.UpperFunc,
		"split":  stdlib.SplitFunc,
		"strrev": stdlib.ReverseFunc, "substr": stdlib.SubstrFunc, "title": stdlib.TitleFunc,
		"trim": stdlib.TrimFunc, "trimprefix": stdlib.TrimPrefixFunc, "trimsuffix": stdlib.TrimSuffixFunc,
		"trimspace": stdlib.TrimSpaceFunc, "strlen": stdlib.StrlenFunc,
		// Collection.
		"chunklist": stdlib.ChunklistFunc, "coalesce": stdlib.CoalesceFunc, "coalescelist": stdlib.CoalesceListFunc,
		"compact": stdlib.CompactFunc, "concat": stdlib.ConcatFunc, "contains": stdlib.ContainsFunc,
		"distinct": stdlib.DistinctFunc, "element": stdlib.ElementFunc, "flatten": stdlib.FlattenFunc,
		// index is element access and reverse reverses a string, as
		// Nomad's are (go-cty's), not Terraform's.
		"index": stdlib.IndexFunc, "keys": stdlib.KeysFunc, "length": lengthFunc,
		"lookup": stdlib.LookupFunc, "merge": stdlib.MergeFunc, "reverse": stdlib.ReverseFunc,
		"setintersection": stdlib.SetIntersectionFunc,
		"setunion":        stdlib.SetUnionFunc, "slice": stdlib.SliceFunc, "sort": stdlib.SortFunc,
		"values": stdlib.ValuesFunc, "zipmap": stdlib.ZipmapFunc,
		// Encoding.
		"csvdecode": stdlib.CSVDecodeFunc, "jsondecode": stdlib.JSONDecodeFunc, "jsonencode": stdlib.JSONEncodeFunc,
		"yamlencode":   yaml.YAMLEncodeFunc,
		"base64encode": base64EncodeFunc, "base64decode": base64DecodeFunc, "urlencode": urlEncodeFunc,
		// Date and time.
		"formatdate": stdlib.FormatDateFunc, "timeadd": stdlib.TimeAddFunc,
		// Hashes and UUIDs.
		"md5": hashFunc(md5.New), "sha1": hashFunc(sha1.New), "sha256": hashFunc(sha256.New), "sha512": hashFunc(sha512.New),
		"uuidv4": uuidV4Func, "uuidv5": uuidV5Func,
	}
	for name, f := range nomadFunctions(&p.bcrypts) {
		plain[name] = f
	}
	checked := map[string]struct {
		f   function.Function
		pre precheck
	}{
		"range":         {stdlib.RangeFunc, checkRange},
		"setproduct":    {stdlib.SetProductFunc, checkSetProduct},
		"join":          {stdlib.JoinFunc, checkJoin},
		"replace":       {stdlib.ReplaceFunc, checkReplace},
		"regex_replace": {stdlib.RegexReplaceFunc, checkRegexReplace},
		"format":        {stdlib.FormatFunc, checkFormat},
		"formatlist":    {stdlib.FormatListFunc, checkFormatList},
		"indent":        {stdlib.IndentFunc, checkIndent},
		"yamldecode":    {yaml.YAMLDecodeFunc, checkYAML},
	}
	out := make(map[string]function.Function, len(plain)+len(checked)+len(fileFunctions)+3)
	for name, f := range plain {
		out[name] = p.guard(name, f, nil)
	}
	for name, c := range checked {
		out[name] = p.guard(name, c.f, c.pre)
	}
	for _, name := range fileFunctions {
		out[name] = refusedFunc(name)
	}
	out["rsadecrypt"] = function.New(&function.Spec{
		VarParam: &function.Parameter{Name: "args", Type: cty.DynamicPseudoType, AllowNull: true, AllowDynamicType: true},
		Type:     function.StaticReturnType(cty.String),
		Impl: func([]cty.Value, cty.Type) (cty.Value, error) {
			return cty.NilVal, fmt.Errorf("rsadecrypt() is not available: drover decrypts nothing in job files (PKCS #1 v1.5 is deprecated); pass the decrypted value as a variable")
		},
	})
	// try and can evaluate expressions, whose own calls are guarded;
	// convert only converts.
	out["try"] = tryfunc.TryFunc
	out["can"] = tryfunc.CanFunc
	out["convert"] = typeexpr.ConvertFunc
	for name, instead := range notNomad {
		out[name] = notNomadFunc(name, instead)
	}
	return out
}

// guard wraps f so that its result is bounded (see the top of this file).
func (p *parser) guard(name string, f function.Function, pre precheck) function.Function {
	return function.New(&function.Spec{
		Description: f.Description(),
		Params:      f.Params(),
		VarParam:    f.VarParam(),
		Type:        func(args []cty.Value) (cty.Type, error) { return f.ReturnTypeForValues(args) },
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if pre != nil {
				for _, a := range args {
					if !a.IsWhollyKnown() {
						return f.Call(args)
					}
				}
				if err := pre(args); err != nil {
					return cty.NilVal, err
				}
			}
			v, err := f.Call(args)
			if err != nil {
				return v, err
			}
			if err := p.spend(v, fmt.Sprintf("the result of %s()", name)); err != nil {
				return cty.NilVal, err
			}
			return v, nil
		},
	})
}

// spend charges v against the parse's budget for computed values.
func (p *parser) spend(v cty.Value, what string) error {
	if err := checkValue(v, what); err != nil {
		return err
	}
	n, _ := valueSize(v, maxValueBytes)
	p.spent += n
	if p.spent > maxFunctionBytes {
		return fmt.Errorf("the function calls of this job file build more than %d bytes in all (limit maxFunctionBytes)", maxFunctionBytes)
	}
	return nil
}

// checkValue refuses a value over maxValueBytes, nested deeper than
// structs.MaxNestingDepth or holding more than structs.MaxCollectionElements
// elements in one collection.
func checkValue(v cty.Value, what string) error {
	if n, ok := valueSize(v, maxValueBytes); !ok {
		return fmt.Errorf("%s is larger than %d bytes (at least %d; limit maxValueBytes)", what, maxValueBytes, n)
	}
	if d := valueDepth(v, structs.MaxNestingDepth); d > structs.MaxNestingDepth {
		return fmt.Errorf("%s nests more than %d levels; exceeds limit %s", what, structs.MaxNestingDepth, structs.DepthLimit())
	}
	if n := maxLength(v); n > structs.MaxCollectionElements {
		return fmt.Errorf("%s holds a collection of %d elements; exceeds limit %s", what, n, structs.ElementsLimit())
	}
	return nil
}

// valueSize is an estimate of the bytes v holds: its strings, 8 bytes per
// number or bool and 16 per element or attribute. It stops counting past
// limit, reporting ok false.
func valueSize(v cty.Value, limit int) (n int, ok bool) {
	var walk func(v cty.Value) bool
	walk = func(v cty.Value) bool {
		if n > limit {
			return false
		}
		if v.IsMarked() {
			v, _ = v.Unmark()
		}
		if !v.IsKnown() || v.IsNull() {
			n += 8
			return true
		}
		ty := v.Type()
		switch {
		case ty == cty.String:
			n += len(v.AsString())
		case ty.IsPrimitiveType():
			n += 8
		case ty.IsCollectionType() || ty.IsTupleType() || ty.IsObjectType():
			for it := v.ElementIterator(); it.Next(); {
				k, el := it.Element()
				n += 16
				if k.Type() == cty.String {
					n += len(k.AsString())
				}
				if !walk(el) {
					return false
				}
			}
		default:
			n += 16
		}
		return n <= limit
	}
	ok = walk(v)
	return n, ok
}

// valueDepth is how deep v's collections nest, counting stops past limit.
func valueDepth(v cty.Value, limit int) int {
	if v.IsMarked() {
		v, _ = v.Unmark()
	}
	if !v.IsKnown() || v.IsNull() {
		return 0
	}
	ty := v.Type()
	if !(ty.IsCollectionType() || ty.IsTupleType() || ty.IsObjectType()) {
		return 0
	}
	if limit < 0 {
		return 1
	}
	d := 0
	for it := v.ElementIterator(); it.Next(); {
		_, el := it.Element()
		d = max(d, valueDepth(el, limit-1))
		if d > limit {
			break
		}
	}
	return d + 1
}

// maxLength is the largest element count of v or a collection inside it.
func maxLength(v cty.Value) int {
	if v.IsMarked() {
		v, _ = v.Unmark()
	}
	if !v.IsKnown() || v.IsNull() {
		return 0
	}
	ty := v.Type()
	if !(ty.IsCollectionType() || ty.IsTupleType() || ty.IsObjectType()) {
		return 0
	}
	n := v.LengthInt()
	for it := v.ElementIterator(); it.Next(); {
		_, el := it.Element()
		n = max(n, maxLength(el))
	}
	return n
}

func tooLarge(what string, n float64) error {
	return fmt.Errorf("%s would be about %.0f bytes or elements; a function result may be at most %d bytes and %d elements",
		what, n, maxValueBytes, structs.MaxCollectionElements)
}

func num(v cty.Value) float64 {
	f, _ := v.AsBigFloat().Float64()
	return f
}

// checkRange refuses a range of more than structs.MaxCollectionElements.
func checkRange(args []cty.Value) error {
	start, limit, step := 0.0, 0.0, 1.0
	switch len(args) {
	case 1:
		limit = num(args[0])
	case 2:
		start, limit = num(args[0]), num(args[1])
	case 3:
		start, limit, step = num(args[0]), num(args[1]), num(args[2])
	default:
		return nil // the function reports its own arity error
	}
	if step == 0 {
		return nil
	}
	if n := math.Ceil((limit - start) / step); n > structs.MaxCollectionElements || math.IsNaN(n) {
		return tooLarge("this range", n)
	}
	return nil
}

func checkSetProduct(args []cty.Value) error {
	n := 1.0
	for _, a := range args {
		if a.IsNull() || !a.CanIterateElements() {
			return nil
		}
		n *= float64(a.LengthInt())
	}
	if n > structs.MaxCollectionElements {
		return tooLarge("this product", n)
	}
	return nil
}

func checkJoin(args []cty.Value) error {
	if len(args) == 0 || args[0].IsNull() || args[0].Type() != cty.String {
		return nil
	}
	sep := float64(len(args[0].AsString()))
	n := 0.0
	for _, l := range args[1:] {
		if !l.IsNull() && l.CanIterateElements() {
			n += float64(l.LengthInt())
		}
	}
	if total := sep * n; total > maxValueBytes {
		return tooLarge("this join", total)
	}
	return nil
}

func strArgs(args []cty.Value, n int) ([]string, bool) {
	if len(args) < n {
		return nil, false
	}
	out := make([]string, n)
	for i := range n {
		if args[i].IsNull() || args[i].Type() != cty.String {
			return nil, false
		}
		out[i] = args[i].AsString()
	}
	return out, true
}

func checkReplace(args []cty.Value) error {
	s, ok := strArgs(args, 3)
	if !ok {
		return nil
	}
	var count int
	if s[1] == "" {
		count = utf8.RuneCountInString(s[0]) + 1
	} else {
		count = strings.Count(s[0], s[1])
	}
	if n := float64(len(s[0])) + float64(count)*float64(len(s[2])); n > maxValueBytes {
		return tooLarge("this replace", n)
	}
	return nil
}

func checkRegexReplace(args []cty.Value) error {
	s, ok := strArgs(args, 3)
	if !ok {
		return nil
	}
	re, err := regexp.Compile(s[1])
	if err != nil {
		return nil // the function reports it
	}
	count := len(re.FindAllStringIndex(s[0], -1))
	// Each $ of the replacement may expand to the whole input.
	per := float64(len(s[2])) + float64(strings.Count(s[2], "$"))*float64(len(s[0]))
	if n := float64(len(s[0])) + float64(count)*per; n > maxValueBytes {
		return tooLarge("this regex_replace", n)
	}
	return nil
}

// maxFormatWidth bounds the width and precision of format verbs: "%99999999d"
// would otherwise build a string of that size from one byte.
const maxFormatWidth = 10_000

func checkFormatWidths(f string) error {
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		for i++; i < len(f); i++ {
			c := f[i]
			if c >= '0' && c <= '9' {
				j := i
				for j < len(f) && f[j] >= '0' && f[j] <= '9' {
					j++
				}
				if j-i > 6 || atoi(f[i:j]) > maxFormatWidth {
					return fmt.Errorf("format verb width or precision %s exceeds the limit of %d", f[i:j], maxFormatWidth)
				}
				i = j - 1
				continue
			}
			if (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '%' {
				break
			}
		}
	}
	return nil
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func checkFormat(args []cty.Value) error {
	if s, ok := strArgs(args, 1); ok {
		return checkFormatWidths(s[0])
	}
	return nil
}

func checkFormatList(args []cty.Value) error {
	s, ok := strArgs(args, 1)
	if !ok {
		return nil
	}
	if err := checkFormatWidths(s[0]); err != nil {
		return err
	}
	n := 1.0
	for _, a := range args[1:] {
		if !a.IsNull() && a.CanIterateElements() && !a.Type().IsObjectType() && !a.Type().IsMapType() {
			n = max(n, float64(a.LengthInt()))
		}
	}
	if total := n * float64(len(s[0])); total > maxValueBytes {
		return tooLarge("this formatlist", total)
	}
	return nil
}

func checkIndent(args []cty.Value) error {
	if len(args) != 2 || args[0].IsNull() || args[1].IsNull() || args[1].Type() != cty.String {
		return nil
	}
	spaces := num(args[0])
	lines := float64(strings.Count(args[1].AsString(), "\n"))
	if n := spaces*lines + float64(len(args[1].AsString())); n > maxValueBytes || spaces > maxValueBytes {
		return tooLarge("this indent", n)
	}
	return nil
}

// yamlAlias finds an alias (*name): with anchors, a short YAML document
// expands exponentially as it is decoded.
var yamlAlias = regexp.MustCompile(`(^|[\s\[\{,:\-?])\*[^\s*]`)

func checkYAML(args []cty.Value) error {
	if s, ok := strArgs(args, 1); ok && yamlAlias.MatchString(s[0]) {
		return fmt.Errorf("YAML aliases (*name) are not supported: they can expand a short document without bound")
	}
	return nil
}

func refusedFunc(name string) function.Function {
	return function.New(&function.Spec{
		VarParam: &function.Parameter{Name: "args", Type: cty.DynamicPseudoType, AllowNull: true, AllowDynamicType: true},
		Type:     function.StaticReturnType(cty.String),
		Impl: func([]cty.Value, cty.Type) (cty.Value, error) {
			return cty.NilVal, fmt.Errorf("%s() is not available: drover parses job files without reading files (as Nomad's API parse does); put the content in the job file or a variable", name)
		},
	})
}

// lengthFunc is Nomad 1.6's length: the element count of a list, set,
// tuple, map or object. Like Nomad's, it refuses a string, so a file that
// parses here parses under Nomad's CLI too; strlen counts characters.
var lengthFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "collection", Type: cty.DynamicPseudoType, AllowDynamicType: true, AllowUnknown: true, AllowMarked: true}},
	Type: func(args []cty.Value) (cty.Type, error) {
		ty := args[0].Type()
		if ty == cty.DynamicPseudoType || ty.IsCollectionType() || ty.IsTupleType() || ty.IsObjectType() {
			return cty.Number, nil
		}
		if ty == cty.String {
			return cty.NilType, function.NewArgErrorf(0, "length takes a list, set, tuple, map or object, not a string (as in Nomad); use strlen to count a string's characters")
		}
		return cty.NilType, function.NewArgErrorf(0, "length takes a list, set, tuple, map or object, not %s", ty.FriendlyName())
	},
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return stdlib.Length(args[0])
	},
})

func stringFunc(f func(string) (string, error)) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "str", Type: cty.String}},
		Type:   function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			s, err := f(args[0].AsString())
			if err != nil {
				return cty.NilVal, err
			}
			return cty.StringVal(s), nil
		},
	})
}

var (
	base64EncodeFunc = stringFunc(func(s string) (string, error) {
		return base64.StdEncoding.EncodeToString([]byte(s)), nil
	})
	base64DecodeFunc = stringFunc(func(s string) (string, error) {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return "", fmt.Errorf("not valid base64: %v", err)
		}
		if !utf8.Valid(b) {
			return "", fmt.Errorf("the decoded bytes are not valid UTF-8")
		}
		return string(b), nil
	})
	urlEncodeFunc = stringFunc(func(s string) (string, error) { return url.QueryEscape(s), nil })
)

func hashFunc(h func() hash.Hash) function.Function {
	return stringFunc(func(s string) (string, error) {
		d := h()
		d.Write([]byte(s))
		return hex.EncodeToString(d.Sum(nil)), nil
	})
}

var uuidV4Func = function.New(&function.Spec{
	Type: function.StaticReturnType(cty.String),
	Impl: func([]cty.Value, cty.Type) (cty.Value, error) {
		return cty.StringVal(uuid.NewString()), nil
	},
})

// uuidV5Func is uuidv5(namespace, name); the namespace is "dns", "url",
// "oid", "x500" or a UUID.
var uuidV5Func = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "namespace", Type: cty.String}, {Name: "name", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		var ns uuid.UUID
		switch s := args[0].AsString(); s {
		case "dns":
			ns = uuid.NameSpaceDNS
		case "url":
			ns = uuid.NameSpaceURL
		case "oid":
			ns = uuid.NameSpaceOID
		case "x500":
			ns = uuid.NameSpaceX500
		default:
			var err error
			if ns, err = uuid.Parse(s); err != nil {
				return cty.NilVal, fmt.Errorf("namespace %q is not dns, url, oid, x500 or a UUID", s)
			}
		}
		return cty.StringVal(uuid.NewSHA1(ns, []byte(args[1].AsString())).String()), nil
	},
})
