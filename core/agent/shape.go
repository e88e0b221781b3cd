package agent

import "github.com/drover-org/drover/core/hclguard"

// checkShape refuses a file that is too large, or that nests or chains
// operators past what the HCL parser can take (hclguard, shared with job
// files).
func checkShape(filename string, src []byte) error {
	if diags := hclguard.Check(filename, src); diags.HasErrors() {
		return diagError(diags)
	}
	return nil
}
