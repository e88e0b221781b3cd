package serviceregs

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/drover-org/drover/core/structs"
)

func TestCheckRegistration(t *testing.T) {
	ok := func() *structs.ServiceRegistration {
		return &structs.ServiceRegistration{ID: "id", ServiceName: "web", AllocID: "a1", Port: 80}
	}
	long := strings.Repeat("x", structs.MaxServiceStringBytes+1)
	cases := []struct {
		name  string
		edit  func(r *structs.ServiceRegistration) *structs.ServiceRegistration
		valid bool
	}{
		{"valid", func(r *structs.ServiceRegistration) *structs.ServiceRegistration { return r }, true},
		{"null", func(*structs.ServiceRegistration) *structs.ServiceRegistration { return nil }, false},
		{"no service name", func(r *structs.ServiceRegistration) *structs.ServiceRegistration { r.ServiceName = ""; return r }, false},
		{"over-long ID", func(r *structs.ServiceRegistration) *structs.ServiceRegistration {
			r.ID = strings.Repeat("i", maxServiceIDBytes+1)
			return r
		}, false},
		{"over-long name", func(r *structs.ServiceRegistration) *structs.ServiceRegistration { r.ServiceName = long; return r }, false},
		{"too many tags", func(r *structs.ServiceRegistration) *structs.ServiceRegistration {
			r.Tags = make([]string, structs.MaxServiceTags+1)
			return r
		}, false},
		{"over-long tag", func(r *structs.ServiceRegistration) *structs.ServiceRegistration { r.Tags = []string{long}; return r }, false},
		{"port out of range", func(r *structs.ServiceRegistration) *structs.ServiceRegistration {
			r.Port = structs.MaxPort + 1
			return r
		}, false},
		{"null check", func(r *structs.ServiceRegistration) *structs.ServiceRegistration {
			r.Checks = []*structs.CheckStatus{nil}
			return r
		}, false},
		{"over-long check field", func(r *structs.ServiceRegistration) *structs.ServiceRegistration {
			r.Checks = []*structs.CheckStatus{{Status: long}}
			return r
		}, false},
		{"long check output is cut, not refused", func(r *structs.ServiceRegistration) *structs.ServiceRegistration {
			r.Checks = []*structs.CheckStatus{{Output: strings.Repeat("o", structs.MaxCheckOutputBytes+1)}}
			return r
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkRegistration(0, tc.edit(ok()))
			if tc.valid && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.valid && !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("got %v, want an ErrInvalid", err)
			}
		})
	}
}

func TestCopyRegistrationCutsOutputOnARune(t *testing.T) {
	out := strings.Repeat("a", structs.MaxCheckOutputBytes-1) + "é" // the 2-byte rune straddles the limit
	r := &structs.ServiceRegistration{Tags: []string{"t"}, Checks: []*structs.CheckStatus{{Output: out}}}
	c := copyRegistration(r)
	got := c.Checks[0].Output
	if len(got) > structs.MaxCheckOutputBytes || !utf8.ValidString(got) || len(got) != structs.MaxCheckOutputBytes-1 {
		t.Fatalf("output cut to %d bytes (valid UTF-8 %v), want %d", len(got), utf8.ValidString(got), structs.MaxCheckOutputBytes-1)
	}
	c.Tags[0] = "changed"
	c.Checks[0].Status = "changed"
	if r.Tags[0] != "t" || r.Checks[0].Status != "" || r.Checks[0].Output != out {
		t.Fatal("the copy shares tags or checks with the original")
	}
}

// Update refuses a malformed request before it authenticates the node,
// and an unauthenticated node before it reads or writes anything.
func TestUpdateRefusals(t *testing.T) {
	denied := structs.NewError(structs.ErrPermissionDenied, "bad secret")
	authCalls := 0
	reg := New(Config{
		AuthNode: func(string, string) (*structs.Node, error) { authCalls++; return nil, denied },
		Apply: func(structs.MessageType, any) (uint64, error) {
			t.Error("a refused update was written")
			return 0, nil
		},
		// State is nil: reading it would panic.
	})
	cases := []struct {
		name     string
		args     *structs.ServiceRegistrationNodeArgs
		kind     error
		authCall int
	}{
		{"null", nil, structs.ErrInvalid, 0},
		{"too many entries", &structs.ServiceRegistrationNodeArgs{DeleteAllocIDs: make([]string, structs.MaxRegistrationsPerRequest+1)}, structs.ErrInvalid, 0},
		{"bad secret", &structs.ServiceRegistrationNodeArgs{NodeID: "n1", SecretID: "wrong"}, structs.ErrPermissionDenied, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			authCalls = 0
			if err := reg.Update(tc.args); !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want %v", err, tc.kind)
			}
			if authCalls != tc.authCall {
				t.Fatalf("node authenticated %d times, want %d", authCalls, tc.authCall)
			}
		})
	}
}
