package fsm

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

func TestFSM_VariablesKeyringAndSnapshot(t *testing.T) {
	f, _ := testFSM(t)
	now := time.Unix(1_700_000_000, 0).UnixNano()
	key := &structs.RootKey{Meta: &structs.RootKeyMeta{KeyID: "k1", Algorithm: structs.RootKeyAlgorithmAES256GCM}, WrapProvider: "aead", KEK: []byte{1}, WrappedKey: []byte{2}}
	mustApply(t, f, 1, structs.RootKeyUpsertRequestType, &structs.RootKeyUpsertRequest{Key: key, Activate: true})
	set := &structs.VariableApplyRequest{Op: structs.VarOpSet, Now: now,
		Var: &structs.VariableEncrypted{Namespace: "default", Path: "a", KeyID: "k1", Data: []byte("sealed")}}
	resp := apply(t, f, 2, structs.VariableApplyRequestType, set)
	if v, ok := resp.(*structs.VariableEncrypted); !ok || v.ModifyIndex != 2 || v.CreateTime != now {
		t.Fatalf("apply answered %#v, want the stored variable", resp)
	}
	// A lost CAS is the entry's answer, and the FSM keeps going.
	zero := uint64(0)
	set2 := *set
	set2.CAS = &zero
	if err, _ := apply(t, f, 3, structs.VariableApplyRequestType, &set2).(error); structs.KindName(err) != "conflict" {
		t.Errorf("cas 0 over an existing var: %v", err)
	}
	if err, _ := apply(t, f, 4, structs.VariableApplyRequestType, &structs.VariableApplyRequest{Op: structs.VarOpSet}).(error); structs.KindName(err) != "invalid" {
		t.Errorf("entry without a variable: %v", err)
	}
	mustApply(t, f, 5, structs.RootKeyStateRequestType, &structs.RootKeyStateRequest{KeyIDs: []string{"k1"}, State: structs.RootKeyStateRekeying})
	mustApply(t, f, 6, structs.VariablesRekeyRequestType, &structs.VariablesRekeyRequest{Vars: []*structs.VariableEncrypted{
		{Namespace: "default", Path: "a", ModifyIndex: 2, KeyID: "k2", Data: []byte("resealed")}}})
	if f.Failed() != nil {
		t.Fatalf("FSM stopped: %v", f.Failed())
	}

	data := snapshotBytes(t, f)
	if bytes.Contains(data, []byte("plain")) {
		t.Fatal("snapshot holds plaintext")
	}
	dst, _ := testFSM(t)
	must(t, dst.Restore(io.NopCloser(bytes.NewReader(data))))
	st := dst.State()
	v, _ := st.VariableByPath(nil, "default", "a")
	if v == nil || v.KeyID != "k2" || string(v.Data) != "resealed" || v.CreateIndex != 2 {
		t.Errorf("variable after restore: %+v", v)
	}
	k, _ := st.RootKeyByID(nil, "k1")
	if k == nil || k.Meta.State != structs.RootKeyStateRekeying || !bytes.Equal(k.WrappedKey, []byte{2}) {
		t.Errorf("root key after restore: %+v", k)
	}
	if st.Index(state.TableVariables) != 6 || st.Index(state.TableRootKeys) != 5 {
		t.Errorf("indexes after restore: vars %d keys %d", st.Index(state.TableVariables), st.Index(state.TableRootKeys))
	}
}
