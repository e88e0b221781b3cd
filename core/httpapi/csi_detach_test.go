package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
)

// Detach refuses, with 404 naming it, a node ID no node has, and a node
// holding no claim of the volume; neither writes anything.
func TestCSIVolumeDetachRefusals(t *testing.T) {
	srv := devServer(t, false)
	st := srv.State()
	nodeID := addCSINode(t, st, "hp")
	h := New(serverConfig(srv, Config{}))
	ts := httptest.NewServer(h.Handler())
	t.Cleanup(ts.Close)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	vols := c.CSIVolumes()
	if _, err := vols.Register(csiTestVolume("vol1", "hp"), nil); err != nil {
		t.Fatalf("Register: %v", err)
	}
	before, _ := st.CSIVolumeRaw(nil, "default", "vol1")
	const bogus = "00000000-0000-4000-8000-00000000beef"
	for node, want := range map[string]string{
		bogus:  "404 (node not found: " + bogus + ")",
		nodeID: "404 (node " + nodeID + ` holds no claim of volume "vol1")`,
	} {
		err := vols.Detach("vol1", node, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("detach from %s: %v, want %q", node, err, want)
		}
	}
	if err := vols.Detach("vol1", strings.Repeat("n", 200), nil); err == nil || !strings.Contains(err.Error(), "400 (node ID: longer than 128 bytes)") {
		t.Errorf("detach from a long node ID: %v", err)
	}
	if after, _ := st.CSIVolumeRaw(nil, "default", "vol1"); after.ModifyIndex != before.ModifyIndex {
		t.Errorf("a refused detach wrote the volume: index %d → %d", before.ModifyIndex, after.ModifyIndex)
	}
}
