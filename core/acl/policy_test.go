package acl

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestParsePolicyValid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules string
		want  *Policy
	}{
		{"empty", "", &Policy{Name: "p"}},
		{"comments only", "# nothing\n// here\n", &Policy{Name: "p"}},
		{"namespace read", `namespace "default" { policy = "read" }`, &Policy{Name: "p", Namespaces: []*NamespaceRule{
			{Name: "default", Policy: "read", Capabilities: sorted(namespaceRead)},
		}}},
		{"namespace write", `namespace "default" { policy = "write" }`, &Policy{Name: "p", Namespaces: []*NamespaceRule{
			{Name: "default", Policy: "write", Capabilities: sorted(namespaceWrite)},
		}}},
		{"namespace scaling", `namespace "default" { policy = "scaling" }`, &Policy{Name: "p", Namespaces: []*NamespaceRule{
			{Name: "default", Policy: "scaling", Capabilities: sorted(namespaceScaling)},
		}}},
		{"namespace deny", `namespace "default" { policy = "deny" }`, &Policy{Name: "p", Namespaces: []*NamespaceRule{
			{Name: "default", Policy: "deny", Capabilities: []string{"deny"}},
		}}},
		{"policy plus capabilities, deduplicated", `
namespace "dev-*" {
  policy       = "read"
  capabilities = ["submit-job", "read-job", "alloc-node-exec", "submit-job"]
}`, &Policy{Name: "p", Namespaces: []*NamespaceRule{
			{Name: "dev-*", Policy: "read", Capabilities: sorted(append(slices.Clone(namespaceRead), "submit-job", "alloc-node-exec"))},
		}}},
		{"capabilities alone", `namespace "*" { capabilities = ["list-jobs"] }`, &Policy{Name: "p", Namespaces: []*NamespaceRule{
			{Name: "*", Capabilities: []string{"list-jobs"}},
		}}},
		{"no rule body", `namespace "x" {}`, &Policy{Name: "p", Namespaces: []*NamespaceRule{{Name: "x"}}}},
		{"repeated namespace kept for Compile", "namespace \"a\" { policy = \"read\" }\nnamespace \"a\" { policy = \"deny\" }\n",
			&Policy{Name: "p", Namespaces: []*NamespaceRule{
				{Name: "a", Policy: "read", Capabilities: sorted(namespaceRead)},
				{Name: "a", Policy: "deny", Capabilities: []string{"deny"}},
			}}},
		{"host volumes", `
host_volume "prod_*" { policy = "read" }
host_volume "scratch" { policy = "write" }
host_volume "ro" { capabilities = ["mount-readonly"] }
host_volume "none" { policy = "deny" }`, &Policy{Name: "p", HostVolumes: []*HostVolumeRule{
			{Name: "prod_*", Policy: "read", Capabilities: []string{"mount-readonly"}},
			{Name: "scratch", Policy: "write", Capabilities: []string{"mount-readonly", "mount-readwrite"}},
			{Name: "ro", Capabilities: []string{"mount-readonly"}},
			{Name: "none", Policy: "deny", Capabilities: []string{"deny"}},
		}}},
		{"simple rules", `
node     { policy = "read" }
agent    { policy = "write" }
operator { policy = "deny" }
quota    { policy = "read" }
plugin   { policy = "list" }`, &Policy{Name: "p", Node: "read", Agent: "write", Operator: "deny", Quota: "read", Plugin: "list"}},
		{"constant expressions", `node { policy = "${"re"}ad" }`, &Policy{Name: "p", Node: "read"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePolicy("p", tc.rules)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %s\nwant %s", dump(got), dump(tc.want))
			}
		})
	}
}

