package structs

import (
	"errors"
	"strings"
	"testing"
)

func testVolume(mode CSIVolumeAccessMode) *CSIVolume {
	return &CSIVolume{
		ID: "vol", Namespace: "default", PluginID: "hostpath", Schedulable: true,
		RequestedCapabilities: []*CSIVolumeCapability{{AccessMode: mode, AttachmentMode: CSIVolumeAttachmentModeFilesystem}},
	}
}

func taken(alloc, node string, mode CSIVolumeClaimMode, access CSIVolumeAccessMode) *CSIVolumeClaim {
	return &CSIVolumeClaim{AllocationID: alloc, NodeID: node, Mode: mode, AccessMode: access,
		AttachmentMode: CSIVolumeAttachmentModeFilesystem, State: CSIVolumeClaimStateTaken,
		ExternalNodeID: "csi-" + node, ExternalVolumeID: "ext-vol", PublishContext: map[string]string{"k": "v"}}
}

func alloc(id string) *Allocation { return &Allocation{ID: id, Namespace: "default"} }

func TestCSIVolumeClaim(t *testing.T) {
	type step struct {
		claim   *CSIVolumeClaim
		alloc   *Allocation
		wantErr string // substring; "" = success
	}
	w := CSIVolumeClaimWrite
	r := CSIVolumeClaimRead
	snw := CSIVolumeAccessModeSingleNodeWriter
	mnsw := CSIVolumeAccessModeMultiNodeSingleWriter
	mnmw := CSIVolumeAccessModeMultiNodeMultiWriter
	snr := CSIVolumeAccessModeSingleNodeReader
	release := func(a string, st CSIVolumeClaimState) *CSIVolumeClaim {
		return &CSIVolumeClaim{AllocationID: a, State: st, Mode: CSIVolumeClaimGC}
	}
	cases := []struct {
		name       string
		mode       CSIVolumeAccessMode
		steps      []step
		readers    int
		writers    int
		past       int
		wantAccess CSIVolumeAccessMode
	}{
		{"one writer", snw, []step{{taken("a1", "n1", w, snw), alloc("a1"), ""}}, 0, 1, 0, snw},
		{"idempotent write claim", snw, []step{
			{taken("a1", "n1", w, snw), alloc("a1"), ""},
			{taken("a1", "n1", w, snw), alloc("a1"), ""},
		}, 0, 1, 0, snw},
		{"second writer refused single-node-writer", snw, []step{
			{taken("a1", "n1", w, snw), alloc("a1"), ""},
			{taken("a2", "n1", w, snw), alloc("a2"), CSIErrMaxClaims},
		}, 0, 1, 0, snw},
		{"read claim blocks a write upgrade (single-node-writer)", snw, []step{
			{taken("a1", "n1", r, snw), alloc("a1"), ""},
			{taken("a2", "n1", w, snw), alloc("a2"), CSIErrMaxClaims},
		}, 1, 0, 0, snw},
		{"own read claim upgrades to write", mnsw, []step{
			{taken("a1", "n1", r, mnsw), alloc("a1"), ""},
			{taken("a1", "n1", w, mnsw), alloc("a1"), ""},
		}, 0, 1, 0, mnsw},
		{"multi-node-single-writer: readers plus one writer", mnsw, []step{
			{taken("a1", "n1", r, mnsw), alloc("a1"), ""},
			{taken("a2", "n2", r, mnsw), alloc("a2"), ""},
			{taken("a3", "n3", w, mnsw), alloc("a3"), ""},
			{taken("a4", "n4", w, mnsw), alloc("a4"), CSIErrMaxClaims},
		}, 2, 1, 0, mnsw},
		{"multi-node-multi-writer: many writers", mnmw, []step{
			{taken("a1", "n1", w, mnmw), alloc("a1"), ""},
			{taken("a2", "n2", w, mnmw), alloc("a2"), ""},
		}, 0, 2, 0, mnmw},
		{"reader mode refuses writes", snr, []step{
			{taken("a1", "n1", w, snr), alloc("a1"), CSIErrUnschedulable},
		}, 0, 0, 0, ""},
		{"single-node-reader: one reader", snr, []step{
			{taken("a1", "n1", r, snr), alloc("a1"), ""},
			{taken("a2", "n1", r, snr), alloc("a2"), CSIErrMaxClaims},
		}, 1, 0, 0, snr},
		{"taken claim needs its allocation", snw, []step{
			{taken("a1", "n1", w, snw), nil, "not found"},
		}, 0, 0, 0, ""},
		{"checkpoint keeps the claim as past", snw, []step{
			{taken("a1", "n1", w, snw), alloc("a1"), ""},
			{release("a1", CSIVolumeClaimStateNodeDetached), nil, ""},
		}, 0, 1, 1, snw},
		{"last release resets the mode", snw, []step{
			{taken("a1", "n1", w, snw), alloc("a1"), ""},
			{release("a1", CSIVolumeClaimStateUnpublishing), nil, ""},
			{release("a1", CSIVolumeClaimStateReadyToFree), nil, ""},
		}, 0, 0, 0, ""},
		{"release frees the slot for another writer", snw, []step{
			{taken("a1", "n1", w, snw), alloc("a1"), ""},
			{release("a1", CSIVolumeClaimStateReadyToFree), nil, ""},
			{taken("a2", "n2", w, snw), alloc("a2"), ""},
		}, 0, 1, 0, snw},
		{"RO then RW released in any order", mnsw, []step{
			{taken("ro", "n1", r, mnsw), alloc("ro"), ""},
			{taken("rw", "n1", w, mnsw), alloc("rw"), ""},
			{release("rw", CSIVolumeClaimStateReadyToFree), nil, ""},
			{release("ro", CSIVolumeClaimStateReadyToFree), nil, ""},
		}, 0, 0, 0, ""},
		{"a remaining reader keeps the mode", mnsw, []step{
			{taken("ro", "n1", r, mnsw), alloc("ro"), ""},
			{taken("rw", "n1", w, mnsw), alloc("rw"), ""},
			{release("rw", CSIVolumeClaimStateReadyToFree), nil, ""},
		}, 1, 0, 0, mnsw},
		{"attachment mode cannot change", mnmw, []step{
			{taken("a1", "n1", w, mnmw), alloc("a1"), ""},
			{&CSIVolumeClaim{AllocationID: "a2", Mode: w, AccessMode: mnmw, AttachmentMode: CSIVolumeAttachmentModeBlockDevice}, alloc("a2"), CSIErrAttachmentChange},
		}, 0, 1, 0, mnmw},
		{"GC pseudo-claim changes nothing", snw, []step{
			{taken("a1", "n1", w, snw), alloc("a1"), ""},
			{&CSIVolumeClaim{Mode: CSIVolumeClaimGC, NodeID: "n1", State: CSIVolumeClaimStateTaken}, nil, ""},
		}, 0, 1, 0, snw},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := testVolume(tc.mode)
			for i, s := range tc.steps {
				err := v.Claim(s.claim, s.alloc)
				switch {
				case s.wantErr == "" && err != nil:
					t.Fatalf("step %d: %v", i, err)
				case s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr)):
					t.Fatalf("step %d: error %v, want one containing %q", i, err, s.wantErr)
				}
			}
			if len(v.ReadAllocs) != tc.readers || len(v.ReadClaims) != tc.readers {
				t.Errorf("readers = %d allocs, %d claims; want %d", len(v.ReadAllocs), len(v.ReadClaims), tc.readers)
			}
			if len(v.WriteAllocs) != tc.writers || len(v.WriteClaims) != tc.writers {
				t.Errorf("writers = %d allocs, %d claims; want %d", len(v.WriteAllocs), len(v.WriteClaims), tc.writers)
			}
			if len(v.PastClaims) != tc.past {
				t.Errorf("past claims = %d, want %d", len(v.PastClaims), tc.past)
			}
			if v.AccessMode != tc.wantAccess {
				t.Errorf("access mode = %q, want %q", v.AccessMode, tc.wantAccess)
			}
			if tc.wantAccess == "" && v.AttachmentMode != "" {
				t.Errorf("attachment mode = %q, want reset", v.AttachmentMode)
			}
		})
	}
}

