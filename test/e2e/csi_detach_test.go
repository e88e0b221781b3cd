package e2e

import (
	"os"
	"strings"
	"testing"
)

// `drover volume detach` of a volume a running job holds: the node's
// client unpublishes and unstages it (the task loses its mount, and keeps
// running), the controller detaches it and the claim is freed. A bogus
// node ID is refused (404 naming it; the CLI exits non-zero), as is a
// node that holds no claim of the volume, and neither changes anything.
func TestCSIVolumeDetachRunningJob(t *testing.T) {
	t.Parallel()
	a, _, allocID, _ := holderSetup(t)
	var alloc struct{ NodeID string }
	if status, err := a.Do("GET", "/v1/allocation/"+allocID, nil, &alloc); err != nil || status != 200 || alloc.NodeID == "" {
		t.Fatalf("alloc: %d %v %+v", status, err, alloc)
	}
	type volume struct {
		ReadAllocs, WriteAllocs, PastClaims map[string]any
		ModifyIndex                         uint64
	}
	getVol := func() volume {
		t.Helper()
		var v volume
		if status, err := a.Do("GET", "/v1/volume/csi/e2e-vol", nil, &v); err != nil || status != 200 {
			t.Fatalf("volume: %d %v", status, err)
		}
		return v
	}
	before := getVol()
	if len(before.WriteAllocs) != 1 {
		t.Fatalf("volume before detach: %+v", before)
	}

	const bogus = "00000000-0000-4000-8000-00000000beef"
	status, body, err := a.Raw("DELETE", "/v1/volume/csi/e2e-vol/detach?node="+bogus, nil)
	if err != nil || status != 404 || !strings.Contains(string(body), "node not found: "+bogus) {
		t.Fatalf("detach from a bogus node: %d %v %s", status, err, body)
	}
	if out := a.CLI("volume", "detach", "e2e-vol", bogus); out.Code == 0 {
		t.Fatalf("the CLI's detach from a bogus node succeeded:\n%s", out)
	}
	if after := getVol(); after.ModifyIndex != before.ModifyIndex || len(after.WriteAllocs) != 1 || len(after.PastClaims) != 0 {
		t.Fatalf("a refused detach changed the volume: %+v → %+v", before, after)
	}

	out := a.MustCLI("volume", "detach", "e2e-vol", alloc.NodeID)
	if !strings.Contains(out.Stdout, "Successfully detached") {
		t.Fatalf("volume detach:\n%s", out)
	}
	// The detach answered once the claim was freed: nothing to wait for.
	if v := getVol(); len(v.ReadAllocs)+len(v.WriteAllocs)+len(v.PastClaims) != 0 {
		t.Fatalf("volume after detach: %+v", v)
	}
	if left := mountsUnder(t, allocID); len(left) != 0 {
		t.Errorf("mounts of the alloc left after detach: %v", left)
	}
	if left := mountsWith(t, a.DataDir, "/staging/default/e2e-vol/"); len(left) != 0 {
		t.Errorf("staging mounts left after detach: %v", left)
	}
	var running struct{ ClientStatus string }
	if status, err := a.Do("GET", "/v1/allocation/"+allocID, nil, &running); err != nil || status != 200 || running.ClientStatus != "running" {
		t.Errorf("alloc after detach: %d %v %+v (want it still running)", status, err, running)
	}

	// Detached already: the node holds no claim of it any more.
	status, body, err = a.Raw("DELETE", "/v1/volume/csi/e2e-vol/detach?node="+alloc.NodeID, nil)
	if err != nil || status != 404 || !strings.Contains(string(body), "holds no claim") {
		t.Fatalf("second detach: %d %v %s", status, err, body)
	}

	// The alloc's end has nothing left to release and leaves no claim.
	a.MustCLI("job", "stop", "holder")
	holderReleased(t, a, allocID)
	a.MustCLI("job", "stop", "-purge", "hostpath-plugin")
}

// mountsWith lists the mount points beneath dir whose path contains s:
// other tests running in parallel stage volumes of the same name under
// their own agents' data dirs.
func mountsWith(t *testing.T, dir, s string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") && strings.Contains(f[4], s) {
			out = append(out, f[4])
		}
	}
	return out
}
