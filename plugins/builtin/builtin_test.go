package builtin

import (
	"testing"

	"github.com/drover-org/drover/core/pluginhost"
)

// Every built-in registers its in-process declaration, so the agent can
// leave it idle until first needed; raw_exec registers its fingerprint.
func TestEveryBuiltinDeclaresInProcess(t *testing.T) {
	for _, p := range Catalog {
		ip := pluginhost.BuiltinInProcess(p.Name)
		if ip.Declare == nil {
			t.Errorf("%s registers no in-process declaration", p.Name)
			continue
		}
		decl, err := ip.Declare(t.Context())
		if err != nil || decl == nil {
			t.Errorf("%s: in-process declaration %v, %v", p.Name, decl, err)
		}
	}
	fp := pluginhost.BuiltinInProcess("driver-rawexec").Fingerprint
	if fp == nil {
		t.Fatal("raw_exec registers no in-process fingerprint")
	}
	// Not enabled by its config: undetected, with the reason.
	resp, err := fp(t.Context(), nil)
	if err != nil || resp.GetDetected() || resp.GetHealthDescription() == "" {
		t.Errorf("raw_exec fingerprint without a config: %v, %v; want undetected with a reason", resp, err)
	}
	if _, err := fp(t.Context(), []string{"DROVER_RAWEXEC_PLUGIN_CONFIG={\"nope\":1}"}); err == nil {
		t.Error("raw_exec fingerprint took a config with an unknown key")
	}
}
