package base

import (
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/basepb"
)

type limit struct {
	Max  int    `hcl:"max" doc:"The most."`
	Kind string `hcl:"kind,optional"`
}

type volume struct {
	Path     string `hcl:"path"`
	ReadOnly bool   `hcl:"read_only,optional"`
}

type retry struct {
	Attempts uint8         `hcl:"attempts,optional"`
	Delay    time.Duration `hcl:"delay,optional"`
}

type settings struct {
	PageSize int               `hcl:"page_size,optional" doc:"Objects per page."`
	Mode     string            `hcl:"mode"`
	Ratio    float64           `hcl:"ratio,optional"`
	Enabled  bool              `hcl:"enabled,optional"`
	Timeout  time.Duration     `hcl:"timeout,optional"`
	Tags     []string          `hcl:"tags,optional"`
	Labels   map[string]string `hcl:"labels,optional"`
	Max      *int64            `hcl:"max,optional"`
	Retry    retry             `hcl:"retry,block,optional"`
	Backoff  *retry            `hcl:"backoff,block,optional"`
	Limits   []limit           `hcl:"limit,block"`
	Volumes  map[string]volume `hcl:"volume,block"`
	Internal string            `hcl:"-"`
	cache    int               // unexported: not part of the config, kept from the defaults
}

var testDefaults = settings{
	PageSize: 100, Ratio: 0.5, Timeout: 90 * time.Second, Tags: []string{"a"},
	Retry: retry{Attempts: 3, Delay: time.Second}, Backoff: &retry{Attempts: 2},
	Internal: "kept", cache: 7,
}

func validateSettings(s settings) []*basepb.FieldError {
	var errs []*basepb.FieldError
	if s.PageSize < 1 {
		errs = append(errs, FieldErrorf("page_size", "must be at least 1"))
	}
	for i, l := range s.Limits {
		if l.Max < 0 {
			errs = append(errs, FieldErrorf(PathName(PathIndex("limit", i), "max"), "must not be negative"))
		}
	}
	for name, v := range s.Volumes {
		if !strings.HasPrefix(v.Path, "/") {
			errs = append(errs, FieldErrorf(PathName(PathLabel("volume", name), "path"), "must be absolute"))
		}
	}
	return errs
}

