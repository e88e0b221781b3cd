package structs

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Value helpers of the job diff: how a field's value is classified,
// flattened and shown.

// flattenValue flattens a map or list into "prefix[key]" / "prefix[i]"
// keys (bare key at the top when prefix is empty) with primitive values.
func flattenValue(prefix string, v reflect.Value) map[string]string {
	out := map[string]string{}
	if !v.IsValid() {
		return out
	}
	var walk func(key string, v reflect.Value)
	walk = func(key string, v reflect.Value) {
		for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) {
			if v.IsNil() {
				return
			}
			v = v.Elem()
		}
		if !v.IsValid() {
			return
		}
		sub := func(k string) string {
			if key == "" {
				return k
			}
			return key + "[" + k + "]"
		}
		switch v.Kind() {
		case reflect.Map:
			for _, mk := range v.MapKeys() {
				walk(sub(fmt.Sprint(mk.Interface())), v.MapIndex(mk))
			}
		case reflect.Slice, reflect.Array:
			for i := 0; i < v.Len(); i++ {
				walk(sub(strconv.Itoa(i)), v.Index(i))
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if v.Type().Field(i).IsExported() {
					walk(sub(v.Type().Field(i).Name), v.Field(i))
				}
			}
		default:
			out[key] = primitiveString(v)
		}
	}
	walk(prefix, v)
	return out
}

func isPrimitive(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

func isStructish(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}

func deref(v reflect.Value) reflect.Value {
	for v.IsValid() && v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

// primitiveString is a value's string form in a diff: durations as their
// nanoseconds, as Nomad shows them.
func primitiveString(v reflect.Value) string {
	v = deref(v)
	if !v.IsValid() {
		return ""
	}
	for v.Kind() == reflect.Interface {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	}
	return fmt.Sprint(v.Interface())
}

// singular names one block of a list field: Constraints → Constraint.
func singular(name string) string {
	switch {
	case strings.HasSuffix(name, "ies"):
		return strings.TrimSuffix(name, "ies") + "y"
	case strings.HasSuffix(name, "s"):
		return strings.TrimSuffix(name, "s")
	}
	return name
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
