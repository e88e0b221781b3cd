package schedio

import (
	"testing"

	"github.com/drover-org/drover/core/structs"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/reconcile"
)

// TestNetworkSettingsDestructive: a group whose network hostname, dns
// block or cni args change is a destructive update (the running tasks
// keep the network they were set up with); the same settings are not.
func TestNetworkSettingsDestructive(t *testing.T) {
	base := func() *structs.NetworkResource {
		return &structs.NetworkResource{Mode: "bridge", Hostname: "web",
			DNS: &structs.DNSConfig{Servers: []string{"10.0.0.53"}}, CNI: &structs.CNIConfig{Args: map[string]string{"a": "b"}}}
	}
	tests := []struct {
		name        string
		mut         func(n *structs.NetworkResource)
		destructive bool
	}{
		{"same", func(n *structs.NetworkResource) {}, false},
		{"hostname", func(n *structs.NetworkResource) { n.Hostname = "api" }, true},
		{"dns server", func(n *structs.NetworkResource) { n.DNS.Servers = []string{"10.0.0.54"} }, true},
		{"dns removed", func(n *structs.NetworkResource) { n.DNS = nil }, true},
		{"dns option", func(n *structs.NetworkResource) { n.DNS.Options = []string{"ndots:1"} }, true},
		{"cni args", func(n *structs.NetworkResource) { n.CNI.Args["a"] = "c" }, true},
	}
	job := func(n *structs.NetworkResource) *pb.Job {
		return &pb.Job{TaskGroups: []*pb.TaskGroup{{Name: "g", Networks: networksToPB([]*structs.NetworkResource{n})}}}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := base()
			tt.mut(n)
			if got := reconcile.Destructive(job(base()), job(n), "g"); got != tt.destructive {
				t.Fatalf("Destructive = %v, want %v", got, tt.destructive)
			}
		})
	}
	if s := networkSettings(&structs.NetworkResource{Mode: "host"}); s != "" {
		t.Fatalf("settings of a plain network = %q, want empty (no change for existing jobs)", s)
	}
}