func TestParsePolicyErrors(t *testing.T) {
	for _, tc := range []struct {
		name, rules string
		// want are substrings of the error, the first with its position.
		want []string
	}{
		{"syntax", "namespace \"a\" {\n  policy = \n}", []string{"pol:2:"}},
		{"unknown block", "\n\nnamspace \"a\" {}", []string{`pol:3:1: Unsupported block type; Blocks of type "namspace" are not expected here`}},
		{"unknown attribute at root", `policy = "read"`, []string{`pol:1:1: Unsupported argument`}},
		{"unknown attribute in namespace", "namespace \"a\" {\n  polcy = \"read\"\n}", []string{`pol:2:3: Unsupported argument; An argument named "polcy" is not expected here`}},
		{"unknown attribute in node", "node {\n  policy = \"read\"\n  capabilities = []\n}", []string{`pol:3:3: Unsupported argument`}},
		{"nested block", "namespace \"a\" {\n  node {}\n}", []string{`pol:2:3: Unsupported block type`}},
		{"variables path without capabilities", "namespace \"a\" {\n  variables {\n    path \"x\" {}\n  }\n}", []string{`pol:3:14: Missing required argument; The argument "capabilities" is required`}},
		{"unknown variables capability", "namespace \"a\" {\n  variables {\n    path \"x\" { capabilities = [\"read-job\"] }\n  }\n}", []string{`pol:3:32: Unknown variables capability; "read-job"`}},
		{"bad variables path", "namespace \"a\" {\n  variables {\n    path \"a b\" { capabilities = [\"read\"] }\n  }\n}", []string{`pol:3:10: Invalid path name`}},
		{"two variables blocks", "namespace \"a\" {\n  variables {}\n  variables {}\n}", []string{`pol:3:3: Duplicate variables block`}},
		{"variables attribute", "namespace \"a\" {\n  variables { policy = \"read\" }\n}", []string{`pol:2:15: Unsupported argument`}},
		{"namespace without label", `namespace { policy = "read" }`, []string{`pol:1:11: Missing name for namespace`}},
		{"node with label", `node "x" { policy = "read" }`, []string{`pol:1:6: Extraneous label for node`}},
		{"bad namespace name", `namespace "a b" { policy = "read" }`, []string{`pol:1:11: Invalid namespace name; A namespace rule's name must be 1 to 128 letters, digits, dashes and * wildcards (got "a b")`}},
		{"underscore namespace", `namespace "a_b" {}`, []string{`pol:1:11: Invalid namespace name`}},
		{"long namespace name", `namespace "` + strings.Repeat("a", 129) + `" {}`, []string{`pol:1:11: Invalid namespace name`, `"aaaa`, `…)`}},
		{"bad host volume name", `host_volume "a/b" {}`, []string{`pol:1:13: Invalid host_volume name`}},
		{"bad namespace policy", "namespace \"a\" {\n  policy = \"admin\"\n}", []string{`pol:2:12: Invalid namespace policy; The policy must be one of "deny", "read", "write", "scaling" (got "admin")`}},
		{"list is not a namespace policy", `namespace "a" { policy = "list" }`, []string{`Invalid namespace policy`}},
		{"unknown capability", "namespace \"a\" {\n  capabilities = [\"read-job\", \"nuke-job\"]\n}", []string{`pol:2:31: Unknown namespace capability; "nuke-job" is not a namespace capability; the capabilities are deny, list-jobs`}},
		{"host volume capability in namespace", `namespace "a" { capabilities = ["mount-readonly"] }`, []string{`Unknown namespace capability; "mount-readonly"`}},
		{"unknown host volume capability", `host_volume "a" { capabilities = ["read-job"] }`, []string{`pol:1:35: Unknown host_volume capability`}},
		{"bad host volume policy", `host_volume "a" { policy = "scaling" }`, []string{`pol:1:28: Invalid host_volume policy`}},
		{"capabilities not a list", `namespace "a" { capabilities = "read-job" }`, []string{`pol:1:33: Invalid expression; A static list expression is required`}},
		{"capability not a string", `namespace "a" { capabilities = [1] }`, []string{`pol:1:33: Incorrect value type; A string is required here (got number)`}},
		{"policy not a string", `node { policy = ["read"] }`, []string{`pol:1:17: Incorrect value type`}},
		{"null policy", `node { policy = null }`, []string{`pol:1:17: Incorrect value type`}},
		{"variable", `node { policy = read }`, []string{`pol:1:17: Variables not allowed`}},
		{"function", `node { policy = lower("READ") }`, []string{`pol:1:17: Function calls not allowed`}},
		{"missing node policy", `node {}`, []string{`pol:1:6: Missing required argument; The argument "policy" is required`}},
		{"bad node policy", `node { policy = "list" }`, []string{`pol:1:17: Invalid node policy; The policy must be one of "deny", "read", "write" (got "list")`}},
		{"bad agent policy", `agent { policy = "scaling" }`, []string{`pol:1:18: Invalid agent policy`}},
		{"bad operator policy", `operator { policy = "" }`, []string{`pol:1:21: Invalid operator policy`}},
		{"bad quota policy", `quota { policy = "x" }`, []string{`pol:1:18: Invalid quota policy`}},
		{"bad plugin policy", `plugin { policy = "write" }`, []string{`pol:1:19: Invalid plugin policy; The policy must be one of "deny", "read", "list" (got "write")`}},
		{"duplicate node", "node { policy = \"read\" }\n\nnode { policy = \"write\" }", []string{`pol:3:1: Duplicate node block; A policy may hold one node block; the first is at pol:1:1.`}},
		{"errors in file order", "namespace \"a\" { policy = \"x\" }\nnode { policy = \"y\" }\nzzz {}\n",
			[]string{"pol:1:26: Invalid namespace policy", "\npol:2:17: Invalid node policy", "\npol:3:1: Unsupported block type"}},
		{"nesting", "namespace \"a\" { capabilities = " + strings.Repeat("[", 100) + strings.Repeat("]", 100) + " }",
			[]string{"Nesting too deep"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePolicy("pol", tc.rules)
			if err == nil {
				t.Fatalf("accepted: %s", dump(p))
			}
			if !errors.Is(err, structs.ErrInvalid) || structs.HTTPStatus(err) != 400 {
				t.Errorf("error %v is not an ErrInvalid 400", err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Errorf("error %T is not a *ParseError", err)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error:\n%s\nwant it to contain %q", msg, w)
				}
			}
			if !strings.HasPrefix(msg, "pol:") {
				t.Errorf("error %q does not start with a position", msg)
			}
		})
	}
}