func TestCSIVolumeClaimCheckpointKeepsFacts(t *testing.T) {
	v := testVolume(CSIVolumeAccessModeMultiNodeSingleWriter)
	if err := v.Claim(taken("ro", "n1", CSIVolumeClaimRead, CSIVolumeAccessModeMultiNodeSingleWriter), alloc("ro")); err != nil {
		t.Fatal(err)
	}
	// The release's sender knows only the allocation: the checkpoint keeps
	// the mode it held (RO), the nodes and the publish context.
	if err := v.Claim(&CSIVolumeClaim{AllocationID: "ro", Mode: CSIVolumeClaimGC, State: CSIVolumeClaimStateUnpublishing}, nil); err != nil {
		t.Fatal(err)
	}
	past := v.PastClaims["ro"]
	switch {
	case past == nil:
		t.Fatal("no past claim")
	case past.Mode != CSIVolumeClaimRead:
		t.Errorf("mode = %v, want read", past.Mode)
	case past.NodeID != "n1" || past.ExternalNodeID != "csi-n1" || past.ExternalVolumeID != "ext-vol":
		t.Errorf("ids lost: %+v", past)
	case past.PublishContext["k"] != "v":
		t.Errorf("publish context lost: %+v", past.PublishContext)
	case past.State != CSIVolumeClaimStateUnpublishing:
		t.Errorf("state = %v", past.State)
	}
	// A later checkpoint sent without facts still keeps them.
	if err := v.Claim(&CSIVolumeClaim{AllocationID: "ro", State: CSIVolumeClaimStateNodeDetached}, nil); err != nil {
		t.Fatal(err)
	}
	if got := v.PastClaims["ro"]; got.ExternalNodeID != "csi-n1" || got.State != CSIVolumeClaimStateNodeDetached {
		t.Errorf("second checkpoint: %+v", got)
	}
}

