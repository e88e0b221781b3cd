package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// Nomad's TestOperator_RaftRemovePeerByAddress/ByID match its words; the
// error keeps its not-found kind.
func TestRemoveRaftPeerUnknownWording(t *testing.T) {
	s := testServer(t, nil)
	for _, tc := range []struct{ id, addr, want string }{
		{"nope", "", `id "nope" was not found in the Raft configuration`},
		{"", "nope", `address "nope" was not found in the Raft configuration`},
	} {
		err := s.Operator().RemoveRaftPeer(context.Background(), tc.id, tc.addr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RemoveRaftPeer(%q, %q) = %v, want %q", tc.id, tc.addr, err, tc.want)
		}
		if !errors.Is(err, structs.ErrNotFound) {
			t.Errorf("RemoveRaftPeer(%q, %q): kind lost: %v", tc.id, tc.addr, err)
		}
	}
}
