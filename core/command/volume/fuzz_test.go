package volume

import (
	"strings"
	"testing"
)

// FuzzParseVolumeSpec: any volume file either parses or fails with an
// error that names the file; it never panics, and a parsed volume can be
// validated. Volume files come from users and reach the API as they are.
func FuzzParseVolumeSpec(f *testing.F) {
	f.Add([]byte(volumeHCL))
	f.Add([]byte(`{"ID":"v","PluginID":"p"}`))
	f.Add([]byte("id = \"x\"\ntype = \"csi\"\nplugin_id = \"p\"\ncapacity_min = \"1.5 GiB\"\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		v, err := parseVolumeSpec("fuzz.hcl", src)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.hcl") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if v == nil {
			t.Fatal("nil volume without an error")
		}
		v.Namespace = "default"
		_ = v.Validate()
	})
}
