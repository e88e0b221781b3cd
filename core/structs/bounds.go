package structs

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Field bounds of submitted objects. A job is copied into every allocation
// of it, every list answer that shows it and every version kept of it, so
// a field that is not bounded is a multiplier for whoever sends it. Every
// string, list and map reachable from a submitted job (and from the other
// requests that store job-shaped input: dispatch, scaling) is held to the
// bound of its kind by one reflective walk (CheckBounds); a field declares
// its kind in a `bound:"…"` struct tag, and an untagged field is free
// text. Nomad documents no such limits; these are far above what real
// jobs use.
const (
	// MaxIdentifierBytes bounds names and keys: IDs, names of jobs,
	// groups, tasks, services, ports and volumes, namespaces, regions,
	// datacenters, drivers, and every map key (meta, env, …). Nomad holds
	// namespace and ACL policy names to 128 characters.
	MaxIdentifierBytes = 128

	// MaxChildJobIDBytes bounds the ID of a derived job (one with a
	// ParentID): the parent's ID (MaxIdentifierBytes) with the
	// "/dispatch-<prefix>-<time>-<uuid>" or "/periodic-<time>" suffix the
	// server appends, which MaxDispatchPrefixBytes keeps inside it.
	MaxChildJobIDBytes = 2 * MaxIdentifierBytes

	// MaxDispatchPrefixBytes bounds a dispatch's IdPrefixTemplate, so that
	// a child of a dispatched periodic job stays within MaxChildJobIDBytes.
	MaxDispatchPrefixBytes = 64

	// MaxTextBytes bounds free text: meta and env values, constraint
	// targets, tags, commands and arguments, URLs, paths.
	MaxTextBytes = 8 << 10

	// MaxBlobBytes bounds the strings of free-form blocks (a task's driver
	// config, a service's connect block, a scaling policy). A template's
	// embedded data has its own, MaxTemplateBytes. 1 MiB: Nomad's own API
	// tests give mock_driver a stdout_string of about 470 KB (TestFS_Logs);
	// a whole job stays within the request body bound
	// (DefaultMaxRequestBodyBytes, 8 MiB).
	MaxBlobBytes = 1 << 20

	// MaxStoredPayloadBytes bounds the payload a job carries: the dispatch
	// payload (DispatchPayloadSizeLimit) as snappy compresses it, whose
	// worst case is 32 + n + n/6 bytes.
	MaxStoredPayloadBytes = 32 + DispatchPayloadSizeLimit + DispatchPayloadSizeLimit/6

	// MaxEntries bounds each list and map of a job (groups, tasks, meta,
	// env, constraints, tags, …). A free-form block's lists and maps take
	// MaxCollectionElements, the decoders' bound.
	MaxEntries = 1024

	// maxBoundErrors is how many fields over their bound one error lists.
	maxBoundErrors = 10
)

// boundKind is the kind of value a field holds; it picks the bounds.
type boundKind uint8

const (
	kindText    boundKind = iota // default: MaxTextBytes, MaxEntries
	kindID                       // "id": MaxIdentifierBytes
	kindJobID                    // "jobid": MaxIdentifierBytes, MaxChildJobIDBytes for a derived job
	kindBlob                     // "blob": MaxBlobBytes; free-form below it
	kindPayload                  // "payload": MaxStoredPayloadBytes
	kindSkip                     // "-": not walked (server-stamped, or checked by its own rule)
)

// boundSpec is a parsed `bound` tag: a kind and, in place of the kind's
// bounds, max=<Name> on the field's entries (a list or map) and
// bytes=<Name> on its strings, Name being one of boundLimits.
type boundSpec struct {
	kind  boundKind
	max   string // entries
	bytes string // bytes of each string (or of a []byte)
}

