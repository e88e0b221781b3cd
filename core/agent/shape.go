package agent

import (
	"fmt"

	"github.com/drover-org/drover/core/hclguard"
)

// maxConfigBytes bounds one agent config file; real ones are a few KiB.
const maxConfigBytes = 1 << 20

// checkShape refuses a file over maxConfigBytes, and source that nests or
// chains operators past what the HCL parser can take (hclguard).
func checkShape(filename string, src []byte) error {
	if len(src) > maxConfigBytes {
		return fmt.Errorf("%s: the file is %d bytes; an agent config file may be at most %d", filename, len(src), maxConfigBytes)
	}
	if diags := hclguard.Check(filename, src); diags.HasErrors() {
		return diagError(diags)
	}
	return nil
}