func TestCSIVolumeMaxClaims(t *testing.T) {
	v := testVolume(CSIVolumeAccessModeMultiNodeMultiWriter)
	for i := 0; i < MaxCSIClaimsPerVolume; i++ {
		id := "a" + itoa(i)
		if err := v.Claim(taken(id, "n", CSIVolumeClaimWrite, CSIVolumeAccessModeMultiNodeMultiWriter), alloc(id)); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	err := v.Claim(taken("over", "n", CSIVolumeClaimWrite, CSIVolumeAccessModeMultiNodeMultiWriter), alloc("over"))
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), CSIErrMaxClaims) {
		t.Fatalf("claim past the bound: %v", err)
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{digits[i%10]}, b...)
	}
	return string(b)
}

func TestCSIVolumeUnschedulable(t *testing.T) {
	v := testVolume(CSIVolumeAccessModeSingleNodeWriter)
	v.Schedulable = false
	err := v.Claim(taken("a1", "n1", CSIVolumeClaimWrite, CSIVolumeAccessModeSingleNodeWriter), alloc("a1"))
	if err == nil || !strings.Contains(err.Error(), CSIErrUnschedulable) {
		t.Fatalf("claim of an unschedulable volume: %v", err)
	}
}

func TestCSIVolumeReleaseTerminal(t *testing.T) {
	v := testVolume(CSIVolumeAccessModeMultiNodeMultiWriter)
	for _, id := range []string{"live", "done", "gone"} {
		if err := v.Claim(taken(id, "n1", CSIVolumeClaimWrite, CSIVolumeAccessModeMultiNodeMultiWriter), alloc(id)); err != nil {
			t.Fatal(err)
		}
	}
	v.ReleaseTerminal(func(id string) (bool, bool) {
		switch id {
		case "live":
			return true, false
		case "done":
			return true, true
		}
		return false, false
	})
	got := v.PastClaimIDs()
	if len(got) != 2 || got[0] != "done" || got[1] != "gone" {
		t.Fatalf("past claims = %v, want [done gone]", got)
	}
	if v.PastClaims["done"].State != CSIVolumeClaimStateUnpublishing || v.PastClaims["done"].ExternalNodeID != "csi-n1" {
		t.Errorf("past claim: %+v", v.PastClaims["done"])
	}
}

func TestCSIVolumeValidate(t *testing.T) {
	ok := func() *CSIVolume { return testVolume(CSIVolumeAccessModeSingleNodeWriter) }
	cases := []struct {
		name string
		mut  func(v *CSIVolume)
		want string
	}{
		{"valid", func(*CSIVolume) {}, ""},
		{"no id", func(v *CSIVolume) { v.ID = "" }, "ID: missing"},
		{"bad id", func(v *CSIVolume) { v.ID = "a/b" }, "ID \"a/b\""},
		{"no plugin", func(v *CSIVolume) { v.PluginID = "" }, "PluginID: missing"},
		{"no namespace", func(v *CSIVolume) { v.Namespace = "" }, "Namespace: missing"},
		{"no capability", func(v *CSIVolume) { v.RequestedCapabilities = nil }, "at least one capability"},
		{"bad access mode", func(v *CSIVolume) { v.RequestedCapabilities[0].AccessMode = "x" }, "access_mode \"x\""},
		{"clone and snapshot", func(v *CSIVolume) { v.CloneID, v.SnapshotID = "a", "b" }, "only one may be set"},
		{"topology without segments", func(v *CSIVolume) { v.Topologies = []*CSITopology{{}} }, "needs segments"},
		{"capacity order", func(v *CSIVolume) { v.RequestedCapacityMin, v.RequestedCapacityMax = 10, 5 }, "above capacity_max"},
		{"secret value never echoed", func(v *CSIVolume) {
			v.Secrets = map[string]string{"": "hunter2"}
		}, "secrets: a key is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := ok()
			tc.mut(v)
			err := v.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v, want ErrInvalid containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("secret in error: %v", err)
			}
		})
	}
}

