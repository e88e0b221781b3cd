package jobspec

import (
	"os"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// TestHostVolumeJobValidates: a job with Nomad's host volume blocks parses
// to the structure Nomad's has (the golden file pins the JSON) and passes
// the server's validation.
func TestHostVolumeJobValidates(t *testing.T) {
	src, err := os.ReadFile("testdata/host-volume.hcl")
	if err != nil {
		t.Fatal(err)
	}
	j := mustParse(t, string(src))
	j.Canonicalize()
	if err := j.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	v := j.TaskGroups[0].Volumes["data"]
	if v == nil || v.Type != structs.VolumeTypeHost || v.Source != "shared_data" || v.ReadOnly {
		t.Fatalf("volume data = %+v", v)
	}
	if m := j.TaskGroups[0].Tasks[0].VolumeMounts; len(m) != 3 || m[1].Volume != "certs" || !m[1].ReadOnly {
		t.Fatalf("volume mounts = %+v", m)
	}
}
