package structs

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// CheckNoNilElements refuses a nil element of a typed list or map anywhere
// in v (a request struct), naming it by its path from root ("Job.TaskGroups[0]"):
// the code that walks a job's groups, tasks and constraints, or a plan's
// allocations, reads every element, and an absent element has no meaning.
// Free-form values (typed any, as a task's Config) may hold nils. The HTTP
// API runs it on every JSON body ("null"), the server on every Raft entry.
func CheckNoNilElements(v any) error {
	w := nilWalker{segs: make([]pathSeg, 0, 16)}
	return w.walk(reflect.ValueOf(v))
}

// pathSeg is one step of the path to the value being walked; the path is
// only rendered for an error, so the walk allocates nothing per element.
type pathSeg struct {
	name  string        // a field
	index int           // a list element, when key is invalid and name empty
	key   reflect.Value // a map key
}

type nilWalker struct{ segs []pathSeg }

func (w *nilWalker) path() string {
	var b strings.Builder
	for _, s := range w.segs {
		switch {
		case s.name != "":
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.name)
		case s.key.IsValid():
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, s.key.Interface())
		default:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		}
	}
	return b.String()
}

func (w *nilWalker) walk(v reflect.Value) error {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return w.walk(v.Elem())
	case reflect.Struct:
		for _, f := range walkFields(v.Type()) {
			w.segs = append(w.segs, pathSeg{name: f.name})
			err := w.walk(v.Field(f.index))
			w.segs = w.segs[:len(w.segs)-1]
			if err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if !mayHoldNull(v.Type()) {
			return nil
		}
		nilable := isNilable(v.Type().Elem())
		for i := 0; i < v.Len(); i++ {
			el := v.Index(i)
			w.segs = append(w.segs, pathSeg{index: i})
			var err error
			if nilable && el.IsNil() {
				err = fmt.Errorf("field %q: null is not allowed as an element", w.path())
			} else {
				err = w.walk(el)
			}
			w.segs = w.segs[:len(w.segs)-1]
			if err != nil {
				return err
			}
		}
	case reflect.Map:
		if !mayHoldNull(v.Type()) {
			return nil
		}
		nilable := isNilable(v.Type().Elem())
		iter := v.MapRange()
		for iter.Next() {
			el := iter.Value()
			w.segs = append(w.segs, pathSeg{key: iter.Key()})
			var err error
			if nilable && el.IsNil() {
				err = fmt.Errorf("field %q: null is not allowed as a value", w.path())
			} else {
				err = w.walk(el)
			}
			w.segs = w.segs[:len(w.segs)-1]
			if err != nil {
				return err
			}
		}
	}
	return nil
}

type walkField struct {
	index int
	name  string
}

// walkFields lists the fields of struct type t that may hold a nil
// element, memoized: request types are few and walked on every write.
func walkFields(t reflect.Type) []walkField {
	if v, ok := walkFieldsCache.Load(t); ok {
		return v.([]walkField)
	}
	var out []walkField
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); f.IsExported() && mayHoldNull(f.Type) {
			out = append(out, walkField{index: i, name: jsonName(f)})
		}
	}
	walkFieldsCache.Store(t, out)
	return out
}

var walkFieldsCache sync.Map

// isNilable reports whether elements of type t can be JSON null and are
// checked: pointers, slices and maps. Interfaces are free-form and skipped.
func isNilable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map:
		return true
	}
	return false
}

// mayHoldNull reports whether a value of type t can contain a null element
// somewhere below it, so that plain strings and numbers are not walked.
func mayHoldNull(t reflect.Type) bool {
	if v, ok := mayHoldNullCache.Load(t); ok {
		return v.(bool)
	}
	v := mayHoldNullSeen(t, map[reflect.Type]bool{})
	mayHoldNullCache.Store(t, v)
	return v
}

// mayHoldNullCache memoizes mayHoldNull per type: request types are few and
// walked on every write.
var mayHoldNullCache sync.Map

func mayHoldNullSeen(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer:
		return mayHoldNullSeen(t.Elem(), seen)
	case reflect.Slice, reflect.Array, reflect.Map:
		return isNilable(t.Elem()) || mayHoldNullSeen(t.Elem(), seen)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); f.IsExported() && mayHoldNullSeen(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

func jsonName(f reflect.StructField) string {
	if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" && tag != "-" {
		return tag
	}
	return f.Name
}