func newTestConfig(t *testing.T) *Config[settings] {
	t.Helper()
	c, err := NewConfig(testDefaults, validateSettings)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfigSpec(t *testing.T) {
	c := newTestConfig(t)
	want := &basepb.Spec{
		Attributes: []*basepb.Attribute{
			{Name: "page_size", Type: "number", DefaultJson: "100", Description: "Objects per page."},
			{Name: "mode", Type: "string", Required: true},
			{Name: "ratio", Type: "number", DefaultJson: "0.5"},
			{Name: "enabled", Type: "bool", DefaultJson: "false"},
			{Name: "timeout", Type: "string", DefaultJson: `"1m30s"`},
			{Name: "tags", Type: "list(string)", DefaultJson: `["a"]`},
			{Name: "labels", Type: "map(string)"},
			{Name: "max", Type: "number"},
		},
		Blocks: []*basepb.Block{
			{Name: "retry", Body: &basepb.Spec{Attributes: []*basepb.Attribute{
				{Name: "attempts", Type: "number", DefaultJson: "3"},
				{Name: "delay", Type: "string", DefaultJson: `"1s"`},
			}}},
			{Name: "backoff", Body: &basepb.Spec{Attributes: []*basepb.Attribute{
				{Name: "attempts", Type: "number", DefaultJson: "2"},
				{Name: "delay", Type: "string", DefaultJson: `"0s"`},
			}}},
			{Name: "limit", Nesting: basepb.Block_NESTING_LIST, Body: &basepb.Spec{Attributes: []*basepb.Attribute{
				{Name: "max", Type: "number", Required: true, Description: "The most."},
				{Name: "kind", Type: "string", DefaultJson: `""`},
			}}},
			{Name: "volume", Nesting: basepb.Block_NESTING_MAP, Body: &basepb.Spec{Attributes: []*basepb.Attribute{
				{Name: "path", Type: "string", Required: true},
				{Name: "read_only", Type: "bool", DefaultJson: "false"},
			}}},
		},
	}
	if got := c.Spec(); !proto.Equal(got, want) {
		t.Fatalf("spec\n got %v\nwant %v", got, want)
	}
	if err := CheckSpec(c.Spec()); err != nil {
		t.Fatal(err)
	}
	if c.Get().Internal != "kept" || c.Get().PageSize != 100 {
		t.Fatalf("before SetJSON Get is %+v, want the defaults", c.Get())
	}
}

// TestConfigRoundTrip is the whole path: the schema NewConfig derives, an
// HCL body decoded against it by the agent's Decode, SetJSON, Get.
func TestConfigRoundTrip(t *testing.T) {
	three := int64(3)
	cases := []struct {
		name, src string
		want      settings
	}{
		{"defaults", `mode = "fast"`, func() settings {
			s := testDefaults
			s.Mode = "fast"
			s.Backoff = nil // an absent pointer block is nil
			return s
		}()},
		{"everything", `
mode = "safe"
page_size = 7
ratio = 1.25
enabled = true
timeout = "2h"
tags = []
labels = { team = "x" }
max = 3
retry { attempts = 9 }
backoff { delay = "5ms" }
limit { max = 1 }
limit {
  max = 2
  kind = "cpu"
}
volume "data" { path = "/srv" }
`, settings{
			PageSize: 7, Mode: "safe", Ratio: 1.25, Enabled: true, Timeout: 2 * time.Hour,
			Labels: map[string]string{"team": "x"}, Max: &three,
			Retry: retry{Attempts: 9, Delay: time.Second}, Backoff: &retry{Attempts: 2, Delay: 5 * time.Millisecond},
			Limits:   []limit{{Max: 1}, {Max: 2, Kind: "cpu"}},
			Volumes:  map[string]volume{"data": {Path: "/srv"}},
			Internal: "kept", cache: 7,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestConfig(t)
			js, diags := Decode(c.Spec(), parse(t, tc.src))
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			errs, err := c.SetJSON(js, "test-plugin")
			if err != nil || len(errs) > 0 {
				t.Fatalf("SetJSON(%s): %v %v", js, FieldErrors(errs), err)
			}
			if got := c.Get(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Get\n got %+v\nwant %+v", got, tc.want)
			}
			if c.PluginName() != "test-plugin" {
				t.Fatalf("PluginName %q", c.PluginName())
			}
		})
	}
}

func TestConfigRefused(t *testing.T) {
	cases := []struct {
		name, json string
		paths      []string // the field errors' paths, in order
		message    string   // in the first error
	}{
		{"unknown top", `{"mode":"x","bogus":1}`, []string{"bogus"}, "is not a field"},
		{"unknown nested", `{"mode":"x","limit":[{"max":1,"mx":2}]}`, []string{"limit[0].mx"}, "is not a field"},
		{"unknown in map block", `{"mode":"x","volume":{"d":{"path":"/p","pth":1}}}`, []string{`volume["d"].pth`}, "is not a field"},
		{"required missing", `{"page_size":3}`, []string{"mode"}, "is required"},
		{"required null", `{"mode":null}`, []string{"mode"}, "is required"},
		{"nested required", `{"mode":"x","limit":[{"kind":"a"}]}`, []string{"limit[0].max"}, "is required"},
		{"wrong type", `{"mode":5}`, []string{"mode"}, "must be a string, not a number"},
		{"fraction for int", `{"mode":"x","page_size":1.5}`, []string{"page_size"}, "must be a whole number"},
		{"uint negative", `{"mode":"x","retry":{"attempts":-1}}`, []string{"retry.attempts"}, "must not be negative"},
		{"uint8 overflow", `{"mode":"x","retry":{"attempts":300}}`, []string{"retry.attempts"}, "must be at most 255"},
		{"bad duration", `{"mode":"x","timeout":"soon"}`, []string{"timeout"}, `must be a duration such as "30s"`},
		{"bad list elem", `{"mode":"x","tags":["a",1]}`, []string{"tags[1]"}, "must be a string"},
		{"bad map elem", `{"mode":"x","labels":{"k":true}}`, []string{`labels["k"]`}, "must be a string"},
		{"null list elem", `{"mode":"x","tags":[null]}`, []string{"tags[0]"}, "must not be null"},
		{"validate top", `{"mode":"x","page_size":0}`, []string{"page_size"}, "must be at least 1"},
		{"validate list", `{"mode":"x","limit":[{"max":1},{"max":-1}]}`, []string{"limit[1].max"}, "must not be negative"},
		{"validate map", `{"mode":"x","volume":{"v":{"path":"rel"}}}`, []string{`volume["v"].path`}, "must be absolute"},
		{"not an object", `[1]`, []string{""}, "must be an object"},
		{"block not object", `{"mode":"x","retry":3}`, []string{"retry"}, "must be a block"},
		{"several", `{"mode":1,"zzz":1,"page_size":"x"}`, []string{"zzz", "page_size", "mode"}, "is not a field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestConfig(t)
			before := c.Get()
			errs, err := c.SetJSON([]byte(tc.json), "p")
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, e := range errs {
				paths = append(paths, e.GetPath())
			}
			if !reflect.DeepEqual(paths, tc.paths) {
				t.Fatalf("paths %q, want %q (%v)", paths, tc.paths, FieldErrors(errs))
			}
			if !strings.Contains(errs[0].GetMessage(), tc.message) {
				t.Fatalf("message %q, want %q", errs[0].GetMessage(), tc.message)
			}
			if !reflect.DeepEqual(c.Get(), before) {
				t.Fatal("a refused config was put in force")
			}
		})
	}
	c := newTestConfig(t)
	for _, bad := range []string{`{`, `{} {}`, ``} {
		if _, err := c.SetJSON([]byte(bad), "p"); err == nil {
			t.Errorf("SetJSON(%q) judged it; want an error", bad)
		}
	}
}