func TestCSIVolumeMerge(t *testing.T) {
	base := func() *CSIVolume {
		v := testVolume(CSIVolumeAccessModeSingleNodeWriter)
		v.ExternalID = "ext"
		v.Parameters = map[string]string{"p": "1"}
		return v
	}
	cases := []struct {
		name  string
		inUse bool
		mut   func(u *CSIVolume)
		want  string
	}{
		{"secrets replaced", false, func(u *CSIVolume) { u.Secrets = map[string]string{"s": "new"} }, ""},
		{"external id immutable", false, func(u *CSIVolume) { u.ExternalID = "other" }, "external_id cannot be updated"},
		{"plugin immutable", false, func(u *CSIVolume) { u.PluginID = "other" }, "plugin_id cannot be updated"},
		{"parameters immutable", false, func(u *CSIVolume) { u.Parameters = map[string]string{"p": "2"} }, "parameters cannot be updated"},
		{"capabilities keep the pair in use", true, func(u *CSIVolume) {
			u.RequestedCapabilities = []*CSIVolumeCapability{{AccessMode: CSIVolumeAccessModeMultiNodeReader, AttachmentMode: CSIVolumeAttachmentModeFilesystem}}
		}, "must keep"},
		{"mount options immutable in use", true, func(u *CSIVolume) { u.MountOptions = &CSIMountOptions{FSType: "ext4"} }, "mount_options"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := base()
			if tc.inUse {
				if err := v.Claim(taken("a1", "n1", CSIVolumeClaimWrite, CSIVolumeAccessModeSingleNodeWriter), alloc("a1")); err != nil {
					t.Fatal(err)
				}
			}
			u := base()
			tc.mut(u)
			err := v.Merge(u)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if v.Secrets["s"] != "new" {
					t.Errorf("secrets not replaced: %v", v.Secrets)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCSIPluginCounts(t *testing.T) {
	p := NewCSIPlugin("hostpath")
	p.AddNode("n1", &CSIInfo{Healthy: true, Provider: "prov", ProviderVersion: "1"})
	p.AddNode("n2", &CSIInfo{Healthy: false}) // never healthy: not recorded
	p.AddController("n1", &CSIInfo{Healthy: true, RequiresControllerPlugin: true, AllocID: "a1"})
	if p.NodesHealthy != 1 || len(p.Nodes) != 1 || p.ControllersHealthy != 1 || !p.ControllerRequired {
		t.Fatalf("after adds: %+v", p)
	}
	p.AddNode("n1", &CSIInfo{Healthy: false}) // turns unhealthy: kept, not counted
	if p.NodesHealthy != 0 || len(p.Nodes) != 1 {
		t.Fatalf("after unhealthy: healthy %d, nodes %d", p.NodesHealthy, len(p.Nodes))
	}
	p.DeleteAlloc("other", "n1")
	if len(p.Controllers) != 1 {
		t.Fatal("an unrelated alloc removed the controller")
	}
	p.DeleteAlloc("a1", "n1")
	if len(p.Controllers) != 0 || p.ControllersHealthy != 0 {
		t.Fatalf("controller of a1 not removed: %+v", p.Controllers)
	}
	p.SetJobCounts("default", "plugin-nodes", 0, 3)
	p.SetJobCounts("default", "plugin-ctrl", 1, 0)
	if p.NodesExpected != 3 || p.ControllersExpected != 1 {
		t.Fatalf("expected = %d/%d", p.ControllersExpected, p.NodesExpected)
	}
	p.DeleteNode("n1")
	if p.IsEmpty() {
		t.Fatal("empty while jobs expect instances")
	}
	p.SetJobCounts("default", "plugin-nodes", 0, 0)
	p.SetJobCounts("default", "plugin-ctrl", 0, 0)
	if !p.IsEmpty() {
		t.Fatalf("not empty: %+v", p)
	}
	v := testVolume(CSIVolumeAccessModeSingleNodeWriter)
	v.Denormalize(nil)
	if v.Schedulable {
		t.Fatal("volume without plugin is schedulable")
	}
}
