package schedio

import (
	"slices"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// The scheduler sees only a node's detected and healthy drivers, so a
// docker driver whose engine is gone (undetected) or failing (unhealthy)
// takes the node out of placement for docker tasks; the feasibility
// checker then filters it as "missing drivers".
func TestSchedulerInputDriversHealthyOnly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		drivers map[string]*structs.DriverInfo
		want    []string
	}{
		{"healthy docker", map[string]*structs.DriverInfo{
			"docker": {Detected: true, Healthy: true}, "raw_exec": {Detected: true, Healthy: true}}, []string{"docker", "raw_exec"}},
		{"engine unreachable", map[string]*structs.DriverInfo{
			"docker":   {Detected: false, Healthy: false, HealthDescription: "Failed to connect to the docker engine"},
			"raw_exec": {Detected: true, Healthy: true}}, []string{"raw_exec"}},
		{"detected but unhealthy", map[string]*structs.DriverInfo{
			"docker": {Detected: true, Healthy: false}, "raw_exec": {Detected: true, Healthy: true}}, []string{"raw_exec"}},
		{"nil entry", map[string]*structs.DriverInfo{"docker": nil}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := staticNodeToPB(&structs.Node{ID: "n1", Drivers: tc.drivers}).GetDrivers()
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("drivers = %v, want %v", got, tc.want)
			}
		})
	}
}
