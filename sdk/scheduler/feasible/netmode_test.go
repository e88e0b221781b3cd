package feasible

import (
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// TestNetworkModeChecker: a group in host mode (or without a network)
// fits any node; one in another mode only nodes that serve it.
func TestNetworkModeChecker(t *testing.T) {
	node := &schedulerpb.Node{NetworkModes: []string{"bridge", "cni/mynet"}}
	bare := &schedulerpb.Node{}
	tests := []struct {
		mode     string
		on       *schedulerpb.Node
		ok       bool
		reason   string
		noChecks bool
	}{
		{"", bare, true, "", true},
		{"host", bare, true, "", true},
		{"bridge", node, true, "", false},
		{"bridge", bare, false, "missing network mode bridge", false},
		{"cni/mynet", node, true, "", false},
		{"cni/other", node, false, "missing network mode cni/other", false},
		{"none", node, false, "missing network mode none", false},
	}
	for _, tc := range tests {
		tg := &schedulerpb.TaskGroup{Networks: []*schedulerpb.NetworkAsk{{Mode: tc.mode}}}
		c := NewNetworkModeChecker(tg)
		if tc.noChecks {
			if c != nil {
				t.Errorf("mode %q: a checker, want none", tc.mode)
			}
			continue
		}
		ok, reason := c.Check(tc.on)
		if ok != tc.ok || reason != tc.reason {
			t.Errorf("mode %q on %v: %v %q, want %v %q", tc.mode, tc.on.GetNetworkModes(), ok, reason, tc.ok, tc.reason)
		}
		gc := NewGroupChain(&schedulerpb.Job{}, tg, nil)
		if !gc.Escaped {
			t.Errorf("mode %q: the group's results are cached by computed class, which holds no modes", tc.mode)
		}
	}
}
