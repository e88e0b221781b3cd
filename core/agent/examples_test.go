package agent

import (
	"path/filepath"
	"runtime"
	"testing"
)

// The example agent configs in examples/agent parse and validate.
func TestExampleAgentConfigsParse(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "examples", "agent")
	files, err := filepath.Glob(filepath.Join(dir, "*.hcl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example configs in %s: %v", dir, err)
	}
	for _, f := range files {
		if _, err := ParseConfigFile(f); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
	}
}
