package state

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestPKIInitOnceRotateAndSnapshot(t *testing.T) {
	s := testStore(t)
	p := &structs.ClusterPKI{CA: []byte("ca-secret"), Tokens: []byte("tok-1"), CAFingerprint: "fp"}
	stored, err := s.PKIInit(10, p)
	must(t, err)
	if !stored {
		t.Fatal("first PKIInit did not store")
	}
	// A second CA never replaces the first.
	stored, err = s.PKIInit(11, &structs.ClusterPKI{CA: []byte("other"), Tokens: []byte("x"), CAFingerprint: "fp2"})
	must(t, err)
	if stored {
		t.Fatal("second PKIInit stored")
	}
	cases := []struct {
		name string
		fp   string
		tok  []byte
		kind error
	}{
		{"other CA", "fp2", []byte("tok-2"), structs.ErrInvalid},
		{"empty tokens", "fp", nil, structs.ErrInvalid},
	}
	for _, tc := range cases {
		if err := s.PKISetTokens(12, tc.fp, tc.tok); !errors.Is(err, tc.kind) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.kind)
		}
	}
	must(t, s.PKISetTokens(13, "fp", []byte("tok-2")))
	got, err := s.PKI(nil)
	must(t, err)
	if string(got.CA) != "ca-secret" || string(got.Tokens) != "tok-2" || got.CreateIndex != 10 || got.ModifyIndex != 13 {
		t.Fatalf("stored PKI: CA %q tokens %q index %d/%d", got.CA, got.Tokens, got.CreateIndex, got.ModifyIndex)
	}
	if out := fmt.Sprintf("%v %+v %#v %s", *got, got, *got, *got); strings.Contains(out, "secret") || strings.Contains(out, "tok-2") {
		t.Fatalf("fmt leaks key material: %s", out)
	}
	back, err := roundTrip(t, s).PKI(nil)
	must(t, err)
	if back == nil || string(back.CA) != "ca-secret" || string(back.Tokens) != "tok-2" {
		t.Fatalf("snapshot round trip lost the PKI: %v", back)
	}
}

func TestPKISetTokensWithoutPKI(t *testing.T) {
	s := testStore(t)
	if err := s.PKISetTokens(1, "fp", []byte("t")); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
}