func TestParsePolicyTooLarge(t *testing.T) {
	rules := strings.Repeat("#", structs.MaxACLPolicyRulesBytes+1)
	_, err := ParsePolicy("big", rules)
	var le *structs.LimitError
	if !errors.As(err, &le) || !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("error %v (%T); want an ErrInvalid LimitError", err, err)
	}
	if want := "big: policy rules are 32769 bytes: exceeds limit MaxACLPolicyRulesBytes (32768 bytes)"; err.Error() != want {
		t.Errorf("error %q; want %q", err, want)
	}
	// At the limit the text is parsed.
	if _, err := ParsePolicy("big", rules[1:]); err != nil {
		t.Errorf("rules at the limit refused: %v", err)
	}
}

func TestExpandNamespacePolicy(t *testing.T) {
	has := func(list []string, caps ...string) bool {
		for _, c := range caps {
			if !slices.Contains(list, c) {
				return false
			}
		}
		return true
	}
	read, write, scaling := ExpandNamespacePolicy("read"), ExpandNamespacePolicy("write"), ExpandNamespacePolicy("scaling")
	if len(read) != 8 || !has(read, "list-jobs", "parse-job", "read-job", "csi-list-volume", "csi-read-volume",
		"list-scaling-policies", "read-scaling-policy", "read-job-scaling") {
		t.Errorf("read = %v", read)
	}
	if len(write) != 18 || !has(write, read...) || !has(write, "scale-job", "submit-job", "dispatch-job", "read-logs",
		"read-fs", "alloc-exec", "alloc-lifecycle", "csi-write-volume", "csi-mount-volume", "submit-recommendation") {
		t.Errorf("write = %v", write)
	}
	if has(write, "alloc-node-exec") || has(write, "sentinel-override") || has(write, "csi-register-plugin") {
		t.Errorf("write grants a capability Nomad grants only by name: %v", write)
	}
	if len(scaling) != 4 || !has(scaling, "list-scaling-policies", "read-scaling-policy", "read-job-scaling", "scale-job") {
		t.Errorf("scaling = %v", scaling)
	}
	if d := ExpandNamespacePolicy("deny"); !slices.Equal(d, []string{"deny"}) {
		t.Errorf("deny = %v", d)
	}
	if ExpandNamespacePolicy("list") != nil || ExpandHostVolumePolicy("scaling") != nil {
		t.Error("an unknown shorthand expanded")
	}
	// The expansions are copies: changing one does not change the next.
	read[0] = "x"
	if ExpandNamespacePolicy("read")[0] == "x" {
		t.Error("ExpandNamespacePolicy returns shared memory")
	}
	// Every expanded capability is a valid one, and the bit set holds them all.
	for _, c := range write {
		if _, ok := namespaceBits[c]; !ok {
			t.Errorf("%q has no bit", c)
		}
	}
	if len(namespaceCapabilities) > 64 {
		t.Fatal("namespace capabilities outgrew capSet")
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

func dump(p *Policy) string {
	if p == nil {
		return "<nil>"
	}
	var b strings.Builder
	b.WriteString("{" + p.Name)
	for _, r := range p.Namespaces {
		b.WriteString(" ns(" + r.Name + "," + r.Policy + "," + strings.Join(r.Capabilities, "|") + ")")
	}
	for _, r := range p.HostVolumes {
		b.WriteString(" hv(" + r.Name + "," + r.Policy + "," + strings.Join(r.Capabilities, "|") + ")")
	}
	b.WriteString(" node=" + p.Node + " agent=" + p.Agent + " operator=" + p.Operator + " quota=" + p.Quota + " plugin=" + p.Plugin + "}")
	return b.String()
}

// No input panics the parser, and every refusal is an ErrInvalid.
func FuzzParsePolicy(f *testing.F) {
	for _, seed := range []string{
		"",
		`namespace "default" { policy = "write" capabilities = ["alloc-node-exec"] }`,
		`host_volume "*" { policy = "read" }`,
		"node { policy = \"read\" }\nagent { policy = \"write\" }\nplugin { policy = \"list\" }",
		`namespace "a" { variables { path "*" { capabilities = ["read"] } } }`,
		`namespace "${x}" {}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, rules string) {
		p, err := ParsePolicy("f", rules)
		if err != nil {
			if !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		_ = Compile([]*Policy{p}).AllowNamespace("default")
	})
}
