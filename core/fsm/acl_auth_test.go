package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Auth methods, binding rules and the autopilot configuration apply
// through the FSM, survive a snapshot and restore unchanged, and an entry
// the state refuses changes nothing.
func TestACLAuthAndAutopilotApplyAndSnapshot(t *testing.T) {
	src, _ := testFSM(t)
	now := time.Unix(1_700_000_000, 0).UTC()
	m := &structs.ACLAuthMethod{Name: "ci", Type: "JWT", TokenLocality: "local", MaxTokenTTL: time.Hour, Default: true,
		CreateTime: now, ModifyTime: now,
		Config: &structs.ACLAuthMethodConfig{JWTValidationPubKeys: []string{"-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----\n"},
			ClaimMappings: map[string]string{"sub": "sub"}, ExpirationLeeway: time.Minute}}
	mustApply(t, src, 10, structs.ACLAuthMethodUpsertRequestType, &structs.ACLAuthMethodUpsertRequest{AuthMethods: []*structs.ACLAuthMethod{m}})
	rule := &structs.ACLBindingRule{ID: "0b6ee5c4-4c3e-4b6c-9d3a-6f7c8b9a0d1e", AuthMethod: "ci", BindType: "management", CreateTime: now}
	mustApply(t, src, 11, structs.ACLBindingRuleUpsertRequestType, &structs.ACLBindingRuleUpsertRequest{BindingRules: []*structs.ACLBindingRule{rule}})
	cfg := *structs.DefaultAutopilotConfig()
	cfg.MinQuorum = 3
	if resp := apply(t, src, 12, structs.AutopilotConfigRequestType, &structs.AutopilotSetConfigRequest{Config: cfg}); resp != true {
		t.Fatalf("autopilot config apply: %v", resp)
	}
	// A CAS at a stale index answers false and writes nothing.
	cfg.MinQuorum = 5
	if resp := apply(t, src, 13, structs.AutopilotConfigRequestType, &structs.AutopilotSetConfigRequest{Config: cfg, CAS: true, Index: 1}); resp != false {
		t.Fatalf("stale CAS: %v; want false", resp)
	}
	// A rule of a method that does not exist is refused, not half-written.
	bad := &structs.ACLBindingRule{ID: "1b6ee5c4-4c3e-4b6c-9d3a-6f7c8b9a0d1e", AuthMethod: "nosuch", BindType: "management"}
	if resp := apply(t, src, 14, structs.ACLBindingRuleUpsertRequestType, &structs.ACLBindingRuleUpsertRequest{BindingRules: []*structs.ACLBindingRule{bad}}); !isNotFound(resp) {
		t.Fatalf("rule of a missing method: %v; want not found", resp)
	}

	data := snapshotBytes(t, src)
	dst, _ := testFSM(t)
	must(t, dst.Restore(io.NopCloser(bytes.NewReader(data))))
	orig, err := src.State().ACLAuthMethodByName(nil, "ci")
	must(t, err)
	want, _ := json.Marshal(orig)
	for _, st := range []*FSM{src, dst} {
		got, err := st.State().ACLAuthMethodByName(nil, "ci")
		must(t, err)
		if b, _ := json.Marshal(got); !bytes.Equal(b, want) || got.CreateIndex != 10 || got.Config.ExpirationLeeway != time.Minute ||
			!got.CreateTime.Equal(now) || len(got.Hash) == 0 || got.Config.ClaimMappings["sub"] != "sub" {
			t.Errorf("method: %s\nwant %s", b, want)
		}
		rules, err := st.State().ACLBindingRulesByAuthMethod(nil, "ci")
		must(t, err)
		if len(rules) != 1 || rules[0].ID != rule.ID || rules[0].ModifyIndex != 11 {
			t.Errorf("rules: %+v", rules)
		}
		idx, c, err := st.State().AutopilotConfig()
		must(t, err)
		if idx != 12 || c.MinQuorum != 3 || !c.CleanupDeadServers {
			t.Errorf("autopilot config at %d: %+v", idx, c)
		}
	}
	// Deleting the method takes its rules along.
	mustApply(t, dst, 20, structs.ACLAuthMethodDeleteRequestType, &structs.ACLAuthMethodDeleteRequest{Names: []string{"ci"}})
	if rules, _ := dst.State().ACLBindingRules(nil, ""); len(rules) != 0 {
		t.Errorf("rules left after their method was deleted: %+v", rules)
	}
}

func isNotFound(resp any) bool {
	err, ok := resp.(error)
	return ok && errors.Is(err, structs.ErrNotFound)
}
