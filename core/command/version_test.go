package command

import (
	"bytes"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/command/cli"
)

// TestVersionOutput: `drover version` names drover; the binary started as
// `nomad` (a symlink on PATH for Nomad's tools) prints Nomad's first line,
// "Nomad v<version>", which those tools read.
func TestVersionOutput(t *testing.T) {
	for _, tc := range []struct {
		name, first string
		more        string
	}{
		{"drover", "drover v" + Version, ""},
		{"nomad", "Nomad v" + Version, "drover v" + Version},
		{"nomad.exe", "Nomad v" + Version, "drover v" + Version},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			ui := &cli.UI{Out: &out, Err: &errOut}
			c := &VersionCommand{ui: ui, name: tc.name}
			if code := c.Run(nil); code != cli.ExitOK {
				t.Fatalf("exit %d", code)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if lines[0] != tc.first {
				t.Fatalf("first line %q, want %q (output %q)", lines[0], tc.first, out.String())
			}
			if tc.more != "" && !strings.Contains(out.String(), tc.more) {
				t.Fatalf("output %q lacks %q", out.String(), tc.more)
			}
			if errOut.Len() != 0 {
				t.Fatalf("stderr: %q", errOut.String())
			}
		})
	}
}
