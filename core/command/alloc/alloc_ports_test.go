package alloc

import (
	"strings"
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

func TestAllocAddresses(t *testing.T) {
	a := &structs.Allocation{AllocatedResources: &structs.AllocatedResources{Shared: structs.AllocatedSharedResources{
		Networks: []*structs.NetworkResource{{Mode: "host", ReservedPorts: []structs.Port{{Label: "http", Value: 8080, To: 80}}}},
		Ports: []structs.AllocatedPortMapping{
			{Label: "http", Value: 8080, To: 80, HostIP: "10.0.0.1"},
			{Label: "admin", Value: 23456, HostIP: "10.0.0.1"},
		},
	}}}
	got := allocAddresses(a)
	want := []string{"Label", "Dynamic", "Address", "*admin", "yes", "10.0.0.1:23456", "*http", "no", "10.0.0.1:8080 -> 80"}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("addresses:\n%s\nmissing %q", got, w)
		}
	}
	if strings.Index(got, "*admin") > strings.Index(got, "*http") {
		t.Errorf("addresses not sorted by label:\n%s", got)
	}
	if allocAddresses(&structs.Allocation{}) != "" {
		t.Error("an alloc without ports printed addresses")
	}
	if s := formatAllocStatus(a, false, clitest.TestNow); !strings.Contains(s, "Allocation Addresses:\n") {
		t.Errorf("alloc status has no Allocation Addresses section:\n%s", s)
	}
}
