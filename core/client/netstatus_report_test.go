package client

import (
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// The client reports a NetworkStatus for every alloc, as Nomad's does: an
// empty one in the host's network (no network block, or mode host), the
// alloc's own once its namespace is set up, none before that.
func TestReportedNetStatus(t *testing.T) {
	alloc := func(mode string) *structs.Allocation {
		tg := &structs.TaskGroup{Name: "g"}
		if mode != "" {
			tg.Networks = []*structs.NetworkResource{{Mode: mode}}
		}
		return &structs.Allocation{ID: "a", TaskGroup: "g", Job: &structs.Job{ID: "j", TaskGroups: []*structs.TaskGroup{tg}}}
	}
	own := &structs.AllocNetworkStatus{InterfaceName: "eth0", Address: "172.26.64.2"}
	tests := []struct {
		name     string
		alloc    *structs.Allocation
		own      *structs.AllocNetworkStatus
		wantNil  bool
		wantAddr string
	}{
		{"no network block", alloc(""), nil, false, ""},
		{"host mode", alloc("host"), nil, false, ""},
		{"bridge before setup", alloc("bridge"), nil, true, ""},
		{"bridge set up", alloc("bridge"), own, false, "172.26.64.2"},
		{"cni before setup", alloc("cni/mynet"), nil, true, ""},
		{"no job", &structs.Allocation{ID: "a"}, nil, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := reportedNetStatus(tc.alloc, tc.own)
			if (got == nil) != tc.wantNil {
				t.Fatalf("reportedNetStatus = %+v; want nil %v", got, tc.wantNil)
			}
			if got != nil && got.Address != tc.wantAddr {
				t.Fatalf("address %q; want %q", got.Address, tc.wantAddr)
			}
		})
	}
}
