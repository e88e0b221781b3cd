package acl

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// compile parses and compiles rules, one policy per element.
func compile(t testing.TB, rules ...string) *ACL {
	t.Helper()
	var ps []*Policy
	for _, r := range rules {
		p, err := ParsePolicy("p", r)
		if err != nil {
			t.Fatalf("parse %q: %v", r, err)
		}
		ps = append(ps, p)
	}
	return Compile(ps)
}

func TestNamespaceChecks(t *testing.T) {
	type check struct {
		ns, capability string
		want           bool
	}
	for _, tc := range []struct {
		name   string
		rules  []string
		checks []check
	}{
		{"read", []string{`namespace "default" { policy = "read" }`}, []check{
			{"default", "read-job", true},
			{"default", "list-jobs", true},
			{"default", "submit-job", false},
			{"default", "read-logs", false},
			{"other", "read-job", false},
		}},
		{"write", []string{`namespace "default" { policy = "write" }`}, []check{
			{"default", "submit-job", true},
			{"default", "alloc-exec", true},
			{"default", "read-job", true},
			{"default", "alloc-node-exec", false},
			{"default", "sentinel-override", false},
		}},
		{"scaling", []string{`namespace "default" { policy = "scaling" }`}, []check{
			{"default", "scale-job", true},
			{"default", "read-job-scaling", true},
			{"default", "read-job", false},
		}},
		{"unknown and deny capabilities are never granted", []string{`namespace "*" { policy = "write" }`}, []check{
			{"default", "nuke-job", false},
			{"default", "deny", false},
			{"default", "", false},
		}},
		{"read plus write merge to write", []string{
			`namespace "default" { policy = "read" }`,
			`namespace "default" { capabilities = ["submit-job"] }`,
		}, []check{
			{"default", "read-job", true},
			{"default", "submit-job", true},
			{"default", "dispatch-job", false},
		}},
		{"deny wins across policies", []string{
			`namespace "default" { policy = "write" }`,
			`namespace "default" { policy = "deny" }`,
		}, []check{
			{"default", "read-job", false},
			{"default", "submit-job", false},
		}},
		{"deny wins whichever comes first", []string{
			`namespace "default" { policy = "deny" }`,
			`namespace "default" { policy = "write" }`,
		}, []check{
			{"default", "read-job", false},
		}},
		{"rules repeated within one policy merge", []string{
			"namespace \"default\" { policy = \"write\" }\nnamespace \"default\" { policy = \"deny\" }",
		}, []check{
			{"default", "read-job", false},
		}},
		{"deny capability in a list denies all", []string{
			`namespace "default" { capabilities = ["read-job", "deny"] }`,
		}, []check{
			{"default", "read-job", false},
		}},
		{"deny on the same glob wins", []string{
			`namespace "prod-*" { policy = "read" }`,
			`namespace "prod-*" { policy = "deny" }`,
		}, []check{
			{"prod-eu", "read-job", false},
		}},
		{"exact beats a denying glob", []string{
			`namespace "*" { policy = "deny" }`,
			`namespace "prod" { policy = "read" }`,
		}, []check{
			{"prod", "read-job", true},
			{"prod", "submit-job", false},
			{"dev", "read-job", false},
		}},
		{"exact deny beats a granting glob", []string{
			`namespace "*" { policy = "write" }`,
			`namespace "secret" { policy = "deny" }`,
		}, []check{
			{"secret", "read-job", false},
			{"public", "submit-job", true},
		}},
		{"an empty exact rule shadows the glob", []string{
			`namespace "*" { policy = "write" }`,
			`namespace "quiet" {}`,
		}, []check{
			{"quiet", "read-job", false},
			{"loud", "read-job", true},
		}},
		{"the glob with more literal characters wins", []string{
			`namespace "*" { policy = "write" }`,
			`namespace "prod-*" { policy = "read" }`,
			`namespace "prod-eu-*" { policy = "deny" }`,
		}, []check{
			{"dev", "submit-job", true},
			{"prod-us", "read-job", true},
			{"prod-us", "submit-job", false},
			{"prod-eu-1", "read-job", false},
		}},
		{"suffix and infix globs", []string{
			`namespace "*-prod" { policy = "read" }`,
			`namespace "team-*-prod" { policy = "write" }`,
		}, []check{
			{"web-prod", "read-job", true},
			{"web-prod", "submit-job", false},
			{"team-a-prod", "submit-job", true},
			{"team-prod", "submit-job", false}, // team-*-prod needs two dashes
			{"team-prod", "read-job", true},
			{"prod", "read-job", false},
		}},
		{"tie on literals: fewer wildcards win", []string{
			`namespace "a*b*" { policy = "write" }`,
			`namespace "ab*" { policy = "read" }`,
		}, []check{
			{"abx", "read-job", true},
			{"abx", "submit-job", false},
			{"axbx", "submit-job", true}, // only a*b* matches
		}},
		{"tie on literals and wildcards: the pattern that sorts first wins", []string{
			`namespace "b*" { policy = "deny" }`,
			`namespace "*a" { policy = "read" }`,
		}, []check{
			{"ba", "read-job", true}, // "*a" < "b*"
			{"bb", "read-job", false},
		}},
		{"tie-break is independent of policy order", []string{
			`namespace "*a" { policy = "read" }`,
			`namespace "b*" { policy = "deny" }`,
		}, []check{
			{"ba", "read-job", true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := compile(t, tc.rules...)
			for _, c := range tc.checks {
				if got := a.AllowNamespaceOperation(c.ns, c.capability); got != c.want {
					t.Errorf("AllowNamespaceOperation(%q, %q) = %t; want %t", c.ns, c.capability, got, c.want)
				}
			}
		})
	}
}

func TestAllowNamespace(t *testing.T) {
	a := compile(t,
		`namespace "*" { policy = "deny" }`,
		`namespace "dev-*" { policy = "scaling" }`,
		`namespace "default" { capabilities = ["list-jobs"] }`,
		`namespace "empty" {}`,
	)
	for ns, want := range map[string]bool{
		"default": true,
		"dev-1":   true,
		"prod":    false, // denied by *
		"empty":   false, // a rule with no capabilities
	} {
		if got := a.AllowNamespace(ns); got != want {
			t.Errorf("AllowNamespace(%q) = %t; want %t", ns, got, want)
		}
	}
	if compile(t).AllowNamespace("default") {
		t.Error("an ACL without rules shows a namespace")
	}
}

func TestHostVolumeChecks(t *testing.T) {
	a := compile(t,
		`host_volume "*" { policy = "read" }`,
		`host_volume "scratch-*" { policy = "write" }`,
		`host_volume "secrets" { policy = "deny" }`,
	)
	for _, c := range []struct {
		vol, capability string
		want            bool
	}{
		{"data", "mount-readonly", true},
		{"data", "mount-readwrite", false},
		{"scratch-1", "mount-readwrite", true},
		{"secrets", "mount-readonly", false},
		{"data", "read-job", false},
		{"data", "deny", false},
	} {
		if got := a.AllowHostVolumeOperation(c.vol, c.capability); got != c.want {
			t.Errorf("AllowHostVolumeOperation(%q, %q) = %t; want %t", c.vol, c.capability, got, c.want)
		}
	}
	if !a.AllowHostVolume("data") || a.AllowHostVolume("secrets") {
		t.Error("AllowHostVolume")
	}
	// Host volume and namespace rules are apart.
	if a.AllowNamespace("data") || compile(t, `namespace "x" { policy = "write" }`).AllowHostVolume("x") {
		t.Error("namespace and host volume rules mix")
	}
}

// simpleChecks lists the checks of the unlabelled rules in a fixed order.
func simpleChecks(a *ACL) map[string]bool {
	return map[string]bool{
		"NodeRead": a.AllowNodeRead(), "NodeWrite": a.AllowNodeWrite(),
		"AgentRead": a.AllowAgentRead(), "AgentWrite": a.AllowAgentWrite(),
		"OperatorRead": a.AllowOperatorRead(), "OperatorWrite": a.AllowOperatorWrite(),
		"QuotaRead": a.AllowQuotaRead(), "QuotaWrite": a.AllowQuotaWrite(),
		"PluginRead": a.AllowPluginRead(), "PluginList": a.AllowPluginList(),
	}
}

func TestSimpleRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []string
		allow []string // the checks that pass; all others must fail
	}{
		{"none", nil, nil},
		{"node read", []string{`node { policy = "read" }`}, []string{"NodeRead"}},
		{"node write", []string{`node { policy = "write" }`}, []string{"NodeRead", "NodeWrite"}},
		{"node read+write", []string{`node { policy = "read" }`, `node { policy = "write" }`}, []string{"NodeRead", "NodeWrite"}},
		{"node deny wins", []string{`node { policy = "write" }`, `node { policy = "deny" }`}, nil},
		{"agent", []string{`agent { policy = "write" }`}, []string{"AgentRead", "AgentWrite"}},
		{"operator", []string{`operator { policy = "read" }`}, []string{"OperatorRead"}},
		{"quota", []string{`quota { policy = "write" }`}, []string{"QuotaRead", "QuotaWrite"}},
		{"plugin list", []string{`plugin { policy = "list" }`}, []string{"PluginList"}},
		{"plugin read", []string{`plugin { policy = "read" }`}, []string{"PluginRead", "PluginList"}},
		{"plugin list+read", []string{`plugin { policy = "list" }`, `plugin { policy = "read" }`}, []string{"PluginRead", "PluginList"}},
		{"plugin deny wins", []string{`plugin { policy = "read" }`, `plugin { policy = "deny" }`}, nil},
		{"namespaces grant none of these", []string{`namespace "*" { policy = "write" }`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := compile(t, tc.rules...)
			for check, got := range simpleChecks(a) {
				want := false
				for _, c := range tc.allow {
					want = want || c == check
				}
				if got != want {
					t.Errorf("Allow%s = %t; want %t", check, got, want)
				}
			}
			if a.IsManagement() {
				t.Error("a compiled ACL is management")
			}
		})
	}
}

