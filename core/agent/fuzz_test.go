package agent

import (
	"testing"
)

// FuzzParseConfig feeds arbitrary source to the agent config parser and
// what is built on a parsed config: merging onto the -dev defaults,
// validation, the plugin stanzas' settings. None may panic, and a config
// that parsed must parse again from the same source. Parse only: nothing
// here touches the network or writes a file.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("server { enabled = true }\n"))
	f.Add([]byte("data_dir = \"/x\"\nserver {\n enabled = true\n eval_gc_threshold = \"1h\"\n job_gc_interval = \"5m\"\n}\n"))
	f.Add([]byte(`{"data_dir": "/x", "server": {"enabled": true, "num_schedulers": 4}, "plugin": {"p": {"args": ["-v"]}}}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		// The JSON form goes through the same decoder and rules.
		if jc, err := ParseConfig("fuzz.json", src); err == nil && (jc.Ports == nil || jc.Region == "") {
			t.Fatalf("JSON: defaults not applied: %+v", jc)
		}
		c, err := ParseConfig("fuzz.hcl", src)
		frag, ferr := parseConfigFragment("fuzz.hcl", src)
		if err == nil && ferr != nil {
			t.Fatalf("ParseConfig accepted what parseConfigFragment refused: %v", ferr)
		}
		if ferr != nil {
			return
		}
		merged := DevConfig().Merge(frag)
		merged.applyDefaults()
		_ = merged.Validate()
		for _, dev := range []bool{false, true} {
			if _, err := rawexecEnv(merged.Plugins, dev); err != nil {
				t.Fatalf("raw_exec plugin config failed after its stanzas checked out (dev %v): %v", dev, err)
			}
		}
		if _, err := pluginStanzas(frag); err != nil {
			t.Fatalf("plugin stanzas failed after they checked out: %v", err)
		}
		if err == nil {
			if _, err := ParseConfig("fuzz.hcl", src); err != nil {
				t.Fatalf("the same source parsed once, then failed: %v", err)
			}
			if c.Ports == nil || c.Region == "" {
				t.Fatalf("defaults not applied: %+v", c)
			}
		}
	})
}
