package agent

import (
	"reflect"
	"testing"
)

// fill sets every field reachable from v to a non-zero value: strings,
// numbers, booleans, slices and maps of one element, pointers to filled
// structs. Interfaces (a plugin's hcl.Body) are left alone.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem())
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}

// TestMergeKeepsEveryField: a config file's every setting survives
// LoadConfig, which merges each file onto an empty (or -dev) config. A
// field Merge forgets is silently ignored on every agent: that happened to
// http_max_body_bytes and the server's scheduler_call_timeout,
// max_allocs_per_job and max_allocs_per_eval.
func TestMergeKeepsEveryField(t *testing.T) {
	var o Config
	fill(reflect.ValueOf(&o).Elem())
	o.DevMode = false // set by LoadConfig, not by a file
	got := (&Config{}).Merge(&o)
	want := reflect.ValueOf(o)
	have := reflect.ValueOf(*got)
	for i := range want.NumField() {
		f := want.Type().Field(i)
		if !reflect.DeepEqual(have.Field(i).Interface(), want.Field(i).Interface()) {
			t.Errorf("Merge onto an empty config loses %s: got %+v, want %+v", f.Name,
				reflect.Indirect(have.Field(i)).Interface(), reflect.Indirect(want.Field(i)).Interface())
		}
	}
}
