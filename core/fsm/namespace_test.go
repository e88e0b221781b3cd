package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func nsNames(t *testing.T, f *FSM) []string {
	t.Helper()
	all, err := f.State().Namespaces(nil, "")
	must(t, err)
	out := make([]string, 0, len(all))
	for _, ns := range all {
		out = append(out, ns.Name)
	}
	return out
}

func sameNames(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// Namespace entries apply all or nothing; a refused entry answers with an
// error of the right kind, leaves the state as it was and never stops the
// FSM.
func TestFSM_NamespaceEntries(t *testing.T) {
	f, _ := testFSM(t)
	job := mockJob("service")
	job.Namespace = "busy"

	steps := []struct {
		name    string
		typ     structs.MessageType
		msg     any
		wantErr error
		want    []string // namespace names afterwards
	}{
		{"upsert two", structs.NamespaceUpsertRequestType, &structs.NamespaceUpsertRequest{Namespaces: []*structs.Namespace{{Name: "a"}, {Name: "busy"}}}, nil, []string{"a", "busy", "default"}},
		{"upsert with one invalid", structs.NamespaceUpsertRequestType, &structs.NamespaceUpsertRequest{Namespaces: []*structs.Namespace{{Name: "b"}, {Name: "bad name!"}}}, structs.ErrInvalid, []string{"a", "busy", "default"}},
		{"job in busy", structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job}, nil, []string{"a", "busy", "default"}},
		{"delete default", structs.NamespaceDeleteRequestType, &structs.NamespaceDeleteRequest{Namespaces: []string{"a", structs.DefaultNamespace}}, structs.ErrInvalid, []string{"a", "busy", "default"}},
		{"delete with jobs", structs.NamespaceDeleteRequestType, &structs.NamespaceDeleteRequest{Namespaces: []string{"a", "busy"}}, structs.ErrInvalid, []string{"a", "busy", "default"}},
		{"delete missing", structs.NamespaceDeleteRequestType, &structs.NamespaceDeleteRequest{Namespaces: []string{"a", "nope"}}, structs.ErrNotFound, []string{"a", "busy", "default"}},
		{"delete a", structs.NamespaceDeleteRequestType, &structs.NamespaceDeleteRequest{Namespaces: []string{"a"}}, nil, []string{"busy", "default"}},
		{"delete a again", structs.NamespaceDeleteRequestType, &structs.NamespaceDeleteRequest{Namespaces: []string{"a"}}, structs.ErrNotFound, []string{"busy", "default"}},
		{"update busy", structs.NamespaceUpsertRequestType, &structs.NamespaceUpsertRequest{Namespaces: []*structs.Namespace{{Name: "busy", Description: "d"}}}, nil, []string{"busy", "default"}},
	}
	for i, st := range steps {
		resp := apply(t, f, uint64(i+1), st.typ, st.msg)
		switch {
		case st.wantErr == nil && resp != nil:
			t.Fatalf("%s: %v", st.name, resp)
		case st.wantErr != nil:
			err, _ := resp.(error)
			if err == nil || !errors.Is(err, st.wantErr) {
				t.Fatalf("%s: response %v, want an error of kind %v", st.name, resp, st.wantErr)
			}
		}
		if f.Failed() != nil {
			t.Fatalf("%s: FSM stopped: %v", st.name, f.Failed())
		}
		if got := nsNames(t, f); !sameNames(got, st.want...) {
			t.Fatalf("%s: namespaces %v, want %v", st.name, got, st.want)
		}
	}
	busy, err := f.State().NamespaceByName(nil, "busy")
	must(t, err)
	if busy.CreateIndex != 1 || busy.ModifyIndex != uint64(len(steps)) || busy.Description != "d" {
		t.Errorf("busy after update %+v, want CreateIndex 1, ModifyIndex %d, Description d", busy, len(steps))
	}
}

