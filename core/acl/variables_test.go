package acl

import "testing"

func TestAllowVariableOperation(t *testing.T) {
	p, err := ParsePolicy("p", `
namespace "default" {
  variables {
    path "app/*"        { capabilities = ["read", "list"] }
    path "app/secret/*" { capabilities = ["deny"] }
    path "app/rw"       { capabilities = ["write", "read", "destroy"] }
  }
}
namespace "ro" { policy = "read" }
namespace "rw" { policy = "write" }
namespace "dev-*" {
  capabilities = ["list-jobs"]
  variables {
    path "*" { capabilities = ["list"] }
  }
}
namespace "blocked" {
  policy = "deny"
  variables {
    path "*" { capabilities = ["read"] }
  }
}
namespace "jobs-only" { capabilities = ["read-job"] }
`)
	if err != nil {
		t.Fatal(err)
	}
	a := Compile([]*Policy{p})
	cases := []struct {
		ns, path, capability string
		want                 bool
	}{
		{"default", "app/a", VariablesCapabilityRead, true},
		{"default", "app/a", VariablesCapabilityList, true},
		{"default", "app/a", VariablesCapabilityWrite, false},
		{"default", "app/a/b", VariablesCapabilityRead, true}, // * crosses /
		{"default", "app/secret/x", VariablesCapabilityRead, false},
		{"default", "app/rw", VariablesCapabilityWrite, true},
		{"default", "app/rw", VariablesCapabilityList, false}, // the exact rule applies, not the glob
		{"default", "other", VariablesCapabilityRead, false},
		{"default", "app/a", VariablesCapabilityDeny, false},
		{"default", "app/a", "bogus", false},
		{"ro", "x", VariablesCapabilityRead, true},
		{"ro", "x", VariablesCapabilityList, true},
		{"ro", "x", VariablesCapabilityWrite, false},
		{"rw", "x/y", VariablesCapabilityWrite, true},
		{"rw", "x/y", VariablesCapabilityDestroy, true},
		{"dev-1", "x", VariablesCapabilityList, true},
		{"dev-1", "x", VariablesCapabilityRead, false},
		{"blocked", "x", VariablesCapabilityRead, false},
		{"jobs-only", "x", VariablesCapabilityRead, false},
		{"unknown", "x", VariablesCapabilityRead, false},
	}
	for _, c := range cases {
		if got := a.AllowVariableOperation(c.ns, c.path, c.capability); got != c.want {
			t.Errorf("%s %s %s = %v, want %v", c.ns, c.path, c.capability, got, c.want)
		}
	}
	for ns, want := range map[string]bool{"default": true, "ro": true, "dev-x": true, "blocked": false, "jobs-only": false, "nope": false} {
		if got := a.AllowVariableSearch(ns); got != want {
			t.Errorf("search %s = %v, want %v", ns, got, want)
		}
	}
	if !ManagementACL.AllowVariableOperation("x", "y", VariablesCapabilityDestroy) {
		t.Error("management denied")
	}
	var nilACL *ACL
	if nilACL.AllowVariableOperation("default", "x", VariablesCapabilityRead) || nilACL.AllowVariableSearch("default") {
		t.Error("nil ACL allowed")
	}
}