// boundLimits are the limits a `bound` tag may name, besides its kind's.
var boundLimits = map[string]int{
	"MaxIdentifierBytes":     MaxIdentifierBytes,
	"MaxDispatchPrefixBytes": MaxDispatchPrefixBytes,
	"MaxUIDescriptionBytes":  MaxUIDescriptionBytes,
	"MaxUILinks":             MaxUILinks,
	"MaxUILinkBytes":         MaxUILinkBytes,
	"MaxTaskKindBytes":       MaxTaskKindBytes,
	"MaxActionsPerTask":      MaxActionsPerTask,
	"MaxActionNameBytes":     MaxActionNameBytes,
	"MaxActionCommandBytes":  MaxActionCommandBytes,
	"MaxActionArgs":          MaxActionArgs,
	"MaxActionArgBytes":      MaxActionArgBytes,
	"MaxDevicesPerTask":      MaxDevicesPerTask,
	"MaxCronLength":          MaxCronLength,
	"MaxTemplateBytes":       MaxTemplateBytes,
	"MaxTemplatesPerTask":    MaxTemplatesPerTask,
	"MaxArtifactsPerTask":    MaxArtifactsPerTask,
}

func parseBoundTag(tag string) boundSpec {
	var s boundSpec
	for _, part := range strings.Split(tag, ",") {
		switch part {
		case "", "text":
		case "id":
			s.kind = kindID
		case "jobid":
			s.kind = kindJobID
		case "blob":
			s.kind = kindBlob
		case "payload":
			s.kind = kindPayload
		case "-":
			s.kind = kindSkip
		default:
			key, name, _ := strings.Cut(part, "=")
			if _, ok := boundLimits[name]; !ok || (key != "max" && key != "bytes") {
				panic(fmt.Sprintf("structs: bad bound tag %q", tag)) // a programming error: TestBoundTags parses every tag
			}
			if key == "max" {
				s.max = name
			} else {
				s.bytes = name
			}
		}
	}
	return s
}

// boundField is an exported field of a struct and its spec.
type boundField struct {
	index int
	name  string
	spec  boundSpec
}

var boundFields sync.Map // reflect.Type → []boundField

func fieldsOf(t reflect.Type) []boundField {
	if f, ok := boundFields.Load(t); ok {
		return f.([]boundField)
	}
	var out []boundField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		spec := parseBoundTag(f.Tag.Get("bound"))
		if spec.kind == kindSkip {
			continue
		}
		out = append(out, boundField{index: i, name: f.Name, spec: spec})
	}
	boundFields.Store(t, out)
	return out
}

// boundsWalker collects the fields over their bounds.
type boundsWalker struct {
	errs  []string
	child bool // the root is a derived job: kindJobID takes MaxChildJobIDBytes
}

func (w *boundsWalker) bytesLimit(s boundSpec) (int, string) {
	if s.bytes != "" {
		return boundLimits[s.bytes], s.bytes
	}
	switch s.kind {
	case kindID:
		return MaxIdentifierBytes, "MaxIdentifierBytes"
	case kindJobID:
		if w.child {
			return MaxChildJobIDBytes, "MaxChildJobIDBytes"
		}
		return MaxIdentifierBytes, "MaxIdentifierBytes"
	case kindBlob:
		return MaxBlobBytes, "MaxBlobBytes"
	case kindPayload:
		return MaxStoredPayloadBytes, "MaxStoredPayloadBytes"
	}
	return MaxTextBytes, "MaxTextBytes"
}

func entriesLimit(s boundSpec) (int, string) {
	switch {
	case s.max != "":
		return boundLimits[s.max], s.max
	case s.kind == kindBlob:
		return MaxCollectionElements, "MaxCollectionElements"
	}
	return MaxEntries, "MaxEntries"
}

// keyLimit bounds a map key: an identifier, or free text inside a
// free-form block (a driver's labels, say).
func keyLimit(s boundSpec) (int, string) {
	if s.kind == kindBlob {
		return MaxTextBytes, "MaxTextBytes"
	}
	return MaxIdentifierBytes, "MaxIdentifierBytes"
}

