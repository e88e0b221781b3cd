package reschedule_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The package is shared arithmetic for every scheduler plugin: it imports
// the protocol, derivedid (itself standard library only) and the standard
// library, so any plugin may use it.
func TestImportsOnlyProtoAndStdlib(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(p, "/")
		if strings.Contains(first, ".") && p != "github.com/drover-org/drover/sdk/proto/schedulerpb" &&
			p != "github.com/drover-org/drover/sdk/scheduler/derivedid" {
			t.Errorf("sdk/scheduler/reschedule imports %s; it may import only sdk/proto/schedulerpb, sdk/scheduler/derivedid and the standard library", p)
		}
	}
}
