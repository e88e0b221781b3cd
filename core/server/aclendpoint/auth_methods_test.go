package aclendpoint

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// The rules one login evaluates and the methods of a cluster are bounded
// before anything reaches Raft.
func TestAuthBounds(t *testing.T) {
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	m := &structs.ACLAuthMethod{Name: "m", Type: "OIDC"}
	m.Canonicalize()
	if err := st.UpsertACLAuthMethods(1, []*structs.ACLAuthMethod{m}); err != nil {
		t.Fatal(err)
	}
	var rules []*structs.ACLBindingRule
	for range structs.MaxACLBindingRulesPerMethod {
		rules = append(rules, &structs.ACLBindingRule{ID: uuid.NewString(), AuthMethod: "m", BindType: "management"})
	}
	if err := st.UpsertACLBindingRules(2, rules); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	_, err = prepareBindingRules(st, []*structs.ACLBindingRule{{AuthMethod: "m", BindType: "management"}}, now, uuid.NewString)
	if err == nil || !strings.Contains(err.Error(), "MaxACLBindingRulesPerMethod") {
		t.Errorf("rule past the bound: %v", err)
	}
	// An update of an existing rule is not a new one.
	if _, err := prepareBindingRules(st, []*structs.ACLBindingRule{{ID: rules[0].ID, AuthMethod: "m", BindType: "management", Description: "x"}}, now, uuid.NewString); err != nil {
		t.Errorf("update at the bound: %v", err)
	}

	var methods []*structs.ACLAuthMethod
	for i := range structs.MaxACLAuthMethods - 1 {
		mm := &structs.ACLAuthMethod{Name: "m" + uuid.NewString()[:8] + string(rune('a'+i%26)), Type: "OIDC"}
		mm.Canonicalize()
		methods = append(methods, mm)
	}
	if err := st.UpsertACLAuthMethods(3, methods); err != nil {
		t.Fatal(err)
	}
	_, err = prepareAuthMethods(st, []*structs.ACLAuthMethod{{Name: "one-more", Type: "OIDC"}}, true, now)
	if err == nil || !strings.Contains(err.Error(), "MaxACLAuthMethods") {
		t.Errorf("method past the bound: %v", err)
	}
}
