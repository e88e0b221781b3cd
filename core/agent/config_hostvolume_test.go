package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostVolumeConfig: Nomad's client host_volume blocks, in HCL and
// JSON, reach the node's HostVolumes; a later file's block of a name
// replaces the earlier one.
func TestHostVolumeConfig(t *testing.T) {
	dir := t.TempDir()
	data, certs := filepath.Join(dir, "data"), filepath.Join(dir, "certs")
	for _, d := range []string{data, certs} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hcl := "data_dir = \"/x\"\nclient {\n  enabled = true\n  servers = [\"s:4647\"]\n" +
		"  host_volume \"data\" {\n    path = \"" + data + "/\"\n  }\n" +
		"  host_volume \"certs\" {\n    path = \"" + certs + "\"\n    read_only = true\n  }\n}\n"
	json := `{"data_dir": "/x", "client": {"enabled": true, "servers": ["s:4647"], "host_volume": {` +
		`"data": {"path": "` + data + `/"}, "certs": {"path": "` + certs + `", "read_only": true}}}}`
	for _, tc := range []struct{ name, file, src string }{{"hcl", "agent.hcl", hcl}, {"json", "agent.json", json}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig(tc.file, []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			hv := c.Client.hostVolumes()
			if len(hv) != 2 || hv["data"].Path != data || hv["data"].ReadOnly || hv["data"].Name != "data" ||
				hv["certs"].Path != certs || !hv["certs"].ReadOnly {
				t.Fatalf("host volumes = %+v", hv)
			}
		})
	}

	// Merging: the later file's "data" wins, "certs" stays.
	base, over := filepath.Join(dir, "a.hcl"), filepath.Join(dir, "b.hcl")
	writeFile(t, base, []byte(hcl), 0o600)
	writeFile(t, over, []byte("client {\n  host_volume \"data\" {\n    path = \""+certs+"\"\n    read_only = true\n  }\n}\n"), 0o600)
	c, err := LoadConfig(false, base, over)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	hv := c.Client.hostVolumes()
	if len(hv) != 2 || hv["data"].Path != certs || !hv["data"].ReadOnly || hv["certs"] == nil {
		t.Fatalf("merged host volumes = %+v", hv)
	}
}

func TestHostVolumeConfigErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeFile(t, file, []byte("x"), 0o600)
	head := "data_dir = \"/x\"\nclient {\n  enabled = true\n  servers = [\"s:4647\"]\n"
	vol := func(name, body string) string {
		return head + "  host_volume \"" + name + "\" {\n" + body + "  }\n}\n"
	}
	for _, tc := range []struct{ name, src, want string }{
		{"missing path", vol("data", ""), `agent.hcl:5:22: Missing required argument`},
		{"relative path", vol("data", "    path = \"srv/data\"\n"),
			`agent.hcl:6:12: client.host_volume.data.path: "srv/data" must be an absolute path`},
		{"missing directory", vol("data", "    path = \""+dir+"/nope\"\n"),
			`agent.hcl:6:12: client.host_volume.data.path: "` + dir + `/nope" must exist`},
		{"not a directory", vol("data", "    path = \""+file+"\"\n"),
			`agent.hcl:6:12: client.host_volume.data.path: "` + file + `" must be a directory`},
		{"bad name", vol("a/b", "    path = \""+dir+"\"\n"), `agent.hcl:5:3: client.host_volume.a/b: name "a/b" must be`},
		{"twice", head + "  host_volume \"d\" {\n    path = \"" + dir + "\"\n  }\n  host_volume \"d\" {\n    path = \"" + dir + "\"\n  }\n}\n",
			`client.host_volume.d: host volume "d" is declared twice`},
		{"unknown key", vol("data", "    path = \""+dir+"\"\n    mode = \"rw\"\n"), `agent.hcl:7:5: Unsupported argument`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("agent.hcl", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
}
