package base

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/drover-org/drover/sdk/proto/basepb"
)

var testSpec = &basepb.Spec{
	Attributes: []*basepb.Attribute{
		{Name: "page_size", Type: "number", DefaultJson: "100"},
		{Name: "mode", Type: "string", Required: true},
		{Name: "tags", Type: "list(string)"},
	},
	Blocks: []*basepb.Block{
		{Name: "limit", Nesting: basepb.Block_NESTING_LIST, MaxItems: 2, Body: &basepb.Spec{
			Attributes: []*basepb.Attribute{{Name: "max", Type: "number", Required: true}},
		}},
		{Name: "volume", Nesting: basepb.Block_NESTING_MAP, Body: &basepb.Spec{
			Attributes: []*basepb.Attribute{{Name: "path", Type: "string"}},
		}},
	},
}

func parse(t *testing.T, src string) hcl.Body {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(src), "agent.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return f.Body
}

func TestDecode(t *testing.T) {
	cases := []struct {
		name, src, want, err string
	}{
		{"defaults", `mode = "x"`, `{"limit":[],"mode":"x","page_size":100,"tags":null,"volume":{}}`, ""},
		{"all", "mode = \"y\"\npage_size = \"7\"\ntags = [\"a\"]\nlimit { max = 1 }\nvolume \"d\" { path = \"/p\" }\n",
			`{"limit":[{"max":1}],"mode":"y","page_size":7,"tags":["a"],"volume":{"d":{"path":"/p"}}}`, ""},
		{"missing required", `page_size = 1`, "", `The argument "mode" is required`},
		{"unknown attribute", "mode = \"x\"\nbogus = 1\n", "", "agent.hcl:2,1-6: Unsupported argument"},
		{"wrong type", "mode = \"x\"\npage_size = \"many\"\n", "", "agent.hcl:2,13-19: Incorrect attribute value type"},
		{"too many blocks", "mode = \"x\"\nlimit { max = 1 }\nlimit { max = 2 }\nlimit { max = 3 }\n", "", "Too many limit blocks"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, diags := Decode(testSpec, parse(t, c.src))
			if c.err != "" {
				if !diags.HasErrors() || !strings.Contains(diags.Error(), c.err) {
					t.Fatalf("diags %v, want %q", diags, c.err)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if string(out) != c.want {
				t.Fatalf("got %s\nwant %s", out, c.want)
			}
		})
	}
}

func TestDecodeNoSpec(t *testing.T) {
	if out, diags := Decode(nil, nil); diags.HasErrors() || string(out) != "{}" {
		t.Fatalf("nil spec, nil body: %s %v", out, diags)
	}
	if _, diags := Decode(nil, parse(t, "x = 1\n")); !diags.HasErrors() {
		t.Fatal("a config for a plugin without a schema was accepted")
	}
}

func TestCheckSpec(t *testing.T) {
	cases := []struct {
		name string
		spec *basepb.Spec
		err  string
	}{
		{"ok", testSpec, ""},
		{"bad type", &basepb.Spec{Attributes: []*basepb.Attribute{{Name: "a", Type: "strung"}}}, `attribute a: type "strung"`},
		{"dup", &basepb.Spec{Attributes: []*basepb.Attribute{{Name: "a", Type: "string"}},
			Blocks: []*basepb.Block{{Name: "a"}}}, "field a: defined twice"},
		{"bad name", &basepb.Spec{Attributes: []*basepb.Attribute{{Name: "a b", Type: "string"}}}, "not a valid HCL identifier"},
		{"bad default", &basepb.Spec{Attributes: []*basepb.Attribute{{Name: "a", Type: "number", DefaultJson: `"x"`}}}, "default_json"},
		{"required default", &basepb.Spec{Attributes: []*basepb.Attribute{{Name: "a", Type: "number", Required: true, DefaultJson: `1`}}}, "required attribute has no default"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckSpec(c.spec)
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("err %v, want %q", err, c.err)
			}
		})
	}
}

func TestFieldRange(t *testing.T) {
	src := "mode = \"x\"\nlimit { max = 1 }\nlimit {\n  max = 2\n}\nvolume \"d\" { path = \"/p\" }\n"
	body := parse(t, src)
	def := hcl.Range{Filename: "def"}
	cases := []struct{ path, want string }{
		{"mode", "agent.hcl:1,8-11"},
		{"limit[1].max", "agent.hcl:4,9-10"},
		{"limit[0]", "agent.hcl:2,1-6"},
		{`volume["d"].path`, "agent.hcl:6,21-25"},
		{"page_size", "def:0,0-0"},
		{"", "def:0,0-0"},
	}
	for _, c := range cases {
		if got := FieldRange(testSpec, body, c.path, def).String(); got != c.want {
			t.Errorf("FieldRange(%q) = %s, want %s", c.path, got, c.want)
		}
	}
}
