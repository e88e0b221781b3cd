package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// TestAllocNetworkStatusFromClient: the client's report of an alloc's own
// network is stored (and kept by later reports without one); a report
// over the bounds is refused as invalid, naming the field, and stores
// nothing.
func TestAllocNetworkStatusFromClient(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	n := testNode("a")
	registerNodes(t, s, n)
	a := runJobOn(t, s, testJob("web", "service"), n, structs.AllocClientStatusRunning)
	tests := []struct {
		name  string
		st    *structs.AllocNetworkStatus
		want  string // stored address
		error string
	}{
		{"reported", &structs.AllocNetworkStatus{InterfaceName: "eth0", Address: "172.26.64.2"}, "172.26.64.2", ""},
		{"not reported again", nil, "172.26.64.2", ""},
		{"address too long", &structs.AllocNetworkStatus{InterfaceName: "eth0", Address: strings.Repeat("1", 4096)}, "172.26.64.2", "NetworkStatus.Address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := &structs.Allocation{ID: a.ID, ClientStatus: structs.AllocClientStatusRunning, NetworkStatus: tc.st}
			err := s.Nodes().UpdateAllocs(ctx, n.ID, n.SecretID, []*structs.Allocation{u})
			if tc.error != "" {
				if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tc.error) {
					t.Fatalf("UpdateAllocs = %v, want invalid naming %s", err, tc.error)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			got, _ := s.State().AllocByID(nil, a.ID)
			if got.NetworkStatus == nil || got.NetworkStatus.Address != tc.want {
				t.Fatalf("stored NetworkStatus = %+v, want address %s", got.NetworkStatus, tc.want)
			}
		})
	}
}