// over records a field over its bound: `<path>: <n> <unit>; exceeds limit
// <name> (<limit>)`.
func (w *boundsWalker) over(path string, n int, unit string, limit int, name string) {
	w.errs = append(w.errs, fmt.Sprintf("%s: %d %s; exceeds limit %s (%d)", path, n, unit, name, limit))
}

// walk checks v, found at path, against spec; depth guards the recursion
// into free-form values, which the decoders bound already.
func (w *boundsWalker) walk(path string, v reflect.Value, spec boundSpec, depth int) {
	if depth > MaxDecodeDepth {
		w.errs = append(w.errs, fmt.Sprintf("%s: nests more than %d levels; exceeds limit %s", path, MaxDecodeDepth, DepthLimit()))
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			w.walk(path, v.Elem(), spec, depth+1)
		}
	case reflect.Struct:
		for _, f := range fieldsOf(v.Type()) {
			w.walk(path+"."+f.name, v.Field(f.index), f.spec, depth+1)
		}
	case reflect.String:
		if limit, name := w.bytesLimit(spec); v.Len() > limit {
			w.over(path, v.Len(), "bytes", limit, name)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if limit, name := w.bytesLimit(spec); v.Len() > limit {
				w.over(path, v.Len(), "bytes", limit, name)
			}
			return
		}
		if limit, name := entriesLimit(spec); v.Len() > limit {
			w.over(path, v.Len(), "entries", limit, name)
			return
		}
		for i := range v.Len() {
			w.walk(path+"["+strconv.Itoa(i)+"]", v.Index(i), spec, depth+1)
		}
	case reflect.Map:
		if limit, name := entriesLimit(spec); v.Len() > limit {
			w.over(path, v.Len(), "entries", limit, name)
			return
		}
		klimit, kname := keyLimit(spec)
		for it := v.MapRange(); it.Next(); {
			k := it.Key()
			for k.Kind() == reflect.Interface && !k.IsNil() {
				k = k.Elem()
			}
			at := path + "[" + fmt.Sprint(k.Interface()) + "]"
			if k.Kind() == reflect.String {
				at = path + "[" + shortQuote(k.String()) + "]"
				if k.Len() > klimit {
					w.over(at, k.Len(), "bytes in the key", klimit, kname)
				}
			}
			w.walk(at, it.Value(), spec, depth+1)
		}
	}
}

// shortQuote quotes s for an error, cut to a few dozen bytes: the value
// being refused may be a megabyte long.
func shortQuote(s string) string {
	const keep = 32
	if len(s) <= keep {
		return strconv.Quote(s)
	}
	cut := keep
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

// CheckBounds checks every string, list and map reachable from v (a
// pointer to a struct: a job, a dispatch or scaling request) against the
// bound its field declares, and returns a *ValidationError naming each
// field over its bound by its path from root (e.g.
// `Job.TaskGroups[0].Tasks[0].Env["PATH"]`) with the bound broken, or nil.
func CheckBounds(root string, v any) error {
	return checkBounds(root, v, false)
}

func checkBounds(root string, v any, child bool) error {
	w := boundsWalker{child: child}
	w.walk(root, reflect.ValueOf(v), boundSpec{}, 0)
	if len(w.errs) == 0 {
		return nil
	}
	// Map order is random: sort, so that the same input gets the same
	// error (and the same first maxBoundErrors).
	sort.Strings(w.errs)
	if n := len(w.errs); n > maxBoundErrors {
		w.errs = append(w.errs[:maxBoundErrors], fmt.Sprintf("and %d more fields over their bounds", n-maxBoundErrors))
	}
	return &ValidationError{Errors: w.errs}
}

// CheckBounds checks the job's fields against their bounds (see the
// package's CheckBounds). A derived job (a periodic or dispatched child,
// which has a ParentID) may have an ID of MaxChildJobIDBytes.
func (j *Job) CheckBounds() error {
	return checkBounds("Job", j, j.ParentID != "")
}
