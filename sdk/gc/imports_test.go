package gc_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The SDK is what a third-party GC plugin imports: it never imports the core.
func TestNoCoreImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/drover-org/drover/core/") {
			t.Errorf("sdk/gc depends on %s", p)
		}
	}
}
