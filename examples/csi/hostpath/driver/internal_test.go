package hostpath

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseMountInfo(t *testing.T) {
	const table = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
45 22 8:1 /srv/state/volumes/0b6f /tmp/with\040space ro,relatime shared:1 - ext4 /dev/sda1 rw
46 22 8:1 /srv/other /mnt/x rw - ext4 /dev/sda1 rw
`
	got, err := parseMountInfo(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("parsed %d entries, want 3", len(got))
	}
	m := got[1]
	if m.MountPoint != "/tmp/with space" || m.volumeID() != "0b6f" || !m.readOnly() {
		t.Fatalf("entry = %+v (volume %q, ro %t)", m, m.volumeID(), m.readOnly())
	}
	if got[2].volumeID() != "" || got[0].volumeID() != "" {
		t.Fatalf("non-volume mounts read as volumes: %q %q", got[0].volumeID(), got[2].volumeID())
	}
	if _, err := parseMountInfo(strings.NewReader("short line\n")); err == nil {
		t.Fatal("malformed line accepted")
	}
}

func TestParseEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"unix:///csi/csi.sock": "/csi/csi.sock",
		"unix:/csi/csi.sock":   "/csi/csi.sock",
		"unix://csi.sock":      "csi.sock",
		"/csi//csi.sock":       "/csi/csi.sock",
	} {
		got, err := ParseEndpoint(in)
		if err != nil || got != want {
			t.Errorf("ParseEndpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "unix://", "tcp://127.0.0.1:10000"} {
		if _, err := ParseEndpoint(bad); err == nil {
			t.Errorf("ParseEndpoint(%q) accepted", bad)
		}
	}
}

func TestListenRefusesNonSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "csi.sock")
	if err := os.WriteFile(path, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path); err == nil {
		t.Fatal("Listen replaced a regular file")
	}
	if b, _ := os.ReadFile(path); string(b) != "data" {
		t.Fatal("Listen changed the regular file")
	}
	// A stale socket is replaced.
	sock := filepath.Join(t.TempDir(), "csi.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	l2, err := Listen(sock)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	l2.Close()
}

func TestWriteStateAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.json")
	for i := range 3 {
		if err := writeState(path, map[string]int{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	var got map[string]int
	if err := readState(path, &got); err != nil || got["n"] != 2 {
		t.Fatalf("read back %v, %v; want n=2", got, err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"s.json"}) {
		t.Fatalf("directory holds %v, want only s.json (no temp files)", names)
	}
}

// A node state file of the driver's first layout, stages keyed by volume
// ID, loads with its stages keyed by staging path.
func TestLoadNodeStoreRekeysStages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node-state.json")
	old := `{"version": 1, "stages": {"v1": {"volume_id": "v1", "staging_path": "/s/v1", "access_mode": "SINGLE_NODE_WRITER"}}, "publishes": {}}`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := loadNodeStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if rec, ok := s.st.Stages["/s/v1"]; !ok || rec.VolumeID != "v1" || len(s.st.Stages) != 1 {
		t.Fatalf("stages = %+v; want v1 keyed by its staging path", s.st.Stages)
	}
}