func TestFSM_NamespaceCheckEntry(t *testing.T) {
	good, err := Encode(structs.NamespaceUpsertRequestType, &structs.NamespaceUpsertRequest{Namespaces: []*structs.Namespace{{Name: "a"}}})
	must(t, err)
	if err := CheckEntry(good); err != nil {
		t.Errorf("good upsert: %v", err)
	}
	withNil, err := Encode(structs.NamespaceUpsertRequestType, &structs.NamespaceUpsertRequest{Namespaces: []*structs.Namespace{{Name: "a"}, nil}})
	must(t, err)
	if err := CheckEntry(withNil); err == nil {
		t.Error("upsert with a nil namespace passed CheckEntry")
	}
	del, err := Encode(structs.NamespaceDeleteRequestType, &structs.NamespaceDeleteRequest{Namespaces: []string{"a"}})
	must(t, err)
	if err := CheckEntry(del); err != nil {
		t.Errorf("good delete: %v", err)
	}
	if err := CheckEntry([]byte{byte(structs.NamespaceDeleteRequestType), 0xc1}); err == nil {
		t.Error("undecodable delete passed CheckEntry")
	}
	if typeName(structs.NamespaceUpsertRequestType) != "NamespaceUpsert" || typeName(structs.NamespaceDeleteRequestType) != "NamespaceDelete" {
		t.Errorf("type names %q, %q", typeName(structs.NamespaceUpsertRequestType), typeName(structs.NamespaceDeleteRequestType))
	}
}

// A nil namespace that slipped into the log is refused, not a panic.
func TestFSM_NamespaceUpsertNilElement(t *testing.T) {
	f, _ := testFSM(t)
	resp := apply(t, f, 1, structs.NamespaceUpsertRequestType, &structs.NamespaceUpsertRequest{Namespaces: []*structs.Namespace{{Name: "a"}, nil}})
	if err, _ := resp.(error); err == nil || !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("response %v, want ErrInvalid", resp)
	}
	if f.Failed() != nil {
		t.Fatalf("FSM stopped: %v", f.Failed())
	}
	if got := nsNames(t, f); !sameNames(got, "default") {
		t.Errorf("namespaces %v after a refused upsert, want default alone", got)
	}
}

func TestFSM_NamespaceSnapshotRoundTrip(t *testing.T) {
	f, _ := testFSM(t)
	mustApply(t, f, 1, structs.NamespaceUpsertRequestType, &structs.NamespaceUpsertRequest{Namespaces: []*structs.Namespace{
		{Name: "prod", Description: "production", Meta: map[string]string{"team": "ops"}},
		{Name: "dev"},
	}})
	mustApply(t, f, 2, structs.NamespaceUpsertRequestType, &structs.NamespaceUpsertRequest{Namespaces: []*structs.Namespace{{Name: "dev", Description: "x"}}})

	data := snapshotBytes(t, f)
	dst, _ := testFSM(t)
	must(t, dst.Restore(io.NopCloser(bytes.NewReader(data))))
	if got := nsNames(t, dst); !sameNames(got, "default", "dev", "prod") {
		t.Fatalf("namespaces after restore %v", got)
	}
	prod, err := dst.State().NamespaceByName(nil, "prod")
	must(t, err)
	if prod.Description != "production" || prod.Meta["team"] != "ops" || prod.CreateIndex != 1 || prod.ModifyIndex != 1 {
		t.Errorf("prod after restore %+v", prod)
	}
	dev, err := dst.State().NamespaceByName(nil, "dev")
	must(t, err)
	if dev.Description != "x" || dev.CreateIndex != 1 || dev.ModifyIndex != 2 {
		t.Errorf("dev after restore %+v", dev)
	}
	// The restored store applies further namespace entries.
	mustApply(t, dst, 3, structs.NamespaceDeleteRequestType, &structs.NamespaceDeleteRequest{Namespaces: []string{"dev"}})
	if got := nsNames(t, dst); !sameNames(got, "default", "prod") {
		t.Errorf("namespaces after delete on the restored store %v", got)
	}
}