// TestConfigPathsFound checks that the paths of SetJSON's field errors are
// ones FieldRange finds in the HCL the agent decoded.
func TestConfigPathsFound(t *testing.T) {
	c := newTestConfig(t)
	src := "mode = \"x\"\nlimit { max = 1 }\nlimit { max = -4 }\nvolume \"d\" {\n  path = \"rel\"\n}\n"
	body := parse(t, src)
	js, diags := Decode(c.Spec(), body)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	errs, err := c.SetJSON(js, "p")
	if err != nil || len(errs) != 2 {
		t.Fatalf("errs %v %v, want two", FieldErrors(errs), err)
	}
	want := map[string]string{"limit[1].max": "agent.hcl:3,15-17", `volume["d"].path`: "agent.hcl:5,10-15"}
	for _, e := range errs {
		got := FieldRange(c.Spec(), body, e.GetPath(), hcl.Range{Filename: "def"}).String()
		if got != want[e.GetPath()] {
			t.Errorf("FieldRange(%s) = %s, want %s", e.GetPath(), got, want[e.GetPath()])
		}
	}
}

func TestNewConfigRefuses(t *testing.T) {
	type untagged struct{ A int }
	type badOpt struct {
		A int `hcl:"a,opt"`
	}
	type reqDefault struct {
		A int `hcl:"a"`
	}
	type structAttr struct {
		A struct{ B int } `hcl:"a"`
	}
	type blockDefault struct {
		L []struct {
			B int `hcl:"b"`
		} `hcl:"l,block"`
	}
	type badType struct {
		C chan int `hcl:"c"`
	}
	type intMap struct {
		M map[int]string `hcl:"m,optional"`
	}
	type dup struct {
		A int `hcl:"a,optional"`
		B int `hcl:"a,optional"`
	}
	type badName struct {
		A int `hcl:"a b,optional"`
	}
	type optional struct {
		N int `hcl:"n,optional"`
	}
	cases := []struct {
		name string
		new  func() error
		want string
	}{
		{"untagged", func() error { _, err := NewConfig(untagged{}, nil); return err }, "untagged.A has no hcl tag"},
		{"bad option", func() error { _, err := NewConfig(badOpt{}, nil); return err }, `unknown hcl tag option "opt"`},
		{"required default", func() error { _, err := NewConfig(reqDefault{A: 1}, nil); return err }, "is required, so it takes no default"},
		{"struct attribute", func() error { _, err := NewConfig(structAttr{}, nil); return err }, "structs are blocks"},
		{"block default", func() error {
			v := blockDefault{}
			v.L = append(v.L, struct {
				B int `hcl:"b"`
			}{})
			_, err := NewConfig(v, nil)
			return err
		}, "blocks take no default"},
		{"bad type", func() error { _, err := NewConfig(badType{}, nil); return err }, "is not a config type"},
		{"int map", func() error { _, err := NewConfig(intMap{}, nil); return err }, "must have string keys"},
		{"dup", func() error { _, err := NewConfig(dup{}, nil); return err }, `name "a" is used twice`},
		{"bad name", func() error { _, err := NewConfig(badName{}, nil); return err }, "not a valid HCL identifier"},
		{"not struct", func() error { _, err := NewConfig(3, nil); return err }, "is not a struct"},
		{"defaults refused", func() error {
			_, err := NewConfig(optional{}, func(o optional) []*basepb.FieldError {
				if o.N == 0 {
					return []*basepb.FieldError{FieldErrorf("n", "must be set")}
				}
				return nil
			})
			return err
		}, "the defaults, in force when the config block is empty, are refused: n: must be set"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.new()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestConfigConcurrent runs Get against SetJSON under -race: the swap is
// atomic and readers see one whole config or the other.
func TestConfigConcurrent(t *testing.T) {
	c := newTestConfig(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if s := c.Get(); s.PageSize != 100 && s.PageSize != 5 {
				t.Errorf("Get saw page_size %d", s.PageSize)
				return
			}
		}
	}()
	for i := 0; i < 200; i++ {
		js := `{"mode":"x","page_size":5}`
		if i%2 == 1 {
			js = `{"mode":"x"}`
		}
		if errs, err := c.SetJSON([]byte(js), "p"); err != nil || len(errs) > 0 {
			t.Fatal(errs, err)
		}
	}
	close(stop)
	wg.Wait()
}

func TestPaths(t *testing.T) {
	if got := PathName(PathLabel(PathIndex("a", 2), `x"]`), "b"); got != `a[2]["x\"]"].b` {
		t.Fatalf("path %s", got)
	}
	steps, err := splitPath(PathName(PathLabel("v", `x"]`), "p"))
	if err != nil || len(steps) != 3 || *steps[1].label != `x"]` {
		t.Fatalf("splitPath: %v %v", steps, err)
	}
}
