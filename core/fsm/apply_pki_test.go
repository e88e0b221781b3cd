package fsm

import (
	"errors"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestApplyPKI(t *testing.T) {
	f, _ := testFSM(t)
	init := &structs.PKIInitRequest{PKI: structs.ClusterPKI{CA: []byte("ca"), Tokens: []byte("t1"), CAFingerprint: "fp"}}
	mustApply(t, f, 5, structs.PKIInitRequestType, init)
	// A second init is a no-op, not an error: the first CA stays.
	mustApply(t, f, 6, structs.PKIInitRequestType, &structs.PKIInitRequest{PKI: structs.ClusterPKI{CA: []byte("other"), Tokens: []byte("x"), CAFingerprint: "fp2"}})
	mustApply(t, f, 7, structs.PKITokensRequestType, &structs.PKITokensRequest{Tokens: []byte("t2"), CAFingerprint: "fp"})
	if resp := apply(t, f, 8, structs.PKITokensRequestType, &structs.PKITokensRequest{Tokens: []byte("t3"), CAFingerprint: "fp2"}); !errors.Is(resp.(error), structs.ErrInvalid) {
		t.Fatalf("tokens of another CA: %v", resp)
	}
	if resp := apply(t, f, 9, structs.PKIInitRequestType, &structs.PKIInitRequest{}); !errors.Is(resp.(error), structs.ErrInvalid) {
		t.Fatalf("empty init: %v", resp)
	}
	if f.Failed() != nil {
		t.Fatalf("a refused PKI entry stopped the FSM: %v", f.Failed())
	}
	p, err := f.State().PKI(nil)
	must(t, err)
	if string(p.CA) != "ca" || string(p.Tokens) != "t2" {
		t.Fatalf("PKI after the entries: CA %q tokens %q", p.CA, p.Tokens)
	}
}
