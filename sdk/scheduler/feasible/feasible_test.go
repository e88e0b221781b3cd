package feasible

import (
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

func testNode() *schedulerpb.Node {
	return &schedulerpb.Node{
		Id:         "node-id-1",
		Name:       "web-1",
		Datacenter: "dc1",
		NodeClass:  "large",
		NodePool:   "prod",
		Attributes: map[string]string{
			"kernel.name":    "linux",
			"os.version":     "22.04",
			"driver.docker":  "1",
			"cpu.numcores":   "8",
			"cpu.frequency":  "2.5",
			"nomad.version":  "1.7.2",
			"pre.version":    "2.0.0-rc1",
			"tags":           "ssd, gpu,fast",
			"unique.network": "10.0.0.1",
		},
		Meta:    map[string]string{"rack": "r1", "pattern": "^li"},
		Drivers: []string{"exec", "docker"},
	}
}

func TestTargetResolve(t *testing.T) {
	n := testNode()
	cases := []struct {
		target string
		want   string
		found  bool
	}{
		{"linux", "linux", true},
		{"", "", true},
		{"${node.unique.id}", "node-id-1", true},
		{"${node.unique.name}", "web-1", true},
		{"${node.datacenter}", "dc1", true},
		{"${node.class}", "large", true},
		{"${node.pool}", "prod", true},
		{"${attr.kernel.name}", "linux", true},
		{"${attr.missing}", "", false},
		{"${meta.rack}", "r1", true},
		{"${meta.missing}", "", false},
		{"${node.bogus}", "", false},
		{"${attr.kernel.name", "${attr.kernel.name", true}, // unterminated: a literal
	}
	for _, c := range cases {
		got, found := ParseTarget(c.target).Resolve(n)
		if got != c.want || found != c.found {
			t.Errorf("Resolve(%q) = %q,%v; want %q,%v", c.target, got, found, c.want, c.found)
		}
	}
}

func TestConstraintOperands(t *testing.T) {
	n := testNode()
	cases := []struct {
		l, op, r string
		want     bool
	}{
		{"${attr.kernel.name}", "=", "linux", true},
		{"${attr.kernel.name}", "==", "linux", true},
		{"${attr.kernel.name}", "is", "windows", false},
		{"${attr.missing}", "=", "", false}, // unset never equals
		{"${attr.kernel.name}", "!=", "windows", true},
		{"${attr.kernel.name}", "not", "linux", false},
		{"${attr.missing}", "!=", "linux", true}, // unset differs from anything
		{"${attr.cpu.numcores}", ">", "4", true},
		{"${attr.cpu.numcores}", "<", "10", true}, // numeric, not lexical
		{"${attr.cpu.numcores}", ">=", "8", true},
		{"${attr.cpu.numcores}", "<=", "7", false},
		{"${attr.cpu.frequency}", ">", "2.25", true},
		{"${node.datacenter}", "<", "dc2", true}, // lexical
		{"${attr.missing}", "<", "5", false},
		{"${attr.kernel.name}", "regexp", "^lin", true},
		{"${attr.kernel.name}", "regexp", "^win", false},
		{"${attr.kernel.name}", "regexp", "([", false}, // bad pattern never matches
		{"${attr.kernel.name}", "regexp", "${meta.pattern}", true},
		{"${attr.nomad.version}", "version", ">= 1.7, < 1.8", true},
		{"${attr.nomad.version}", "version", "~> 1.6.0", false},
		{"${attr.nomad.version}", "version", "~> 1.7.0", true},
		{"${attr.nomad.version}", "version", "~> 1.2", true},
		{"${attr.nomad.version}", "version", "!= 1.7.2", false},
		{"${attr.nomad.version}", "version", "1.7.2", true},
		{"${attr.nomad.version}", "version", "garbage", false},
		{"${attr.pre.version}", "version", ">= 1.0", false}, // pre-release excluded from ranges
		{"${attr.pre.version}", "version", ">= 2.0.0-beta", true},
		{"${attr.pre.version}", "semver", ">= 1.0", true}, // semver orders pre-releases
		{"${attr.pre.version}", "semver", ">= 2.0.0", false},
		{"${attr.os.version}", "semver", "> 20.4", true},
		{"${attr.tags}", "set_contains", "gpu,ssd", true},
		{"${attr.tags}", "set_contains_all", "gpu,nvme", false},
		{"${attr.tags}", "set_contains_any", "nvme,fast", true},
		{"${attr.tags}", "set_contains_any", "nvme", false},
		{"${attr.kernel.name}", "is_set", "", true},
		{"${attr.missing}", "is_set", "", false},
		{"${attr.missing}", "is_not_set", "", true},
		{"${meta.rack}", "is_not_set", "", false},
		{"", "distinct_hosts", "true", true},
		{"${meta.rack}", "distinct_property", "2", true},
		{"${node.unique.id}", "=", "node-id-1", true},
		{"${node.pool}", "=", "prod", true},
		{"${attr.kernel.name}", "bogus-op", "linux", false},
	}
	cache := NewCache()
	for _, c := range cases {
		k := CompileConstraint(&schedulerpb.Constraint{LTarget: c.l, Operand: c.op, RTarget: c.r}, cache)
		if got := k.Feasible(n); got != c.want {
			t.Errorf("%s: got %v, want %v", k, got, c.want)
		}
	}
}

func TestConstraintKeyAndCache(t *testing.T) {
	c := &schedulerpb.Constraint{LTarget: "${attr.kernel.name}", Operand: "regexp", RTarget: "${meta.pattern}"}
	if got, want := ConstraintKey(c), "${attr.kernel.name} regexp ${meta.pattern}"; got != want {
		t.Fatalf("key = %q, want %q", got, want)
	}
	cache := NewCache()
	k := CompileConstraint(c, cache)
	CompileConstraint(&schedulerpb.Constraint{LTarget: "x", Operand: "regexp", RTarget: "^li"}, cache)
	for range 3 {
		if !k.Feasible(testNode()) {
			t.Fatal("want feasible")
		}
	}
	// The literal "^li" and the interpolated one share one compiled entry.
	if len(cache.regexps) != 1 {
		t.Fatalf("cache holds %d regexps, want 1", len(cache.regexps))
	}
	if k.Unique() {
		t.Error("attr/meta constraint reported unique")
	}
	for _, target := range []string{"${node.unique.id}", "${node.unique.name}", "${attr.unique.network}", "${meta.unique.x}"} {
		if !CompileConstraint(&schedulerpb.Constraint{LTarget: target, Operand: "=", RTarget: "x"}, cache).Unique() {
			t.Errorf("%s not reported unique", target)
		}
	}
}

func TestVersionCompare(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"1.2.3", "1.2.3", 0},
		{"v1.2", "1.2.0", 0},
		{"1.10", "1.9", 1},
		{"1.2.3-beta", "1.2.3", -1},
		{"1.2.3-alpha.1", "1.2.3-alpha.beta", -1},
		{"1.2.3-alpha.10", "1.2.3-alpha.2", 1},
		{"1.2.3-alpha", "1.2.3-alpha.1", -1},
		{"1.2.3+build5", "1.2.3", 0},
		{"1.2.3.4", "1.2.3", 1},
	}
	for _, c := range cases {
		a, err := parseVersion(c.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := parseVersion(c.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := compareVersions(a, b); got != c.want {
			t.Errorf("compare(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	for _, bad := range []string{"", "x", "1.", "1..2", "1.2-"} {
		if _, err := parseVersion(bad); err == nil {
			t.Errorf("parseVersion(%q) succeeded", bad)
		}
	}
}

func TestGroupChainOrderAndReasons(t *testing.T) {
	job := &schedulerpb.Job{Constraints: []*schedulerpb.Constraint{
		{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux"},
	}}
	tg := &schedulerpb.TaskGroup{
		Constraints: []*schedulerpb.Constraint{{LTarget: "${meta.rack}", Operand: "=", RTarget: "r1"}},
		Tasks: []*schedulerpb.Task{
			{Name: "a", Driver: "exec"},
			{Name: "b", Driver: "docker", Constraints: []*schedulerpb.Constraint{
				{LTarget: "${attr.cpu.numcores}", Operand: ">=", RTarget: "4"},
			}},
		},
	}
	chain := NewGroupChain(job, tg, NewCache())
	cases := []struct {
		name   string
		mutate func(n *schedulerpb.Node)
		reason string
	}{
		{"passes", func(*schedulerpb.Node) {}, ""},
		{"job constraint first", func(n *schedulerpb.Node) {
			n.Attributes["kernel.name"] = "windows"
			n.Drivers = nil
		}, "${attr.kernel.name} = linux"},
		{"then drivers", func(n *schedulerpb.Node) {
			n.Drivers = []string{"exec"}
			n.Meta["rack"] = "r2"
		}, ReasonMissingDrivers},
		{"then group constraints", func(n *schedulerpb.Node) { n.Meta["rack"] = "r2" }, "${meta.rack} = r1"},
		{"then task constraints", func(n *schedulerpb.Node) { n.Attributes["cpu.numcores"] = "2" }, "${attr.cpu.numcores} >= 4"},
	}
	for _, c := range cases {
		n := testNode()
		c.mutate(n)
		ok, reason := chain.Check(n)
		if ok != (c.reason == "") || reason != c.reason {
			t.Errorf("%s: got %v %q, want reason %q", c.name, ok, reason, c.reason)
		}
	}
	if chain.Escaped {
		t.Error("no unique targets, want not escaped")
	}
}

func TestDatacenterAndPool(t *testing.T) {
	dcs := []struct {
		patterns []string
		dc       string
		want     bool
	}{
		{nil, "dc1", true},
		{[]string{"*"}, "anything", true},
		{[]string{"dc*"}, "dc7", true},
		{[]string{"dc*"}, "eu-dc1", false},
		{[]string{"eu-*-1"}, "eu-west-1", true},
		{[]string{"eu-*-1"}, "eu-west-2", false},
		{[]string{"dc1", "dc2"}, "dc2", true},
		{[]string{"dc1"}, "dc10", false},
		{[]string{"*1"}, "dc1", true},
	}
	for _, c := range dcs {
		if got := DatacenterMatches(c.patterns, c.dc); got != c.want {
			t.Errorf("DatacenterMatches(%v, %q) = %v", c.patterns, c.dc, got)
		}
	}
	pools := []struct {
		job, node string
		want      bool
	}{
		{"", "", true},
		{"", "default", true},
		{"default", "gpu", false},
		{"all", "gpu", true},
		{"gpu", "gpu", true},
	}
	for _, c := range pools {
		if got := PoolMatches(c.job, c.node); got != c.want {
			t.Errorf("PoolMatches(%q, %q) = %v", c.job, c.node, got)
		}
	}
}

func TestFits(t *testing.T) {
	capacity := Vec{CPU: 1000, MemoryMB: 1024, DiskMB: 500, Cores: 2}
	cases := []struct {
		used, ask Vec
		dim       string
	}{
		{Vec{}, Vec{CPU: 1000, MemoryMB: 1024, DiskMB: 500}, ""},
		{Vec{CPU: 1}, Vec{CPU: 1000}, DimensionCPU},
		{Vec{MemoryMB: 1000}, Vec{MemoryMB: 100}, DimensionMemory},
		{Vec{}, Vec{DiskMB: 501}, DimensionDisk},
		{Vec{Cores: 2}, Vec{Cores: 1}, DimensionCores},
		{Vec{CPU: 2000}, Vec{CPU: 1, MemoryMB: 99999}, DimensionCPU}, // first dimension wins
	}
	for _, c := range cases {
		ok, dim := Fits(capacity, c.used, c.ask)
		if ok != (c.dim == "") || dim != c.dim {
			t.Errorf("Fits(used %+v, ask %+v) = %v %q, want %q", c.used, c.ask, ok, dim, c.dim)
		}
	}
	tg := &schedulerpb.TaskGroup{EphemeralDiskMb: 300, Tasks: []*schedulerpb.Task{
		{Resources: &schedulerpb.Resources{Cpu: 100, MemoryMb: 64}},
		{Resources: &schedulerpb.Resources{Cpu: 50, MemoryMb: 32, Cores: 1}},
		{},
	}}
	if got, want := GroupAsk(tg), (Vec{CPU: 150, MemoryMB: 96, DiskMB: 300, Cores: 1}); got != want {
		t.Errorf("GroupAsk = %+v, want %+v", got, want)
	}
}