func TestManagementAndNil(t *testing.T) {
	m := ManagementACL
	if !m.IsManagement() || !m.AllowNamespaceOperation("any", "alloc-node-exec") || !m.AllowNamespace("x") ||
		!m.AllowHostVolumeOperation("v", "mount-readwrite") || !m.AllowHostVolume("v") {
		t.Error("management is refused something")
	}
	for check, got := range simpleChecks(m) {
		if !got {
			t.Errorf("management: Allow%s = false", check)
		}
	}
	var n *ACL
	if n.IsManagement() || n.AllowNamespaceOperation("default", "read-job") || n.AllowNamespace("default") ||
		n.AllowHostVolumeOperation("v", "mount-readonly") || n.AllowHostVolume("v") {
		t.Error("a nil ACL allows something")
	}
	for check, got := range simpleChecks(n) {
		if got {
			t.Errorf("nil: Allow%s = true", check)
		}
	}
	if Compile([]*Policy{nil}).AllowNamespace("default") {
		t.Error("a nil policy granted something")
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "anything", true},
		{"a*", "a", true},
		{"a*", "ab", true},
		{"a*", "ba", false},
		{"*a", "ba", true},
		{"*a", "ab", false},
		{"a*b", "ab", true},
		{"a*b", "axxb", true},
		{"a*b", "axxbc", false},
		{"a*b*c", "abxbc", true},
		{"a*b*c", "acb", false},
		{"**", "x", true},
		{"a**b", "ab", true},
		{"*ab*ab*", "xabyab", true},
		{"*ab*ab*", "xaby", false},
		{"exact", "exact", true},
		{"exact", "exac", false},
		{"", "", true},
		{"", "a", false},
	} {
		if got := globMatch(tc.pattern, tc.name); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %t; want %t", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func BenchmarkAllowNamespaceOperation(b *testing.B) {
	rules := []string{
		`namespace "default" { policy = "write" }`,
		`namespace "prod-*" { policy = "read" }`,
		`namespace "prod-eu-*" { policy = "deny" }`,
		`namespace "team-*-dev" { policy = "write" }`,
		`namespace "*" { policy = "read" }`,
	}
	a := compile(b, rules...)
	for _, bc := range []struct{ name, ns string }{
		{"exact", "default"},
		{"glob", "team-web-dev"},
		{"fallback", "unlisted"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if !a.AllowNamespaceOperation(bc.ns, NamespaceCapabilityReadJob) {
					b.Fatal("refused")
				}
			}
		})
	}
}
